package hub

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		in      string
		want    Ref
		wantErr string
	}{
		{"sentence-transformers/all-MiniLM-L6-v2", Ref{ID: "sentence-transformers/all-MiniLM-L6-v2"}, ""},
		{"bert-base-uncased", Ref{ID: "bert-base-uncased"}, ""},
		{"BAAI/bge-small-en-v1.5@main", Ref{ID: "BAAI/bge-small-en-v1.5", Revision: "main"}, ""},
		{"org/name@refs/pr/1", Ref{ID: "org/name", Revision: "refs/pr/1"}, ""},
		{"org/name@" + strings.Repeat("ab", 20), Ref{ID: "org/name", Revision: strings.Repeat("ab", 20)}, ""},
		{"org/name@", Ref{}, "nothing after '@'"},
		{"a/b/c", Ref{}, "want ORG/NAME or NAME"},
		{"./model", Ref{}, "must start and end"},
		{"/abs", Ref{}, "empty name"},
		{"/abs/path", Ref{}, "want ORG/NAME or NAME"},
		{"org/na--me", Ref{}, `"--"`},
		{"org/na..me", Ref{}, `".."`},
		{"org/name.", Ref{}, "must start and end"},
		{"org/na me", Ref{}, "is not a letter"},
		{"org/name@../../etc", Ref{}, "'..' component"},
		{"org/name@/main", Ref{}, "must not start or end"},
		{"org/name@ma in", Ref{}, "no spaces"},
		{"org/" + strings.Repeat("x", 97), Ref{}, "longer than 96"},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.in)
		if tt.wantErr != "" {
			if !errors.Is(err, ErrBadRef) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRef(%q): got %v, %v; want ErrBadRef mentioning %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRef(%q): got %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	if f := (Ref{ID: "sentence-transformers/all-MiniLM-L6-v2"}).Folder(); f != "models--sentence-transformers--all-MiniLM-L6-v2" {
		t.Errorf("Folder: got %s; want models--sentence-transformers--all-MiniLM-L6-v2", f)
	}
}

// hfLayout writes a Hugging Face cache repository as huggingface_hub does:
// blobs named by their hash, snapshot files linking to ../../blobs/…,
// refs/main naming the commit; it returns the repository's folder.
func hfLayout(t *testing.T, cache, folder, commit string, files map[string]string, refs ...string) string {
	t.Helper()
	repo := filepath.Join(cache, folder)
	for name, body := range files {
		blob := filepath.Join(repo, "blobs", commit[:8]+"-"+strings.ReplaceAll(name, "/", "_"))
		mustWrite(t, blob, body)
		link := filepath.Join(repo, "snapshots", commit, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(filepath.Dir(link), blob)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range refs {
		mustWrite(t, filepath.Join(repo, "refs", ref), commit)
	}
	return repo
}

func mustWrite(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotReadsHFLayout(t *testing.T) {
	cache := t.TempDir()
	c1, c2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	folder := "models--org--name"
	repo := hfLayout(t, cache, folder, c1, map[string]string{"config.json": "{}", "onnx/model.onnx": "graph v1"}, "main")
	hfLayout(t, cache, folder, c2, map[string]string{"config.json": "{}", "onnx/model.onnx": "graph v2"}, "v2")
	tests := []struct {
		rev       string
		want      string // the snapshot's commit, "" for an error
		wantErr   error
		wantInMsg string
	}{
		{"", c1, nil, ""},
		{"main", c1, nil, ""},
		{"v2", c2, nil, ""},
		{c2, c2, nil, ""}, // a commit id is its snapshot, no ref needed
		{"v3", "", ErrNotCached, "name one as org/name@" + c1},
		{strings.Repeat("3", 40), "", ErrNotCached, "no snapshot"},
	}
	for _, tt := range tests {
		got, err := Snapshot(cache, Ref{ID: "org/name", Revision: tt.rev})
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("rev %q: got %q, %v; want %v mentioning %q", tt.rev, got, err, tt.wantErr, tt.wantInMsg)
			}
			continue
		}
		if want := filepath.Join(repo, "snapshots", tt.want); err != nil || got != want {
			t.Errorf("rev %q: got %q, %v; want %s", tt.rev, got, err, want)
			continue
		}
		b, err := os.ReadFile(filepath.Join(got, "onnx", "model.onnx"))
		if wantBody := map[string]string{c1: "graph v1", c2: "graph v2"}[tt.want]; err != nil || string(b) != wantBody {
			t.Errorf("rev %q: the graph through its blob link reads %q, %v; want %q", tt.rev, b, err, wantBody)
		}
	}
	if _, err := Snapshot(cache, Ref{ID: "org/other"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("a repository not in the cache: got %v; want ErrNotCached", err)
	}
}

func TestSnapshotRefusesLinksOutOfTheRepo(t *testing.T) {
	cache := t.TempDir()
	commit := strings.Repeat("a", 40)
	outside := filepath.Join(t.TempDir(), "secret")
	mustWrite(t, outside, "not a model file")
	// Another repository's blob is outside this one's folder too.
	other := hfLayout(t, cache, "models--org--other", commit, map[string]string{"config.json": "{}"}, "main")
	tests := []struct {
		name   string
		target string // the link's target, relative to the snapshot
		want   string
	}{
		{"absolute", outside, "outside"},
		{"dotdot", filepath.Join("..", "..", "..", "models--org--other", "blobs", filepath.Base(mustBlob(t, other))), "outside"},
		{"dangling", filepath.Join("..", "..", "blobs", "missing"), "leads to nothing"},
		{"directory", filepath.Join("..", "..", "blobs"), "not a file"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			folder := "models--org--bad" + string(rune('a'+i))
			hfLayout(t, cache, folder, commit, map[string]string{"config.json": "{}"}, "main")
			link := filepath.Join(cache, folder, "snapshots", commit, "tokenizer.json")
			if err := os.Symlink(tt.target, link); err != nil {
				t.Fatal(err)
			}
			_, err := Snapshot(cache, Ref{ID: "org/bad" + string(rune('a'+i))})
			if !errors.Is(err, ErrUnsafeLink) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want ErrUnsafeLink mentioning %q", err, tt.want)
			}
		})
	}
}

