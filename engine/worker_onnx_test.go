//go:build cgo

package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
	"github.com/synapse-embed/synapse/wire"
)

// onnxWireLoad is LOAD of a generated ONNX model directory.
func onnxWireLoad(t testing.TB, id uint64, dir string, rc wire.RuntimeConfig) *wire.Load {
	r := onnxLoad(t, dir, rc)
	return &wire.Load{ReqID: id, ArtifactPath: r.Path, ArtifactDigest: r.Digest, Format: r.Format, RuntimeConfig: r.Config}
}

// A worker without the llama.cpp libraries serves ONNX models: every
// request type through the real `synapse worker`.
func TestONNXWorkerWithoutLlama(t *testing.T) {
	w := startWorkerEnv(t, "SYNAPSE_LLAMA_LIB="+t.TempDir(), "SYNAPSE_ORT_LIB="+testenv.ORTLib(t))
	dir, enc := writeEncoder(t, onnxtest.Tiny())
	msg := w.call(onnxWireLoad(t, 1, dir, wire.RuntimeConfig{Threads: 1}))
	l, ok := msg.(*wire.Loaded)
	if !ok || l.Dims != enc.Hidden {
		t.Fatalf("LOAD: got %#v; want LOADED with dims %d", msg, enc.Hidden)
	}
	req := &wire.EmbedBatch{ReqID: 2, ModelRef: l.ModelRef, Pooling: PoolingCLS, Normalize: true}
	for i, s := range testSeqs {
		req.Items = append(req.Items, wire.Item{ID: uint64(i), NTokens: len(s)})
		req.IDs = append(req.IDs, s...)
	}
	msg = w.call(req)
	v, ok := msg.(*wire.Vectors)
	if !ok || v.N != len(testSeqs) || v.Dims != enc.Hidden {
		t.Fatalf("EMBED_BATCH: got %#v; want %d vectors of %d", msg, len(testSeqs), enc.Hidden)
	}
	for i, s := range testSeqs {
		if d := maxDiff(v.Data[i*v.Dims:(i+1)*v.Dims], expected(enc, s, PoolingCLS, true)); d > 1e-5 {
			t.Errorf("vector %d: max |Δ| %g", i, d)
		}
	}
	pong, ok := w.call(&wire.Ping{ReqID: 3}).(*wire.Pong)
	if !ok || pong.RSSMB <= 0 || !slices.Equal(pong.ModelsLoaded, []string{l.ModelRef}) {
		t.Errorf("PONG %+v; want an rss and models_loaded [%s]", pong, l.ModelRef)
	}
	wantErr(t, w.call(&wire.Tokenize{ReqID: 4, ModelRef: l.ModelRef, Text: "hello"}), 4, wire.CodeUnsupported)
	wantErr(t, w.call(&wire.Generate{ReqID: 5, ModelRef: l.ModelRef, MaxTokens: 2, IDs: []int32{2}}), 5, wire.CodeUnsupported)
	if _, ok := w.call(&wire.Unload{ReqID: 6, ModelRef: l.ModelRef}).(*wire.Unloaded); !ok {
		t.Error("UNLOAD: no UNLOADED")
	}
	if pong, ok := w.call(&wire.Ping{ReqID: 7}).(*wire.Pong); !ok || len(pong.ModelsLoaded) != 0 {
		t.Errorf("PONG after UNLOAD %+v; want no models", pong)
	}
}

// A worker without ONNX Runtime answers an ONNX LOAD with ERR unsupported
// naming the library and where it comes from, and still serves GGUF models.
func TestWorkerMissingORT(t *testing.T) {
	dir := t.TempDir()
	w := startWorker(t, "SYNAPSE_ORT_LIB="+dir)
	model, _ := writeEncoder(t, onnxtest.Tiny())
	msg := w.call(onnxWireLoad(t, 1, model, wire.RuntimeConfig{}))
	wantErr(t, msg, 1, wire.CodeUnsupported)
	if e, ok := msg.(*wire.Err); ok {
		for _, want := range []string{dir, "libonnxruntime.so.1", ORTNPMPackage, "make setup", "SYNAPSE_ORT_LIB"} {
			if !strings.Contains(e.Msg, want) {
				t.Errorf("ERR %q; want it to name %q", e.Msg, want)
			}
		}
	}
	w.load(2, "ref-bert-embed.gguf", embedConfig)
}
