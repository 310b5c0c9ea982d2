package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// shardCorpus writes a plain JSONL file of several blocks with bad lines
// scattered through it (so some straddle the split points), a gzip JSONL
// file, and a Parquet file of several row groups. Texts repeat (--dedup is
// on by default), within a packing group and across shards and files.
func shardCorpus(t *testing.T, dir string) []string {
	t.Helper()
	docs := testmodels.Corpus(1400)
	var b bytes.Buffer
	for i, d := range docs[:1200] {
		if i%53 == 20 {
			b.WriteString("{\"id\": \"broken" + strings.Repeat(" ", i%200) + "\n")
			continue
		}
		line, _ := json.Marshal(map[string]any{"id": d.ID, "text": shardText(docs, i)})
		b.Write(append(line, '\n'))
	}
	plain := filepath.Join(dir, "a.jsonl")
	os.WriteFile(plain, b.Bytes(), 0o644)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for _, d := range docs[1200:1250] {
		line, _ := json.Marshal(map[string]any{"id": d.ID, "text": d.Title})
		zw.Write(append(line, '\n'))
	}
	zw.Close()
	gzPath := filepath.Join(dir, "b.jsonl.gz")
	os.WriteFile(gzPath, gz.Bytes(), 0o644)
	pq := filepath.Join(dir, "c.parquet")
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, d := range docs[1250:] {
		bld.Field(0).(*array.StringBuilder).Append(d.ID)
		bld.Field(1).(*array.StringBuilder).Append(d.Title)
	}
	for i := range 30 { // texts of the JSON Lines file again, under new ids
		bld.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("again-%d", i))
		bld.Field(1).(*array.StringBuilder).Append(shardText(docs, 37*i))
	}
	writeRecordGroups(t, pq, bld.NewRecordBatch(), 40)
	return []string{plain, gzPath, pq}
}

// TestShardsMergeToTheSingleRun: 4 shards as separate processes, merged,
// give the single run's rows (vectors bit for bit) and its errors file byte
// for byte; each shard reads about its part only; a done shard is not run
// again; merge names a missing shard (exit 1) and refuses a foreign one
// (exit 2).
func TestShardsMergeToTheSingleRun(t *testing.T) {
	dir := t.TempDir()
	inputs := shardCorpus(t, dir)
	model := tinyModel(t)
	embed := func(extra ...string) embedResult {
		args := append([]string{"embed"}, inputs...)
		return runSynapse(t, nil, append(append(args, "-m", model, "--workers", "2", "--threads", "1", "-q"), extra...)...)
	}
	single := filepath.Join(dir, "single.arrow")
	embed("-o", single).wantCode(t, exitPartial)
	out := filepath.Join(dir, "out.arrow")
	for i := range 4 {
		embed("-o", out, "--shard", fmt.Sprintf("%d/4", i)).wantCode(t, exitPartial)
	}
	// A shard whose manifest exists is done: running it again does nothing.
	res := embed("-o", out, "--shard", "2/4")
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stderr, "nothing to do") {
		t.Errorf("a done shard ran again:\n%s", res.stderr)
	}
	merged := filepath.Join(dir, "merged.arrow")
	// A merge SIGKILLed during its final write left temporary files: the
	// next merge removes them (their PID is no running process).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, final := range []string{merged, merged + ".errors.jsonl"} {
		p := fmt.Sprintf("%s.tmp-synapse-%d-0a1b2c", final, dead.Process.Pid)
		if err := os.WriteFile(p, []byte("a killed merge's"), 0o644); err != nil {
			t.Fatal(err)
		}
		stale = append(stale, p)
	}
	// The merged job exits as the single run did: 3, rows in errors.
	runSynapse(t, nil, "merge", out, "-o", merged).wantCode(t, exitPartial)
	for _, p := range stale {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there after the merge; want a dead run's temporary file removed", p)
		}
	}
	_, want := readOutput(t, single)
	_, got := readOutput(t, merged)
	sameRows(t, "merged vs single run", got, want)
	wantErrs, _ := os.ReadFile(single + ".errors.jsonl")
	gotErrs, _ := os.ReadFile(merged + ".errors.jsonl")
	if !bytes.Equal(gotErrs, wantErrs) || len(wantErrs) == 0 {
		t.Errorf("merged errors file differs from the single run's:\n%s\nwant:\n%s", gotErrs, wantErrs)
	}
	st, _ := os.Stat(inputs[0])
	for i := range 4 {
		m, err := output.ReadManifest(filepath.Join(dir, fmt.Sprintf("out.shard-%d-of-4.json", i)))
		if err != nil {
			t.Fatal(err)
		}
		in := m.Inputs[0]
		if !in.Skip && in.BytesRead > in.End-in.Start+2*64<<10 {
			t.Errorf("shard %d read %d bytes of a part of %d of a %d-byte file", i, in.BytesRead, in.End-in.Start, st.Size())
		}
	}
	// A manifest whose counts disagree with its part, its errors file or
	// each other is refused (exit 2), naming it and the numbers.
	m0 := filepath.Join(dir, "out.shard-0-of-4.json")
	orig, _ := os.ReadFile(m0)
	for _, tc := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { m["output_rows"] = m["output_rows"].(float64) + 1 }, "rows; it has"},
		{func(m map[string]any) { m["error_records"] = m["error_records"].(float64) + 1 }, "error records;"},
		{func(m map[string]any) {
			r := m["rows"].(map[string]any)
			r["read"], r["ok"] = r["read"].(float64)+100, r["ok"].(float64)+100
		}, "its inputs hold"},
		{func(m map[string]any) { r := m["rows"].(map[string]any); r["failed"] = r["failed"].(float64) + 1 }, "is not done"},
		{func(m map[string]any) { delete(m, "output_rows") }, "no output_rows"},
	} {
		var m map[string]any
		json.Unmarshal(orig, &m)
		tc.edit(m)
		b, _ := json.Marshal(m)
		os.WriteFile(m0, b, 0o644)
		mout := filepath.Join(dir, "tampered.arrow")
		res := runSynapse(t, nil, "merge", out, "-o", mout)
		res.wantCode(t, exitUsage)
		if !strings.Contains(res.stderr, m0) || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("merge with a tampered manifest: got\n%s\nwant its path and %q", res.stderr, tc.want)
		}
		if _, err := os.Stat(mout); err == nil {
			t.Errorf("merge refused yet wrote %s", mout)
		}
	}
	os.WriteFile(m0, orig, 0o644)
	// A missing shard is named (exit 1: run it again); a foreign one (other settings) is refused (exit 2).
	gone := filepath.Join(dir, "out.shard-1-of-4.json")
	os.Rename(gone, gone+".away")
	res = runSynapse(t, nil, "merge", out, "-o", filepath.Join(dir, "m2.arrow"))
	res.wantCode(t, exitFatal)
	if !strings.Contains(res.stderr, "shard 1 of 4 not done") {
		t.Errorf("merge with shard 1 missing:\n%s", res.stderr)
	}
	os.Rename(gone+".away", gone)
	embed("-o", out, "--shard", "3/4", "--force", "--chunk-tokens", "100").wantCode(t, exitPartial)
	res = runSynapse(t, nil, "merge", out, "-o", filepath.Join(dir, "m3.arrow"))
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "shard 3") {
		t.Errorf("merge with a foreign shard 3:\n%s", res.stderr)
	}
}

