package hub_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/model/hub"
	"github.com/synapse-embed/synapse/model/hub/hubtest"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// stRepo writes a sentence-transformers repository as the Hub has one:
// configs, a Pooling module, model.safetensors, the pickle beside it, an
// ONNX export and files a load does not need. Weights are random bytes of
// the given size (the seed varies them).
func stRepo(t *testing.T, size int, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 1))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	files := map[string]string{
		"config.json":                       `{"model_type": "bert", "architectures": ["BertModel"]}`,
		"tokenizer.json":                    `{"version": "1.0"}`,
		"vocab.txt":                         "[PAD]\n[UNK]\n",
		"modules.json":                      `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]`,
		"1_Pooling/config.json":             `{"pooling_mode_mean_tokens": true}`,
		"model.safetensors":                 random(size),
		"pytorch_model.bin":                 random(size / 2),
		"onnx/model.onnx":                   random(size / 3),
		"README.md":                         "# a model card",
		"train_script.py":                   "print('not for a load')",
		"config_sentence_transformers.json": `{"prompts": {}}`,
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newStore(t testing.TB) *modelcache.Store {
	t.Helper()
	s, err := modelcache.Open(filepath.Join(t.TempDir(), "models"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// client is a client of srv that retries without waiting.
func client(t *testing.T, srv *hubtest.Server, token string) *hub.Client {
	t.Helper()
	t.Setenv("HF_TOKEN", token)
	c, err := hub.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.Backoff = func(int) time.Duration { return 0 }
	c.Attempts = 3
	return c
}

func names(files []hub.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Name)
	}
	sort.Strings(out)
	return out
}

// sameFiles checks that every file chosen is in the snapshot, byte for
// byte as served.
func sameFiles(t *testing.T, p hub.Pulled, served string) {
	t.Helper()
	for _, f := range p.Files {
		got, err := os.ReadFile(filepath.Join(p.Dir, filepath.FromSlash(f.Name)))
		want, _ := os.ReadFile(filepath.Join(served, filepath.FromSlash(f.Name)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the snapshot: %d bytes, %v; want the %d bytes served", f.Name, len(got), err, len(want))
		}
	}
}

func TestPullTakesWhatALoadNeeds(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 100_000, 1)
	commit := srv.Add(t, "org/st-model", dir, "main")
	s := newStore(t)
	common := []string{"1_Pooling/config.json", "config.json", "config_sentence_transformers.json", "modules.json", "tokenizer.json", "vocab.txt"}
	for _, tt := range []struct {
		onnx    bool
		weights string
	}{{false, "model.safetensors"}, {true, "onnx/model.onnx"}} {
		p, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/st-model"}, hub.PullOptions{ONNX: tt.onnx})
		if err != nil {
			t.Fatalf("onnx %t: %v", tt.onnx, err)
		}
		want := append(slices.Clone(common), tt.weights)
		sort.Strings(want)
		if got := names(p.Files); !slices.Equal(got, want) {
			t.Errorf("onnx %t: chose %v; want %v", tt.onnx, got, want)
		}
		if p.Commit != commit || p.Dir != filepath.Join(hub.StoreDir(s), "models--org--st-model", "snapshots", commit) {
			t.Errorf("onnx %t: got commit %s in %s; want %s in the model cache's hub/ snapshot", tt.onnx, p.Commit, p.Dir, commit)
		}
		sameFiles(t, p, dir)
		for _, never := range []string{"pytorch_model.bin", "README.md", "train_script.py"} {
			if _, err := os.Stat(filepath.Join(p.Dir, never)); err == nil {
				t.Errorf("onnx %t: %s was fetched; want it left on the Hub", tt.onnx, never)
			}
		}
	}
	// -m org/st-model resolves to the pulled snapshot through refs/main.
	snap, err := hub.Snapshot(hub.StoreDir(s), hub.Ref{ID: "org/st-model"})
	if err != nil || snap != filepath.Join(hub.StoreDir(s), "models--org--st-model", "snapshots", commit) {
		t.Errorf("Snapshot after pull: got %s, %v; want the pulled commit %s", snap, err, commit)
	}
	// A second pull of the commit fetches nothing: one API call, no file.
	before := len(srv.Requests())
	p, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/st-model"}, hub.PullOptions{ONNX: true})
	if err != nil || p.Fetched != 0 {
		t.Fatalf("second pull: fetched %d, %v; want nothing fetched", p.Fetched, err)
	}
	if got := srv.Requests()[before:]; len(got) != 1 || !strings.HasPrefix(got[0].Path, "/api/models/") {
		t.Errorf("second pull asked %+v; want only the API", got)
	}
	if _, err := os.Stat(filepath.Join(hub.StoreDir(s), "models--org--st-model", "partial")); err == nil {
		t.Errorf("partial/ is left after complete pulls; want it removed")
	}
}

func TestPullResumesADroppedDownload(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 300_000, 2)
	srv.Add(t, "org/m", dir, "main")
	srv.DropFile("model.safetensors", hubtest.Drop{After: 120_000, Times: 1})
	s := newStore(t)
	p, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, p, dir)
	var ranges []string
	for _, r := range srv.Requests() {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	// The first download is cut at 120,000 bytes; the second asks only for the rest.
	if want := []string{"", "bytes=120000-"}; !slices.Equal(ranges, want) {
		t.Errorf("downloads of model.safetensors asked Range %q; want %q", ranges, want)
	}
}

func TestPullResumesInTheNextRun(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 300_000, 3)
	srv.Add(t, "org/m", dir, "main")
	srv.DropFile("model.safetensors", hubtest.Drop{After: 50_000, Times: -1}) // every download is cut
	s := newStore(t)
	c := client(t, srv, "")
	_, err := c.Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if err == nil || errors.Is(err, hub.ErrChecksum) || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("pull over a connection cut every time: got %v; want a network failure after 3 attempts", err)
	}
	if _, err := os.Stat(filepath.Join(hub.StoreDir(s), "models--org--m", "snapshots")); err == nil {
		t.Errorf("a failed pull published a snapshot; want none")
	}
	// Each attempt resumed where the last stopped: 3 × 50,000 bytes are on disk.
	srv.DropFile("model.safetensors", hubtest.Drop{})
	before := len(srv.Requests())
	p, err := c.Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, p, dir)
	var ranges []string
	for _, r := range srv.Requests()[before:] {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"bytes=150000-"}; !slices.Equal(ranges, want) {
		t.Errorf("the next run asked Range %q; want %q", ranges, want)
	}
}

