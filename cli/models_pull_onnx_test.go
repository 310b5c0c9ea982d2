//go:build cgo

package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/hub/hubtest"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// TestModelsPullThenEmbed pulls a generated sentence-transformers ONNX
// model, laid out as on the Hub (onnx/model.onnx, 1_Pooling, 2_Normalize,
// a pickle beside), from a local Hub, then embeds with -m ORG/NAME and
// -m ORG/NAME@COMMIT: the vectors are the ones the served directory itself
// gives.
func TestModelsPullThenEmbed(t *testing.T) {
	served := t.TempDir()
	enc := onnxtest.Encoder{Hidden: 8, Positions: 64, Seed: 11}
	if _, err := onnxtest.WriteDir(served, onnxtest.Dir{Encoder: enc}); err != nil {
		t.Fatal(err)
	}
	if _, err := onnxtest.WriteST(served, onnxtest.ST{Pooling: onnxtest.PoolingConfig(enc.Hidden, true, "mean"), Normalize: true, MaxSeqLength: 32}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(served, "onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(served, "model.onnx"), filepath.Join(served, "onnx", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(served, "pytorch_model.bin"), []byte("a pickle"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := hubtest.New(t)
	commit := srv.Add(t, "org/tiny-st", served, "main")
	work := t.TempDir()
	t.Setenv("SYNAPSE_MODELS", filepath.Join(work, "models"))
	t.Setenv("HF_HUB_CACHE", filepath.Join(work, "hf")) // empty: the pulled copy is found
	t.Setenv("HF_ENDPOINT", srv.URL)

	code, stdout, stderr := runCLI(t, "models", "pull", "org/tiny-st", "--onnx")
	if code != exitOK || !strings.HasPrefix(stdout, "pulled") || !strings.Contains(stdout, commit) {
		t.Fatalf("pull: exit %d, stdout %q; want pulled at %s\nstderr: %s", code, stdout, commit, stderr)
	}
	if code, stdout, _ = runCLI(t, "models", "pull", "org/tiny-st", "--onnx"); code != exitOK || !strings.HasPrefix(stdout, "cached") {
		t.Errorf("second pull: exit %d, stdout %q; want cached, nothing fetched", code, stdout)
	}
	if code, stdout, stderr := runCLI(t, "inspect", "org/tiny-st"); code != exitOK || !strings.Contains(stdout, "org/tiny-st") {
		t.Errorf("inspect org/tiny-st: exit %d, stdout %q; want the pulled model described by its id\nstderr: %s", code, stdout, stderr)
	}
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "Hello world"}, {"id": "b", "text": "protein, gene and cells!"}})
	want := filepath.Join(work, "want.arrow")
	runONNX(t, "embed", in, "-m", served, "-o", want, "-q").wantCode(t, exitOK)
	_, wantRows := readOutput(t, want)
	if len(wantRows) < 2 {
		t.Fatalf("the served directory gave %d rows; want one per document at least", len(wantRows))
	}
	for _, ref := range []string{"org/tiny-st", "org/tiny-st@" + commit} {
		out := filepath.Join(work, strings.NewReplacer("/", "_", "@", "_").Replace(ref)+".arrow")
		res := runONNX(t, "embed", in, "-m", ref, "-o", out, "-q")
		res.wantCode(t, exitOK)
		_, rows := readOutput(t, out)
		if len(rows) != len(wantRows) {
			t.Fatalf("-m %s: %d rows; want %d", ref, len(rows), len(wantRows))
		}
		for i := range rows {
			if rows[i].ID != wantRows[i].ID || !slices.Equal(rows[i].Emb, wantRows[i].Emb) {
				t.Errorf("-m %s row %d: got %s %v; want %s %v (the served directory's)", ref, i, rows[i].ID, rows[i].Emb, wantRows[i].ID, wantRows[i].Emb)
			}
		}
	}
	res := runONNX(t, "embed", in, "-m", "org/not-pulled", "-o", filepath.Join(work, "x.arrow"), "-q")
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "synapse models pull org/not-pulled") {
		t.Errorf("-m org/not-pulled: stderr %q; want it to say how to get it", res.stderr)
	}
}
