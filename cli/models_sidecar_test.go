//go:build cgo

package cli

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Model directories whose files beside the weights change: an edit makes
// an entry of its own, and nothing enters the model cache before it opens.

// editTokenizer rewrites dir/tokenizer.json through edit.
func editTokenizer(t *testing.T, dir string, edit func(tok map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	edit(tok)
	if b, err = json.Marshal(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// truncateAt sets a tokenizer's truncation to n tokens.
func truncateAt(n int) func(map[string]any) {
	return func(tok map[string]any) {
		tok["truncation"] = map[string]any{"direction": "Right", "max_length": n, "strategy": "LongestFirst", "stride": 0}
	}
}

// lookAhead adds a Replace normalizer with a look-ahead, which Go's regexp
// (and so synapse's tokenizer) cannot compile.
func lookAhead(tok map[string]any) {
	tok["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{tok["normalizer"],
		map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "a(?=b)"}, "content": "x"}}}
}

// TestModelsAddEditedSidecar: an ONNX directory added, then added again
// with only tokenizer.json (or a module's config) edited, gives a second
// entry of the same graph carrying the edited file; the first is
// unchanged, and adding either again finds its own.
func TestModelsAddEditedSidecar(t *testing.T) {
	m := newONNXModelsEnv(t)
	dir := genONNXDir(t, "enc", 0)
	m.must(0, "models", "add", dir, "--name", "orig")
	for i, edit := range []func(map[string]any){truncateAt(7), truncateAt(9)} {
		editTokenizer(t, dir, edit)
		name := []string{"edit-7", "edit-9"}[i]
		if _, stderr, code := m.run(nil, "models", "add", dir, "--name", name); code != 0 {
			t.Fatalf("models add of the directory with tokenizer.json edited: exit %d\n%s", code, stderr)
		}
	}
	entries := m.ls()
	if len(entries) != 3 || entries[0].Digest != entries[1].Digest || entries[1].Digest != entries[2].Digest {
		t.Fatalf("entries %+v; want three of one graph", entries)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	for _, e := range entries {
		got, err := os.ReadFile(filepath.Join(filepath.Dir(e.Path), "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		if (e.Name == "edit-9") != (string(got) == string(want)) {
			t.Errorf("entry %s: its tokenizer.json is the edited one: %v; want only edit-9's", e.Name, string(got) == string(want))
		}
	}
	out, _ := m.must(0, "models", "add", dir, "--name", "again")
	if !strings.Contains(out, "edit-9") {
		t.Errorf("adding the edited directory again: %q; want edit-9 found", out)
	}
	m.must(0, "models", "verify")
}

// TestUncompilableTokenizerNotCached: embed -m on a safetensors directory
// whose tokenizer.json synapse cannot compile (a look-ahead) exits 2
// naming the pattern, and the model cache is left without an entry or a
// staging directory; the mended directory then converts and runs, and an
// edited one converts to an entry of its own.
func TestUncompilableTokenizerNotCached(t *testing.T) {
	work := t.TempDir()
	model, _ := convertedDir(t, work)
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store)
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "0", "text": "the cell"}})
	orig, err := os.ReadFile(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	editTokenizer(t, model, lookAhead)
	out := filepath.Join(work, "out.arrow")
	r := runSynapse(t, env, "embed", in, "-m", model, "-o", out)
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "a(?=b)") {
		t.Errorf("stderr %q does not name the pattern", r.stderr)
	}
	des, _ := os.ReadDir(store)
	tmp, _ := os.ReadDir(filepath.Join(store, "tmp"))
	for _, de := range append(des, tmp...) {
		if strings.HasPrefix(de.Name(), "sha256-") || de.IsDir() && de.Name() != "tmp" && de.Name() != "locks" {
			t.Errorf("the refused conversion left %s in the model cache", de.Name())
		}
	}
	if err := os.WriteFile(filepath.Join(model, "tokenizer.json"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runSynapse(t, env, "embed", in, "-m", model, "-o", out)
	r.wantCode(t, exitOK)
	editTokenizer(t, model, truncateAt(5))
	r = runSynapse(t, env, "embed", in, "-m", model, "-o", out)
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stderr, "converted "+model) {
		t.Errorf("the directory with tokenizer.json edited: stderr %q; want it converted again", r.stderr)
	}
}

// TestOverlappingTensorsRefused: a model.safetensors whose header gives a
// second name to one tensor's bytes (an alias, overlapping it) is refused
// by embed -m and models add, exit 2 naming both tensors, and nothing is
// cached.
func TestOverlappingTensorsRefused(t *testing.T) {
	work := t.TempDir()
	model, _ := convertedDir(t, work)
	path := filepath.Join(model, "model.safetensors")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]any
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	victim := "embeddings.word_embeddings.weight"
	if hdr[victim] == nil {
		t.Fatalf("no %s in %s", victim, path)
	}
	hdr["zz.alias"] = hdr[victim]
	hb, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	out := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hb))), hb...)
	if err := os.WriteFile(path, append(out, b[8+n:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(work, "models")
	env := append(ortEnv(t), "SYNAPSE_MODELS="+store)
	in := filepath.Join(work, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "0", "text": "the cell"}})
	for _, args := range [][]string{{"embed", in, "-m", model, "-o", filepath.Join(work, "o.arrow")}, {"models", "add", model}} {
		r := runSynapse(t, env, args...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, "overlap") || !strings.Contains(r.stderr, victim) || !strings.Contains(r.stderr, "zz.alias") {
			t.Errorf("%s: stderr %q; want the overlap of %s and zz.alias named", args[0], r.stderr, victim)
		}
	}
	des, _ := os.ReadDir(store)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), "sha256-") {
			t.Errorf("the refused model left %s in the model cache", de.Name())
		}
	}
}