// mustBlob returns a blob of the repository folder repo.
func mustBlob(t *testing.T, repo string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(repo, "blobs", "*"))
	if len(m) == 0 {
		t.Fatalf("no blob in %s", repo)
	}
	return m[0]
}

func TestCacheDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		hubCache, hfHome, xdg string
		want, from            string
	}{
		{"/h/hub", "/h/home", "/x", "/h/hub", "HF_HUB_CACHE"},
		{"", "/h/home", "/x", "/h/home/hub", "HF_HOME"},
		{"", "", "/x", "/x/huggingface/hub", "XDG_CACHE_HOME"},
		{"", "", "", filepath.Join(home, ".cache", "huggingface", "hub"), "default"},
	}
	for _, tt := range tests {
		t.Setenv("HF_HUB_CACHE", tt.hubCache)
		t.Setenv("HF_HOME", tt.hfHome)
		t.Setenv("XDG_CACHE_HOME", tt.xdg)
		got, from, err := CacheDir()
		if err != nil || got != tt.want || from != tt.from {
			t.Errorf("HF_HUB_CACHE=%q HF_HOME=%q XDG_CACHE_HOME=%q: got %s (%s), %v; want %s (%s)", tt.hubCache, tt.hfHome, tt.xdg, got, from, err, tt.want, tt.from)
		}
	}
}

func TestListAndRemove(t *testing.T) {
	cache := t.TempDir()
	c1, c2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	hfLayout(t, cache, "models--org--name", c1, map[string]string{"config.json": "{}", "onnx/model.onnx": "graph"}, "main", "v1")
	hfLayout(t, cache, "models--org--name", c2, map[string]string{"config.json": "{}"})
	hfLayout(t, cache, "models--bert-base", c1, map[string]string{"config.json": "{}"}, "main")
	got, err := List(cache)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, p := range got {
		rows = append(rows, p.ID+" "+p.Commit[:1]+" "+strings.Join(p.Refs, ",")+" "+string(rune('0'+p.Files)))
	}
	want := []string{"bert-base 1 main 1", "org/name 1 main,v1 2", "org/name 2  1"}
	if strings.Join(rows, "; ") != strings.Join(want, "; ") {
		t.Errorf("List: got %q; want %q", rows, want)
	}
	if err := Remove(cache, Ref{ID: "org/name"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Snapshot(cache, Ref{ID: "org/name"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("Snapshot after Remove: got %v; want ErrNotCached", err)
	}
	if err := Remove(cache, Ref{ID: "org/name"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("a second Remove: got %v; want ErrNotCached", err)
	}
	if got, _ := List(cache); len(got) != 1 || got[0].ID != "bert-base" {
		t.Errorf("List after Remove: got %+v; want only bert-base", got)
	}
}
