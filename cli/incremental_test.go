package cli

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// End-to-end tests of incremental runs: `synapse embed --previous`,
// --deleted and --dedup, with the tiny generated model.

// versions is a corpus and its next version: 3% of the documents with
// another text, 1% deleted, 1% added, and all of them shuffled.
type versions struct {
	old, new                []map[string]any
	changed, deleted, added map[string]bool
}

func makeVersions(n int) versions {
	docs := testCorpus(n + n/50 + n/25) // the extra documents give new texts and new documents
	v := versions{old: docs[:n], changed: map[string]bool{}, deleted: map[string]bool{}, added: map[string]bool{}}
	rng := rand.New(rand.NewPCG(12, 34))
	perm := rng.Perm(n)
	extra := n
	for k, i := range perm {
		d := docs[i]
		id := d["_id"].(string)
		switch {
		case k < n*3/100: // another text under the same id
			d = map[string]any{"_id": id, "title": d["title"], "text": docs[extra]["text"]}
			extra++
			v.changed[id] = true
		case k < n*4/100:
			v.deleted[id] = true
			continue
		}
		v.new = append(v.new, d)
	}
	for range n / 100 {
		d := docs[extra]
		id := "added-" + d["_id"].(string)
		v.new = append(v.new, map[string]any{"_id": id, "title": d["title"], "text": d["text"]})
		v.added[id] = true
		extra++
	}
	rng.Shuffle(len(v.new), func(i, j int) { v.new[i], v.new[j] = v.new[j], v.new[i] })
	return v
}

var (
	previousRE = regexp.MustCompile(`previous\s+.*: (\d+) unchanged, (\d+) changed, (\d+) new, (?:(\d+) deleted|deleted: not known to a shard)`)
	documentRE = regexp.MustCompile(`documents\s+(?:(\d+) reused from the previous output, )?(\d+) embedded(?:, (\d+) copied)?`)
)

// incCounts are the incremental lines of a summary.
type incCounts struct {
	unchanged, changed, new, deleted int // deleted -1: not known
	reused, embedded, copied         int
}

