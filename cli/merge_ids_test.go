package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/model/testmodels"
)

// idCorpus writes a.jsonl and b.jsonl, 60 documents each (a shard each of
// two: each file is over the 64 KiB a shard block has), several chunks
// long at --chunk-tokens 32 (so a document has adjacent rows sharing its
// id). Document 40 of a.jsonl repeats the id of document 10 (one shard's
// part); with cross, the last document of b.jsonl repeats the id of a.jsonl's
// document 5 (the other shard's part).
func idCorpus(t *testing.T, dir string, cross bool) []string {
	t.Helper()
	docs := testmodels.Corpus(120)
	var paths []string
	for f, name := range []string{"a.jsonl", "b.jsonl"} {
		var b bytes.Buffer
		for i := range 60 {
			d := docs[60*f+i]
			id := d.ID
			switch {
			case f == 0 && i == 40:
				id = docs[10].ID
			case f == 1 && i == 59 && cross:
				id = docs[5].ID
			}
			line, _ := json.Marshal(map[string]any{"id": id, "text": d.Title + ". " + d.Text[:min(len(d.Text), 300)],
				"pad": strings.Repeat("-", 1200)}) // the file over a 64 KiB shard block

			b.Write(append(line, '\n'))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestMergeIDsAcrossShards: a corpus whose id repeats within one shard's
// part merges to the single run (the shard wrote the single run's
// duplicate_id row); one whose id repeats in two shards' parts is refused
// by merge (exit 2, naming the id and both manifests), nothing published
// and no temporary file left, where the single run writes a duplicate_id row.
func TestMergeIDsAcrossShards(t *testing.T) {
	model := tinyModel(t)
	for _, cross := range []bool{false, true} {
		t.Run(fmt.Sprintf("cross=%v", cross), func(t *testing.T) {
			dir := t.TempDir()
			inputs := idCorpus(t, dir, cross)
			embed := func(extra ...string) embedResult {
				args := append([]string{"embed"}, inputs...)
				return runSynapse(t, nil, append(append(args, "-m", model, "--workers", "1", "--threads", "1",
					"--chunk-tokens", "32", "-q"), extra...)...)
			}
			single := filepath.Join(dir, "single.arrow")
			embed("-o", single).wantCode(t, exitPartial)
			wantErrs, _ := os.ReadFile(single + ".errors.jsonl")
			if n := strings.Count(string(wantErrs), `"duplicate_id"`); n != 1+map[bool]int{false: 0, true: 1}[cross] {
				t.Fatalf("single run: %d duplicate_id rows; want one per repeated id\n%s", n, wantErrs)
			}
			out := filepath.Join(dir, "out.arrow")
			// Shard 0 (a.jsonl) finds its repeated id; shard 1 (b.jsonl)
			// has none of its own.
			embed("-o", out, "--shard", "0/2").wantCode(t, exitPartial)
			embed("-o", out, "--shard", "1/2").wantCode(t, exitOK)
			if b, _ := os.ReadFile(filepath.Join(dir, "out.shard-0-of-2.arrow.errors.jsonl")); strings.Count(string(b), `"duplicate_id"`) != 1 {
				t.Fatalf("shard 0's errors file:\n%s\nwant one duplicate_id row (the other repeat in shard 1's part)", b)
			}
			merged := filepath.Join(dir, "merged.arrow")
			res := runSynapse(t, nil, "merge", out, "-o", merged)
			if !cross {
				res.wantCode(t, exitPartial)
				_, want := readOutput(t, single)
				_, got := readOutput(t, merged)
				sameRows(t, "merged vs single run", got, want)
				gotErrs, _ := os.ReadFile(merged + ".errors.jsonl")
				if !bytes.Equal(gotErrs, wantErrs) {
					t.Errorf("merged errors file:\n%s\nwant the single run's:\n%s", gotErrs, wantErrs)
				}
				return
			}
			res.wantCode(t, exitUsage)
			id := testmodels.Corpus(120)[5].ID
			for _, want := range []string{fmt.Sprintf("id %q", id), "out.shard-0-of-2.json", "out.shard-1-of-2.json"} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("merge of an id in two shards: got\n%s\nwant it to name %s", res.stderr, want)
				}
			}
			left, _ := filepath.Glob(filepath.Join(dir, "merged*"))
			if len(left) > 0 {
				t.Errorf("merge refused yet left %v", left)
			}
		})
	}
}
