package engine

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/engine/libpath"
)

// ORTLib is the ONNX Runtime release synapse loads, and where it is looked
// for (libpath's search order): --ort-lib, SYNAPSE_ORT_LIB,
// PREFIX/lib/synapse/onnxruntime/1.30.0 beside PREFIX/bin/synapse,
// $XDG_DATA_HOME/synapse/onnxruntime/1.30.0, .cache/onnxruntime/1.30.0 in
// the checkout.
var ORTLib = libpath.Lib{
	Name: "ONNX Runtime", Flag: "--ort-lib", Env: "SYNAPSE_ORT_LIB", Dir: "onnxruntime", Release: ORTRelease,
	Check: func(path string) error { _, err := ORTLibrary(path); return err },
	Get: fmt.Sprintf("run `make setup` in a synapse checkout (it fetches %s from the npm package %s into .cache/onnxruntime/%s), "+
		"then `make install PREFIX=DIR`, which puts it in DIR/lib/synapse/onnxruntime/%s, where DIR/bin/synapse finds it; "+
		"or point --ort-lib or SYNAPSE_ORT_LIB at another build's %s", ortLibName, ORTNPMPackage, ORTRelease, ORTRelease, ortLibName),
}

// The ONNX Runtime build synapse is pinned to (see the Makefile): the
// official Linux x64 library the npm package ships. Other builds from
// release 1.24 on work too (SYNAPSE_ORT_LIB).
const (
	ORTRelease    = "1.30.0"
	ORTNPMPackage = "onnxruntime-node@1.30.0"
)

// ONNXOptions configures the ONNX Runtime engine.
type ONNXOptions struct {
	// Lib is libonnxruntime.so.1 or the directory holding it.
	Lib string
	// PadTokens lets the sequences of an EMBED_BATCH whose lengths differ
	// by at most this many tokens share one ONNX Runtime run, padded to the
	// run's longest with the pad token under an attention mask of zeros;
	// only the real tokens are pooled. 0 (the default) runs only sequences
	// of equal length together, unpadded. Padding never applies to RERANK,
	// to a graph without an attention_mask input, to a graph whose results
	// depend on the batch (they run one sequence per run), or to a graph's
	// own sentence_embedding unless a load-time probe shows the graph
	// ignores masked tokens. docs/onnx-bench.md measures it.
	PadTokens int
}

// ortNeed says where the library comes from.
func ortNeed() string {
	return fmt.Sprintf("synapse runs ONNX models with ONNX Runtime %s (libonnxruntime.so.1 from npm %s): run `make setup` or point --ort-lib / SYNAPSE_ORT_LIB at it", ORTRelease, ORTNPMPackage)
}

// ortLibName is the file the npm package ships and ORTLibrary looks for in a directory.
const ortLibName = "libonnxruntime.so.1"

// ORTLibrary resolves lib (the library file or a directory holding it) to
// the library file, or explains how to get it.
func ORTLibrary(lib string) (string, error) {
	if lib == "" {
		return "", fmt.Errorf("engine: no ONNX Runtime library given; %s", ortNeed())
	}
	abs, err := filepath.Abs(lib)
	if err != nil {
		return "", fmt.Errorf("engine: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("engine: ONNX Runtime library %s: %w; %s", abs, err, ortNeed())
	}
	if st.IsDir() {
		for _, name := range []string{ortLibName, "libonnxruntime.so"} {
			if p := filepath.Join(abs, name); fileExists(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("engine: no %s in %s; %s", ortLibName, abs, ortNeed())
	}
	return abs, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