func (r embedResult) incCounts(t *testing.T) incCounts {
	t.Helper()
	var c incCounts
	atoi := func(s string) int {
		if s == "" {
			return -1
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	if m := previousRE.FindStringSubmatch(r.stdout); m != nil {
		c.unchanged, c.changed, c.new, c.deleted = atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
	}
	m := documentRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no documents line in the summary:\n%s", r.stdout)
	}
	c.reused, c.embedded, c.copied = atoi(m[1]), atoi(m[2]), atoi(m[3])
	return c
}

// sameAsFull fails unless got is want row for row: every column equal but
// the embedding, which is at cosine ≥ 0.99999, and bit for bit the
// previous output's for the documents in reused.
func sameAsFull(t *testing.T, got, want, prev []outRow, reused func(id string) bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows; want %d", len(got), len(want))
	}
	prevRows := rowsByID(prev)
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Chunk != w.Chunk || g.TokenStart != w.TokenStart || g.TokenEnd != w.TokenEnd ||
			g.ByteStart != w.ByteStart || g.ByteEnd != w.ByteEnd || g.CPStart != w.CPStart || g.CPEnd != w.CPEnd || g.ChunkID != w.ChunkID || g.Text != w.Text || g.NTokens != w.NTokens || g.Hash != w.Hash {
			t.Fatalf("row %d: got %s chunk %d (%d-%d) hash %x; want %s chunk %d (%d-%d) hash %x", i,
				g.ID, g.Chunk, g.TokenStart, g.TokenEnd, g.Hash[:4], w.ID, w.Chunk, w.TokenStart, w.TokenEnd, w.Hash[:4])
		}
		if c := testenv.Cosine(g.Emb, w.Emb); c < 0.99999 {
			t.Fatalf("row %d (%s chunk %d): cosine %v to the full run", i, g.ID, g.Chunk, c)
		}
		if !reused(g.ID) {
			continue
		}
		p := prevRows[g.ID][g.Chunk]
		for k := range g.Emb {
			if math.Float32bits(g.Emb[k]) != math.Float32bits(p.Emb[k]) {
				t.Fatalf("row %d (%s chunk %d): reused embedding[%d] = %v; the previous output has %v", i, g.ID, g.Chunk, k, g.Emb[k], p.Emb[k])
			}
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestEmbedIncremental: the next version of a corpus (3% changed, 1%
// deleted, 1% added, shuffled) embedded with --previous equals a full run
// of it row for row, copies the unchanged documents bit for bit, counts
// every kind of document exactly and lists the deleted ids; from an Arrow
// or a Parquet previous output, or the part files of a sharded run.
func TestEmbedIncremental(t *testing.T) {
	dir := t.TempDir()
	v := makeVersions(400)
	oldIn, newIn := filepath.Join(dir, "old.jsonl"), filepath.Join(dir, "new.jsonl")
	writeJSONL(t, oldIn, v.old)
	writeJSONL(t, newIn, v.new)
	model := tinyModel(t)
	embed := func(t *testing.T, in, out string, args ...string) embedResult {
		t.Helper()
		res := runSynapse(t, nil, append([]string{"embed", in, "-m", model, "-o", out, "--chunk-tokens", "64", "--workers", "2", "--threads", "1"}, args...)...)
		res.wantCode(t, exitOK)
		return res
	}
	prev := filepath.Join(dir, "prev.arrow")
	embed(t, oldIn, prev)
	_, prevRows := readOutput(t, prev)
	full := filepath.Join(dir, "full.arrow")
	embed(t, newIn, full)
	_, want := readOutput(t, full)
	unchanged := len(v.new) - len(v.changed) - len(v.added)
	reused := func(id string) bool { return !v.changed[id] && !v.added[id] }
	wantCounts := incCounts{unchanged: unchanged, changed: len(v.changed), new: len(v.added), deleted: len(v.deleted),
		reused: unchanged, embedded: len(v.changed) + len(v.added), copied: 0}
	if len(v.changed) != 12 || len(v.deleted) != 4 || len(v.added) != 4 {
		t.Fatalf("corpus: %d changed, %d deleted, %d added; want 12, 4, 4", len(v.changed), len(v.deleted), len(v.added))
	}
	check := func(t *testing.T, out string, res embedResult, deleted string) {
		t.Helper()
		if got := res.incCounts(t); got != wantCounts {
			t.Errorf("summary counts %+v; want %+v\n%s", got, wantCounts, res.stdout)
		}
		_, got := readOutput(t, out)
		sameAsFull(t, got, want, prevRows, reused)
		if deleted != "" {
			if got, want := readLines(t, deleted), sortedKeys(v.deleted); !slices.Equal(sortedCopy(got), want) {
				t.Errorf("--deleted lists %v; want %v", got, want)
			}
		}
	}
	t.Run("arrow", func(t *testing.T) {
		out, del := filepath.Join(dir, "inc.arrow"), filepath.Join(dir, "deleted.txt")
		check(t, out, embed(t, newIn, out, "--previous", prev, "--deleted", del), del)
	})
	t.Run("parquet", func(t *testing.T) {
		pq := filepath.Join(dir, "prev.parquet")
		embed(t, oldIn, pq)
		_, pqRows := readOutput(t, pq)
		sameRows(t, "parquet previous vs arrow", pqRows, prevRows)
		out, del := filepath.Join(dir, "inc-pq.arrow"), filepath.Join(dir, "deleted-pq.txt")
		check(t, out, embed(t, newIn, out, "--previous", pq, "--deleted", del), del)
	})
	t.Run("sharded previous", func(t *testing.T) {
		var parts []string
		var partRows []outRow
		for i := range 3 {
			embed(t, oldIn, filepath.Join(dir, "old.arrow"), "--shard", fmt.Sprintf("%d/3", i))
			p := filepath.Join(dir, fmt.Sprintf("old.shard-%d-of-3.arrow", i))
			parts = append(parts, "--previous", p)
			_, rows := readOutput(t, p)
			partRows = append(partRows, rows...)
		}
		out, del := filepath.Join(dir, "inc-parts.arrow"), filepath.Join(dir, "deleted-parts.txt")
		res := embed(t, newIn, out, append(parts, "--deleted", del)...)
		if got := res.incCounts(t); got != wantCounts {
			t.Errorf("summary counts %+v; want %+v\n%s", got, wantCounts, res.stdout)
		}
		_, got := readOutput(t, out)
		sameAsFull(t, got, want, partRows, reused)
		if got := readLines(t, del); !slices.Equal(sortedCopy(got), sortedKeys(v.deleted)) {
			t.Errorf("--deleted lists %v; want %v", got, sortedKeys(v.deleted))
		}
	})
	t.Run("sharded run", func(t *testing.T) {
		// each shard looks its part up in the whole previous output
		var sum incCounts
		var got []outRow
		for i := range 2 {
			res := embed(t, newIn, filepath.Join(dir, "new.arrow"), "--shard", fmt.Sprintf("%d/2", i), "--previous", prev)
			c := res.incCounts(t)
			if c.deleted != -1 {
				t.Errorf("shard %d: deleted %d; want not known", i, c.deleted)
			}
			sum.unchanged, sum.changed, sum.new = sum.unchanged+c.unchanged, sum.changed+c.changed, sum.new+c.new
			sum.reused, sum.embedded, sum.deleted = sum.reused+c.reused, sum.embedded+c.embedded, len(v.deleted)
			_, rows := readOutput(t, filepath.Join(dir, fmt.Sprintf("new.shard-%d-of-2.arrow", i)))
			got = append(got, rows...)
		}
		if sum != wantCounts {
			t.Errorf("shards' counts add up to %+v; want %+v", sum, wantCounts)
		}
		sameAsFull(t, got, want, prevRows, reused)
		res := runSynapse(t, nil, "embed", newIn, "-m", model, "-o", filepath.Join(dir, "x.arrow"), "--shard", "0/2",
			"--previous", prev, "--deleted", filepath.Join(dir, "d.txt"))
		res.wantCode(t, exitUsage)
		if !strings.Contains(res.stderr, "--deleted with --shard") {
			t.Errorf("stderr does not refuse --deleted with --shard:\n%s", res.stderr)
		}
	})
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestEmbedPreviousRefused: a previous output made with another model or
// chunk size is refused (exit 2, the difference named) unless
// --previous-any, which embeds everything and says so; one that is
// truncated, corrupt or not an embedding output is refused before anything
// is written.
func TestEmbedPreviousRefused(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(40))
	model := tinyModel(t)
	other := testmodels.Model(t, "tiny-other", func(v modelgen.Vocab) modelgen.BERT {
		return modelgen.BERT{Name: "synapse-embed-test", Layers: 1, Width: 32, Heads: 2, FFN: 64, Context: 512,
			Pooling: modelgen.PoolingMean, WeightType: gguf.GGMLTypeF32, Seed: 8, Vocab: v}
	})
	run := func(model, out string, args ...string) embedResult {
		return runSynapse(t, nil, append([]string{"embed", in, "-m", model, "-o", out, "--workers", "1", "--threads", "1"}, args...)...)
	}
	prev := filepath.Join(dir, "prev.arrow")
	run(model, prev, "--chunk-tokens", "64").wantCode(t, exitOK)
	prevData, err := os.ReadFile(prev)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbled := slices.Clone(prevData)
	for i := len(garbled) - 200; i < len(garbled)-10; i++ { // the footer
		garbled[i] ^= 0x5a
	}
	for _, tc := range []struct {
		name, model string
		args        []string
		stderr      string
	}{
		{"chunk size", model, []string{"--chunk-tokens", "32", "--previous", prev}, "chunk_tokens: previous 64, this run 32"},
		{"model", other, []string{"--chunk-tokens", "64", "--previous", prev}, "model_digest: previous"},
		{"truncated", model, []string{"--previous", write("half.arrow", prevData[:len(prevData)/2])}, "half.arrow"},
		{"corrupt", model, []string{"--previous", write("garbled.arrow", garbled)}, "garbled.arrow"},
		{"not an output", model, []string{"--previous", write("corpus.arrow", []byte("ARROW1\x00\x00not really"))}, "corpus.arrow"},
		{"input as previous", model, []string{"--previous", in}, "a previous output is .arrow or .parquet"},
		{"missing", model, []string{"--previous", filepath.Join(dir, "nope.arrow")}, "nope.arrow"},
		{"deleted without previous", model, []string{"--deleted", filepath.Join(dir, "d.txt")}, "--deleted needs --previous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "refused-"+strings.ReplaceAll(tc.name, " ", "-")+".arrow")
			res := run(tc.model, out, tc.args...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tc.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, res.stderr)
			}
			for _, p := range []string{out, out + ".errors.jsonl", output.PartialPath(out), output.CheckpointPath(out)} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
	t.Run("previous-any", func(t *testing.T) {
		res := run(model, filepath.Join(dir, "any.arrow"), "--chunk-tokens", "32", "--previous", prev, "--previous-any")
		res.wantCode(t, exitOK)
		if !strings.Contains(res.stdout, "settings differ (chunk_tokens: previous 64, this run 32), --previous-any: every document embedded") {
			t.Errorf("the summary does not say the previous output was ignored:\n%s", res.stdout)
		}
		if c := res.incCounts(t); c.reused != 0 || c.embedded != 40 || c.unchanged != 40 {
			t.Errorf("counts %+v; want 40 unchanged, 0 reused, 40 embedded", c)
		}
	})
}

// TestEmbedDedup: identical texts under other ids are embedded once and
// copied (the summary counts them), bit for bit; --dedup=false embeds
// each, to the same vectors at cosine ≥ 0.99999.
func TestEmbedDedup(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	var docs []map[string]any
	for rep := range 3 {
		for i, d := range testCorpus(20) {
			docs = append(docs, map[string]any{"_id": fmt.Sprintf("r%d-%d", rep, i), "text": d["text"]})
		}
	}
	writeJSONL(t, in, docs)
	model := tinyModel(t)
	run := func(out string, args ...string) (embedResult, []outRow) {
		res := runSynapse(t, nil, append([]string{"embed", in, "-m", model, "-o", out, "--chunk-tokens", "64", "--workers", "2", "--threads", "1"}, args...)...)
		res.wantCode(t, exitOK)
		_, rows := readOutput(t, out)
		return res, rows
	}
	res, got := run(filepath.Join(dir, "dedup.arrow"))
	if c := res.incCounts(t); c.embedded != 20 || c.copied != 40 || c.reused != -1 {
		t.Errorf("counts %+v; want 20 embedded, 40 copied\n%s", c, res.stdout)
	}
	byID := rowsByID(got)
	for i := range 20 {
		first := byID[fmt.Sprintf("r0-%d", i)]
		for rep := 1; rep < 3; rep++ {
			id := fmt.Sprintf("r%d-%d", rep, i)
			copies := slices.Clone(byID[id])
			for k := range copies {
				if want := fmt.Sprintf("%s#%d", id, copies[k].Chunk); copies[k].ChunkID != want {
					t.Errorf("%s: chunk_id %q; want %q", id, copies[k].ChunkID, want)
				}
				copies[k].ID, copies[k].ChunkID = first[k].ID, first[k].ChunkID
			}
			sameRows(t, id+" vs its first text", copies, first)
		}
	}
	res, plain := run(filepath.Join(dir, "plain.arrow"), "--dedup=false")
	if c := res.incCounts(t); c.embedded != 60 || c.copied != -1 || strings.Contains(res.stdout, "tokens saved") {
		t.Errorf("--dedup=false: counts %+v; want 60 embedded, no dedup count, no tokens saved\n%s", c, res.stdout)
	}
	sameAsFull(t, got, plain, nil, func(string) bool { return false })
}

// TestEmbedIncrementalResume: an incremental run killed part way and
// resumed with --previous writes what an uninterrupted incremental run
// writes, and its summary counts the whole job.
func TestEmbedIncrementalResume(t *testing.T) {
	dir := t.TempDir()
	oldIn, newIn := filepath.Join(dir, "old.jsonl"), filepath.Join(dir, "new.jsonl")
	v := makeVersions(1500)
	strip := func(docs []map[string]any) []map[string]any { // titles only: short documents, many batches
		var out []map[string]any
		for i, d := range docs {
			text := d["title"].(string)
			if id := d["_id"].(string); v.changed[id] || i%2 == 0 {
				text += " " + strings.Fields(d["text"].(string))[0] // half the documents change
			}
			out = append(out, map[string]any{"_id": d["_id"], "text": text})
		}
		return out
	}
	writeJSONL(t, oldIn, strip(v.old))
	writeJSONL(t, newIn, strip(v.new))
	model := tinyModel(t)
	args := func(in, out string, more ...string) []string {
		return append([]string{"embed", in, "-m", model, "-o", out, "--batch-tokens", "160", "--workers", "2", "--threads", "1"}, more...)
	}
	prev := filepath.Join(dir, "prev.arrow")
	runSynapse(t, nil, args(oldIn, prev)...).wantCode(t, exitOK)
	clean := filepath.Join(dir, "clean.arrow")
	cleanRes := runSynapse(t, nil, args(newIn, clean, "--previous", prev)...)
	cleanRes.wantCode(t, exitOK)
	_, want := readOutput(t, clean)
	wantCounts := cleanRes.incCounts(t)
	if wantCounts.embedded < 500 || wantCounts.reused < 500 {
		t.Fatalf("clean incremental run: %+v; want hundreds embedded and reused", wantCounts)
	}

	out := filepath.Join(dir, "killed.arrow")
	cmd := synapseCmd(context.Background(), t, nil, args(newIn, out, "--previous", prev, "--chaos", "delay=4ms", "-q")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	waitCheckpoint(t, out, exited)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	refused := runSynapse(t, nil, args(newIn, out, "--previous", clean, "--resume")...)
	refused.wantCode(t, exitUsage)
	if !strings.Contains(refused.stderr, "--previous") {
		t.Errorf("a resume with another --previous: stderr does not name it:\n%s", refused.stderr)
	}
	del := filepath.Join(dir, "deleted.txt")
	res := runSynapse(t, nil, args(newIn, out, "--previous", prev, "--resume", "--deleted", del)...)
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stdout, "in this run, the rest by the interrupted run") {
		t.Fatalf("the run did not resume:\n%s", res.stdout)
	}
	if got := res.incCounts(t); got != wantCounts {
		t.Errorf("resumed counts %+v; want the uninterrupted run's %+v", got, wantCounts)
	}
	_, got := readOutput(t, out)
	sameRows(t, "resumed vs uninterrupted", got, want)
	if got := readLines(t, del); !slices.Equal(sortedCopy(got), sortedKeys(v.deleted)) {
		t.Errorf("--deleted lists %v; want %v", got, sortedKeys(v.deleted))
	}
}

// TestEmbedDedupFailed: a copy of a document that failed fails alike: its
// own error record names the document it copies, and the summary counts it
// in errors.
func TestEmbedDedupFailed(t *testing.T) {
	docs, model, poison, bad := poisonedCorpus(t)
	badID := fmt.Sprint(docs[bad]["_id"])
	docs = append(docs, map[string]any{"_id": "copy", "text": docs[bad]["text"]})
	dir := t.TempDir()
	in, out := filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "o.arrow")
	writeJSONL(t, in, docs)
	res := runSynapse(t, nil, "embed", in, "-m", model, "-o", out, "--workers", "2", "--threads", "1", "--batch-tokens", "1024",
		"--chaos", fmt.Sprintf("abort-on-token=%d", poison))
	res.wantCode(t, exitPartial)
	if read, ok, failed := res.counts(t); read != 13 || ok != 11 || failed != 2 {
		t.Errorf("summary: %d read = %d embedded + %d in errors; want 13 = 11 + 2", read, ok, failed)
	}
	if c := res.incCounts(t); c.copied != 1 {
		t.Errorf("copied %d; want 1", c.copied)
	}
	var copyErr *errLine
	for _, e := range readErrors(t, out+".errors.jsonl") {
		if e.ID == "copy" {
			copyErr = &e
		}
	}
	if copyErr == nil || copyErr.Reason != "engine_crashed" || !strings.Contains(copyErr.Detail, "identical text to document "+badID+", which failed") {
		t.Errorf("the copy's error record: %+v; want engine_crashed naming %s", copyErr, badID)
	}
}
