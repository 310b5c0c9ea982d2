package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hybridgroup/yzma/pkg/llama"

	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/wire"
)

// Quantize writes a quantized copy of a verified artifact with llama.cpp's
// quantizer (llama_model_quantize, bound by yzma), then hashes the copy. A
// failure removes whatever the quantizer wrote. The quantizer cannot be
// interrupted: the module bounds it by killing the worker.
func (e *Llama) Quantize(_ context.Context, req QuantizeRequest) (QuantizeResult, error) {
	if e.closed {
		return QuantizeResult{}, wire.Errorf(wire.CodeInternal, "engine closed")
	}
	ftype, err := checkQuantize(req)
	if err != nil {
		return QuantizeResult{}, err
	}
	if _, err := verifyArtifact(req.Path, req.Digest); err != nil {
		return QuantizeResult{}, err
	}
	p := llama.ModelQuantizeDefaultParams()
	p.NThread = int32(req.Threads)
	p.Ftype = llama.Ftype(ftype)
	start := time.Now()
	logs.takeErrors()
	rc := llama.ModelQuantize(req.Path, req.OutPath, &p)
	took := time.Since(start)
	if rc != 0 {
		os.Remove(req.OutPath)
		return QuantizeResult{}, wire.Errorf(wire.CodeArtifactInvalid, "llama.cpp could not quantize %s to %s (status %d): %s", req.Path, ftype, rc, logs.takeErrors())
	}
	size, digest, err := gguf.Digest(req.OutPath)
	if err != nil {
		os.Remove(req.OutPath)
		return QuantizeResult{}, wire.Errorf(wire.CodeInternal, "quantized copy: %w", err)
	}
	return QuantizeResult{Digest: digest, Size: size, Took: took}, nil
}

// checkQuantize validates a request before anything is read or written and
// returns its file type.
func checkQuantize(req QuantizeRequest) (gguf.FileType, error) {
	ftype, err := gguf.ParseFileType(req.FType)
	if err != nil {
		return 0, wire.Errorf(wire.CodeBadRequest, "ftype: %w", err)
	}
	return ftype, checkQuantizeOut(req)
}

// checkQuantizeOut checks a request's threads and paths: out_path must be
// a new file in an existing directory, and not the artifact.
func checkQuantizeOut(req QuantizeRequest) error {
	bad := func(format string, args ...any) error {
		return wire.Errorf(wire.CodeBadRequest, format, args...)
	}
	switch {
	case req.Threads < 0 || req.Threads > maxThreads:
		return bad("threads %d: want 0 (default) to %d", req.Threads, maxThreads)
	case req.OutPath == "" || !filepath.IsAbs(req.OutPath):
		return bad("out_path %q: want an absolute path", req.OutPath)
	case strings.ContainsRune(req.Path+req.OutPath, 0):
		return bad("artifact_path and out_path must not contain NUL bytes")
	case filepath.Clean(req.OutPath) == filepath.Clean(req.Path):
		return bad("out_path is the artifact itself")
	}
	if _, err := os.Lstat(req.OutPath); err == nil {
		return bad("out_path %s exists; the quantizer writes only new files", req.OutPath)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return bad("out_path: %w", err)
	}
	if st, err := os.Stat(filepath.Dir(req.OutPath)); err != nil || !st.IsDir() {
		return bad("out_path %s: its directory does not exist", req.OutPath)
	}
	return nil
}
