package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/wire"
)

// writeTinyF16 writes TinyEmbedder (2 layers, 128 wide, F16) with a
// generated WordPiece vocabulary: a model whose matrices Q8_0 can quantize.
func writeTinyF16(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-f16.gguf")
	if err := modelgen.TinyEmbedder(modelgen.WordPieceVocab(modelgen.DemoWords)).Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The quantized copy is a GGUF of the asked file type whose weight matrices
// are Q8_0, and it embeds like its source.
func TestQuantizeQ8(t *testing.T) {
	e := testEngine(t)
	src := writeTinyF16(t)
	out := filepath.Join(t.TempDir(), "q8.gguf")
	res, err := e.Quantize(context.Background(), QuantizeRequest{Path: src, Digest: fileDigest(t, src), OutPath: out, FType: "q8_0", Threads: 1})
	if err != nil {
		t.Fatalf("Quantize: %v", err)
	}
	if got := fileDigest(t, out); res.Digest != got {
		t.Errorf("digest: got %s; the file hashes to %s", res.Digest, got)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if ft, ok := f.FileType(); !ok || ft != gguf.FileTypeQ8_0 {
		t.Errorf("general.file_type: got %v (set %t); want Q8_0", ft, ok)
	}
	if ti, _ := f.Tensor("blk.0.attn_q.weight"); ti.Type != gguf.GGMLTypeQ8_0 {
		t.Errorf("blk.0.attn_q.weight: got %v; want Q8_0", ti.Type)
	}
	if st, _ := os.Stat(out); st.Size() != res.Size || res.Size >= fileSize(t, src) {
		t.Errorf("size: got %d (file %d); want it smaller than the F16 source's %d", res.Size, st.Size(), fileSize(t, src))
	}
	seqs := [][]int32{{2, 10, 11, 12, 3}, {2, 40, 41, 42, 43, 44, 3}}
	a := embedWith(t, e, src, seqs)
	b := embedWith(t, e, out, seqs)
	for i := range seqs {
		if c := testenv.Cosine(a[i], b[i]); c < 0.999 {
			t.Errorf("sequence %d: cosine Q8_0 vs F16 %.6f; want ≥ 0.999", i, c)
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// embedWith loads path and returns one vector per sequence.
func embedWith(t testing.TB, e *Llama, path string, seqs [][]int32) [][]float32 {
	t.Helper()
	info, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: fileDigest(t, path), Config: embedConfig})
	if err != nil {
		t.Fatalf("Load %s: %v", path, err)
	}
	defer e.Unload(context.Background(), info.Ref)
	flat, dims, err := e.Embed(context.Background(), info.Ref, "", true, seqs)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(seqs))
	for i := range out {
		out[i] = flat[i*dims : (i+1)*dims]
	}
	return out
}

func TestQuantizeRefused(t *testing.T) {
	e := testEngine(t)
	src := writeTinyF16(t)
	digest := fileDigest(t, src)
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists.gguf")
	if err := os.WriteFile(exists, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	notGGUF := filepath.Join(dir, "text.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  QuantizeRequest
		code wire.Code
	}{
		{"unknown ftype", QuantizeRequest{Path: src, Digest: digest, OutPath: filepath.Join(dir, "a.gguf"), FType: "q9_9"}, wire.CodeBadRequest},
		{"output exists", QuantizeRequest{Path: src, Digest: digest, OutPath: exists, FType: "q8_0"}, wire.CodeBadRequest},
		{"relative output", QuantizeRequest{Path: src, Digest: digest, OutPath: "b.gguf", FType: "q8_0"}, wire.CodeBadRequest},
		{"no output directory", QuantizeRequest{Path: src, Digest: digest, OutPath: filepath.Join(dir, "none", "c.gguf"), FType: "q8_0"}, wire.CodeBadRequest},
		{"negative threads", QuantizeRequest{Path: src, Digest: digest, OutPath: filepath.Join(dir, "d.gguf"), FType: "q8_0", Threads: -1}, wire.CodeBadRequest},
		{"digest mismatch", QuantizeRequest{Path: src, Digest: fileDigest(t, exists), OutPath: filepath.Join(dir, "e.gguf"), FType: "q8_0"}, wire.CodeArtifactInvalid},
		{"not a model", QuantizeRequest{Path: notGGUF, Digest: fileDigest(t, notGGUF), OutPath: filepath.Join(dir, "f.gguf"), FType: "q8_0"}, wire.CodeArtifactInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Quantize(context.Background(), tt.req)
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != tt.code {
				t.Fatalf("got %v; want code %s", err, tt.code)
			}
			if tt.req.OutPath != exists {
				if _, err := os.Lstat(tt.req.OutPath); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("out_path after a refusal: got %v; want nothing written", err)
				}
			}
		})
	}
	if b, _ := os.ReadFile(exists); string(b) != "keep me" {
		t.Errorf("existing output: got %q; want it untouched", b)
	}
}

// QUANTIZE through a real worker: answered with QUANTIZED, an error as ERR
// with the worker still serving, and the abort-on-type drill kills the
// worker by SIGABRT before anything is written.
func TestWorkerQuantize(t *testing.T) {
	src := writeTinyF16(t)
	digest := fileDigest(t, src)
	dir := t.TempDir()
	t.Run("QUANTIZED", func(t *testing.T) {
		w := startWorker(t)
		out := filepath.Join(dir, "q8.gguf")
		q, ok := w.call(&wire.Quantize{ReqID: 3, ArtifactPath: src, ArtifactDigest: digest, OutPath: out, FType: "q8_0", Threads: 1}).(*wire.Quantized)
		if !ok || q.ReqID != 3 || q.OutDigest != fileDigest(t, out) || q.OutSize != fileSize(t, out) {
			t.Fatalf("got %#v; want QUANTIZED req_id 3 with the digest and size of %s", q, out)
		}
		wantErr(t, w.call(&wire.Quantize{ReqID: 4, ArtifactPath: src, ArtifactDigest: digest, OutPath: out, FType: "q8_0"}), 4, wire.CodeBadRequest)
		if _, ok := w.call(&wire.Ping{ReqID: 5}).(*wire.Pong); !ok {
			t.Fatal("PING after an ERR: no PONG")
		}
	})
	t.Run("abort-on-type", func(t *testing.T) {
		w := startWorker(t, "SYNAPSE_CHAOS=abort-on-type=QUANTIZE")
		if _, ok := w.call(&wire.Ping{ReqID: 1}).(*wire.Pong); !ok { // other types pass
			t.Fatal("PING: no PONG")
		}
		out := filepath.Join(dir, "aborted.gguf")
		if err := w.conn.Send(&wire.Quantize{ReqID: 2, ArtifactPath: src, ArtifactDigest: digest, OutPath: out, FType: "q8_0"}); err != nil {
			t.Fatal(err)
		}
		if ws := w.wait(); !ws.Signaled() || ws.Signal() != syscall.SIGABRT {
			t.Errorf("worker ended with %v; want death by SIGABRT", w.err)
		}
		if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("output after the abort: got %v; want none", err)
		}
	})
}

// An engine without a quantizer answers QUANTIZE with ERR unsupported and
// keeps serving.
func TestServeQuantizeUnsupported(t *testing.T) {
	a, c := socketPair(t)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), wire.NewConn(c), echoEngine{dims: 4}, ServeOptions{}) }()
	conn := wire.NewConn(a)
	send := func(m wire.Message) wire.Message {
		t.Helper()
		if err := conn.Send(m); err != nil {
			t.Fatal(err)
		}
		resp, err := conn.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wantErr(t, send(&wire.Quantize{ReqID: 1, ArtifactPath: "/m/a.gguf", ArtifactDigest: "sha256:00", OutPath: "/m/b.gguf", FType: "q8_0"}), 1, wire.CodeUnsupported)
	if _, ok := send(&wire.Ping{ReqID: 2}).(*wire.Pong); !ok {
		t.Fatal("PING after unsupported: no PONG")
	}
	conn.Send(&wire.Shutdown{})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