// shardText is docs[i]'s text, or for some i an earlier document's: a few
// lines back or 250 back (in another shard).
func shardText(docs []testmodels.Doc, i int) string {
	switch {
	case i%7 == 2 && i >= 2:
		i -= 2
	case i%13 == 6 && i >= 250:
		i -= 250
	}
	d := docs[i]
	return d.Title + ". " + d.Text[:min(len(d.Text), 200+i%300)]
}

// TestShardFlags: --shard auto/N takes I from the scheduler's environment;
// shards write parts merge can read; --max-error-rate turns exit 3 into 0.
func TestShardFlags(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		spec string
		i    int
		err  string
	}{
		{map[string]string{"JOB_COMPLETION_INDEX": "2"}, "auto/4", 2, ""},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "3"}, "auto/4", 3, ""},
		{map[string]string{"JOB_COMPLETION_INDEX": "1", "SLURM_ARRAY_TASK_ID": "3"}, "auto/4", 1, ""},
		{nil, "auto/4", 0, "neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID"},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "4"}, "auto/4", 0, "want I/N"},
		{nil, "1/1", 0, "want I/N"},
	} {
		i, n, err := parseShard(tc.spec, func(k string) string { return tc.env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %v: got %v; want an error saying %q", tc.spec, tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || i != tc.i || n != 4 {
			t.Errorf("%s %v: got %d/%d, %v; want %d/4", tc.spec, tc.env, i, n, err, tc.i)
		}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var docs []map[string]any
	for i := range 50 {
		docs = append(docs, map[string]any{"id": fmt.Sprint(i), "text": "hello cells"})
	}
	writeJSONL(t, in, docs)
	f, _ := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{broken\n")
	f.Close()
	model := tinyModel(t)
	res := runSynapse(t, nil, "embed", in, "-m", model, "-o", filepath.Join(dir, "o.jsonl"), "--shard", "0/2")
	res.wantCode(t, exitUsage)
	res = runSynapse(t, nil, "embed", in, "-m", model, "-o", filepath.Join(dir, "ok.arrow"), "--max-error-rate", "0.05")
	res.wantCode(t, exitOK)
	if !strings.Contains(res.stderr, "within --max-error-rate") {
		t.Errorf("no word about the tolerated errors:\n%s", res.stderr)
	}
	runSynapse(t, nil, "embed", in, "-m", model, "-o", filepath.Join(dir, "ko.arrow"), "--max-error-rate", "0.01").wantCode(t, exitPartial)

	// One shard of one (a Slurm array of one task): a part and a manifest
	// like any shard, and merge makes the output.
	one := filepath.Join(dir, "one.arrow")
	runSynapse(t, nil, "embed", in, "-m", model, "-o", one, "--shard", "0/1").wantCode(t, exitPartial)
	m, err := output.ReadManifest(filepath.Join(dir, "one.shard-0-of-1.json"))
	if err != nil {
		t.Fatalf("--shard 0/1 wrote no manifest: %v", err)
	}
	if m.Rows.Read != 51 || m.Rows.OK != 50 {
		t.Errorf("--shard 0/1 manifest rows: got %+v; want 51 read, 50 embedded", m.Rows)
	}
	runSynapse(t, nil, "merge", one).wantCode(t, exitPartial)
	if _, err := os.Stat(one); err != nil {
		t.Errorf("merge of one shard: %v", err)
	}
}
