package engine

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/hybridgroup/yzma/pkg/llama"
)

// llamaTokenize is llama.cpp's llama_tokenize, bound directly: yzma's
// llama.Tokenize runs the whole tokenizer twice, once only to size its
// output. Bound by loadLibrary.
var llamaTokenize func(vocab uintptr, text *byte, textLen int32, tokens *int32, nTokensMax int32, addSpecial, parseSpecial bool) int32

// bindTokenize binds llamaTokenize from the libllama.so in dir, which
// yzma has already loaded (dlopen returns the same library).
func bindTokenize(dir string) error {
	lib, err := purego.Dlopen(filepath.Join(dir, "libllama.so"), purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	sym, err := purego.Dlsym(lib, "llama_tokenize")
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	purego.RegisterFunc(&llamaTokenize, sym)
	return nil
}

// tokenize runs llama_tokenize once into a buffer sized for typical text
// (about one token per two bytes), and once more only when the text has more
// tokens than that.
func tokenize(vocab llama.Vocab, text string, addSpecial, parseSpecial bool) []int32 {
	ptr := unsafe.StringData(text)
	if len(text) == 0 {
		ptr = &emptyText[0]
	}
	buf := make([]int32, len(text)/2+8)
	n := llamaTokenize(uintptr(vocab), ptr, int32(len(text)), &buf[0], int32(len(buf)), addSpecial, parseSpecial)
	if n < 0 {
		buf = make([]int32, -n)
		n = llamaTokenize(uintptr(vocab), ptr, int32(len(text)), &buf[0], int32(len(buf)), addSpecial, parseSpecial)
	}
	return buf[:n:n]
}

var emptyText = [1]byte{0}