func TestPullRefusesAWrongChecksum(t *testing.T) {
	srv := hubtest.New(t)
	srv.Add(t, "org/m", stRepo(t, 10_000, 4), "main")
	srv.WrongChecksum("org/m", "model.safetensors")
	s := newStore(t)
	_, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if !errors.Is(err, hub.ErrChecksum) || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("got %v; want ErrChecksum naming model.safetensors", err)
	}
	repo := filepath.Join(hub.StoreDir(s), "models--org--m")
	if _, err := os.Stat(filepath.Join(repo, "snapshots")); err == nil {
		t.Errorf("a snapshot was published with a file failing its checksum")
	}
	if m, _ := filepath.Glob(filepath.Join(repo, "partial", "*", "model.safetensors*")); len(m) != 0 {
		t.Errorf("the refused bytes are kept (%v); want them removed", m)
	}
}

func TestPullPinsTheRevision(t *testing.T) {
	srv := hubtest.New(t)
	v1, v2 := stRepo(t, 5_000, 5), stRepo(t, 5_000, 6)
	c1 := srv.Add(t, "org/m", v1, "v1")
	c2 := srv.Add(t, "org/m", v2, "main")
	s := newStore(t)
	tests := []struct {
		rev        string
		commit     string
		served     string
		wantRef    string // the refs/ file written, "" for none
		wantRefHas string
	}{
		{c1, c1, v1, "", ""},
		{"v1", c1, v1, "v1", c1},
		{"", c2, v2, "main", c2},
	}
	for _, tt := range tests {
		p, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/m", Revision: tt.rev}, hub.PullOptions{})
		if err != nil {
			t.Fatalf("@%s: %v", tt.rev, err)
		}
		if p.Commit != tt.commit {
			t.Errorf("@%s: got commit %s; want %s", tt.rev, p.Commit, tt.commit)
		}
		sameFiles(t, p, tt.served)
		for _, r := range srv.Requests() {
			if strings.Contains(r.Path, "/resolve/") && !strings.Contains(r.Path, "/resolve/"+c1+"/") && !strings.Contains(r.Path, "/resolve/"+c2+"/") {
				t.Errorf("@%s: a file was asked for by %s, not by its commit", tt.rev, r.Path)
			}
		}
		if tt.wantRef != "" {
			b, err := os.ReadFile(filepath.Join(hub.StoreDir(s), "models--org--m", "refs", tt.wantRef))
			if err != nil || string(b) != tt.wantRefHas {
				t.Errorf("@%s: refs/%s holds %q, %v; want %s", tt.rev, tt.wantRef, b, err, tt.wantRefHas)
			}
		}
	}
	if _, err := hub.Snapshot(hub.StoreDir(s), hub.Ref{ID: "org/m", Revision: "v1"}); err != nil {
		t.Errorf("-m org/m@v1 after pulling it: %v", err)
	}
}

