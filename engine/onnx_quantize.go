package engine

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/onnx"
	"github.com/synapse-embed/synapse/wire"
)

// QuantizeONNX writes the dynamically quantized graph of a verified ONNX
// artifact (a .onnx file) with synapse's own ONNX writer, then hashes it.
// It needs no ONNX Runtime. A graph the quantizer refuses is
// artifact_invalid, with the reason; a failure leaves nothing at OutPath.
func QuantizeONNX(_ context.Context, req QuantizeRequest) (QuantizeResult, error) {
	if !strings.EqualFold(req.FType, onnx.FTypeInt8) {
		return QuantizeResult{}, wire.Errorf(wire.CodeBadRequest, "ftype %q: an ONNX graph is quantized to %s", req.FType, onnx.FTypeInt8)
	}
	if err := checkQuantizeOut(req); err != nil {
		return QuantizeResult{}, err
	}
	if err := checkDigestSyntax(req.Digest); err != nil {
		return QuantizeResult{}, err
	}
	if st, err := os.Stat(req.Path); err != nil || st.IsDir() {
		return QuantizeResult{}, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: want a .onnx file", req.Path)
	}
	_, got, err := hfmodel.Digest(req.Path)
	if err != nil {
		return QuantizeResult{}, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	if got != req.Digest {
		return QuantizeResult{}, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: digest %s; want %s", req.Path, got, req.Digest)
	}
	start := time.Now()
	if _, err := onnx.QuantizeFile(req.Path, req.OutPath); err != nil {
		code := wire.CodeInternal
		if errors.Is(err, onnx.ErrCannotQuantize) || errors.Is(err, onnx.ErrFormat) {
			code = wire.CodeArtifactInvalid
		}
		return QuantizeResult{}, wire.Errorf(code, "%w", err)
	}
	took := time.Since(start)
	size, digest, err := hfmodel.Digest(req.OutPath)
	if err != nil {
		os.Remove(req.OutPath)
		return QuantizeResult{}, wire.Errorf(wire.CodeInternal, "quantized copy: %w", err)
	}
	return QuantizeResult{Digest: digest, Size: size, Took: took}, nil
}