func TestPullGatedModel(t *testing.T) {
	srv := hubtest.New(t)
	srv.Add(t, "org/gated", stRepo(t, 20_000, 7), "main")
	srv.Gate("org/gated", "hf_secret")
	s := newStore(t)
	for _, tt := range []struct {
		token, want string
	}{{"", "set HF_TOKEN"}, {"hf_wrong", "HF_TOKEN was not accepted"}} {
		_, err := client(t, srv, tt.token).Pull(context.Background(), s, hub.Ref{ID: "org/gated"}, hub.PullOptions{})
		if !errors.Is(err, hub.ErrAuth) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hf_") {
			t.Errorf("token %q: got %v; want ErrAuth saying %q, without the token", tt.token, err, tt.want)
		}
	}
	before := len(srv.Requests())
	if _, err := client(t, srv, "hf_secret").Pull(context.Background(), s, hub.Ref{ID: "org/gated"}, hub.PullOptions{}); err != nil {
		t.Fatalf("with HF_TOKEN: %v", err)
	}
	cdn := 0
	for _, r := range srv.Requests()[before:] {
		switch {
		case r.Server == "hub" && r.Authorization != "Bearer hf_secret":
			t.Errorf("%s on the endpoint: Authorization %q; want the bearer token", r.Path, r.Authorization)
		case r.Server == "cdn" && r.Authorization != "":
			t.Errorf("%s after the redirect to another host: Authorization %q; want none", r.Path, r.Authorization)
		case r.Server == "cdn":
			cdn++
		}
	}
	if cdn == 0 {
		t.Errorf("no download went to the CDN; want model.safetensors redirected there")
	}
}

func TestPullRefusesWhatItCannotLoad(t *testing.T) {
	srv := hubtest.New(t)
	pickleOnly := stRepo(t, 1_000, 8)
	os.Remove(filepath.Join(pickleOnly, "model.safetensors"))
	os.RemoveAll(filepath.Join(pickleOnly, "onnx"))
	srv.Add(t, "org/pickle", pickleOnly, "main")
	noONNX := stRepo(t, 1_000, 9)
	os.RemoveAll(filepath.Join(noONNX, "onnx"))
	srv.Add(t, "org/no-onnx", noONNX, "main")
	s := newStore(t)
	tests := []struct {
		id   string
		onnx bool
		want string
	}{
		{"org/pickle", false, "only pytorch_model.bin, a pickle"},
		{"org/no-onnx", true, "pull it without --onnx"},
		{"org/missing", false, "404"},
	}
	for _, tt := range tests {
		before := len(srv.Requests())
		_, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: tt.id}, hub.PullOptions{ONNX: tt.onnx})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s (onnx %t): got %v; want an error saying %q", tt.id, tt.onnx, err, tt.want)
		}
		for _, r := range srv.Requests()[before:] {
			if strings.HasSuffix(r.Path, ".bin") || strings.Contains(r.Path, "blobs/") {
				t.Errorf("%s: fetched %s before refusing; want no weights fetched", tt.id, r.Path)
			}
		}
	}
}

func TestPullCutsAStalledDownload(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 200_000, 10)
	srv.Add(t, "org/m", dir, "main")
	srv.DropFile("model.safetensors", hubtest.Drop{After: 70_000, Times: 1, Hang: true}) // sends 70,000 bytes, then nothing
	c := client(t, srv, "")
	c.Stall = 50 * time.Millisecond
	var lines []string
	c.Log = func(l string) { lines = append(lines, l) }
	p, err := c.Pull(context.Background(), newStore(t), hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, p, dir)
	var ranges []string
	for _, r := range srv.Requests() {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"", "bytes=70000-"}; !slices.Equal(ranges, want) {
		t.Errorf("downloads asked Range %q; want %q", ranges, want)
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "nothing came for 50ms at 70000 of 200000 bytes") }) {
		t.Errorf("log %q; want it to say the download stalled and was cut", lines)
	}
}

func TestPullRefetchesAResumedFileThatFailsItsCheck(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 40_000, 11)
	commit := srv.Add(t, "org/m", dir, "main")
	s := newStore(t)
	// An earlier run left 1,000 bytes that are not the file's (a disk that lost them, another tool's file).
	part := filepath.Join(hub.StoreDir(s), "models--org--m", "partial", commit, "model.safetensors.part")
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(part, bytes.Repeat([]byte{'x'}, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, p, dir)
	var ranges []string
	for _, r := range srv.Requests() {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"bytes=1000-", ""}; !slices.Equal(ranges, want) {
		t.Errorf("downloads asked Range %q; want the resume, then the whole file once it failed its check: %q", ranges, want)
	}
}

func TestConcurrentPullsTakeTurns(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 100_000, 12)
	srv.Add(t, "org/m", dir, "main")
	s := newStore(t)
	c := client(t, srv, "")
	type result struct {
		p   hub.Pulled
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			p, err := c.Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
			results <- result{p, err}
		}()
	}
	fetched := 0
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		sameFiles(t, r.p, dir)
		fetched += r.p.Fetched
	}
	if want := 7; fetched != want { // the 7 files a load needs, once
		t.Errorf("two concurrent pulls fetched %d files between them; want %d (the second finds the first's)", fetched, want)
	}
	downloads := 0
	for _, r := range srv.Requests() {
		if strings.Contains(r.Path, "/resolve/") {
			downloads++
		}
	}
	if downloads != 7 {
		t.Errorf("%d downloads from the resolve endpoint; want 7, one per file", downloads)
	}
}

func TestPullInterruptedKeepsWhatItHas(t *testing.T) {
	srv := hubtest.New(t)
	dir := stRepo(t, 200_000, 13)
	srv.Add(t, "org/m", dir, "main")
	srv.DropFile("model.safetensors", hubtest.Drop{After: 70_000, Times: 1, Hang: true})
	s := newStore(t)
	c := client(t, srv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := func(name string, done, size int64) {
		if name == "model.safetensors" && done == 70_000 {
			cancel() // the user's Ctrl-C, while the server holds the rest back
		}
	}
	_, err := c.Pull(ctx, s, hub.Ref{ID: "org/m"}, hub.PullOptions{Progress: progress})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	before := len(srv.Requests())
	p, err := c.Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, p, dir)
	var ranges []string
	for _, r := range srv.Requests()[before:] {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"bytes=70000-"}; !slices.Equal(ranges, want) {
		t.Errorf("the pull after the interrupted one asked Range %q; want %q", ranges, want)
	}
}

// TestPullRefusesAForeignFolder: a pull into a model cache whose hub/, or
// whose repository folder, partial/, snapshots/ or refs/ there, another
// user owns (a real uid, 65534) — where she could have planted a link for
// the pull to write through — is refused with ErrUntrusted naming the
// path, before the Hub is asked anything, and writes nothing through her
// link.
func TestPullRefusesAForeignFolder(t *testing.T) {
	testenv.Stranger(t)
	srv := hubtest.New(t)
	srv.Add(t, "org/m", stRepo(t, 10_000, 7), "main")
	for _, level := range []string{"", "models--org--m", "models--org--m/partial", "models--org--m/snapshots", "models--org--m/refs"} {
		t.Run(level, func(t *testing.T) {
			s := newStore(t)
			hubDir := hub.StoreDir(s)
			p := filepath.Join(hubDir, filepath.FromSlash(level))
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(t.TempDir(), "victim")
			if err := os.Symlink(target, filepath.Join(p, "planted")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, testenv.StrangerUID, testenv.StrangerUID); err != nil {
				t.Fatal(err)
			}
			before := len(srv.Requests())
			_, err := client(t, srv, "").Pull(context.Background(), s, hub.Ref{ID: "org/m"}, hub.PullOptions{})
			if !errors.Is(err, files.ErrUntrusted) || !strings.Contains(err.Error(), p+" is owned by uid 65534") {
				t.Errorf("got %v; want ErrUntrusted naming %s", err, p)
			}
			if n := len(srv.Requests()) - before; n != 0 {
				t.Errorf("%d requests to the Hub before the refusal; want none", n)
			}
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("the pull wrote through the planted link to %s", target)
			}
		})
	}
}
