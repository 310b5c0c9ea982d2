package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/objstore/s3test"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// End-to-end tests of inputs and outputs in object storage, against a real
// S3-compatible server (versitygw, io/objstore/s3test) started per test.

// fetchObject writes an object to a local file of the same base name.
func fetchObject(t *testing.T, srv *s3test.Server, bucket, key string) string {
	t.Helper()
	b, ok := srv.Get(t, bucket, key)
	if !ok {
		t.Fatalf("s3://%s/%s does not exist; the bucket has %v", bucket, key, srv.Keys(t, bucket, ""))
	}
	p := filepath.Join(t.TempDir(), filepath.Base(key))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestS3Embed: a JSONL, a .jsonl.gz and a Parquet file (several row
// groups) read from a bucket (by a glob) and embedded into the bucket give
// the local run's output and errors; 4 shards as separate processes and
// merge, all in the bucket, give them too; the server killed mid-upload
// leaves no object (exit 1) and --resume with the server back gives the
// uninterrupted output; wrong credentials, a missing bucket or object are
// refused before any work (exit 2), naming them.
func TestS3Embed(t *testing.T) {
	srv := s3test.Start(t, "corpus", "out")
	dir := t.TempDir()
	inputs := shardCorpus(t, dir)
	for _, in := range inputs {
		srv.PutFile(t, "corpus", "in/"+filepath.Base(in), in)
	}
	model := tinyModel(t)
	ckpt := t.TempDir()
	embed := func(env []string, args ...string) embedResult {
		return runSynapse(t, append(srv.Env(), env...), append([]string{"embed", "-m", model, "--workers", "2", "--threads", "1",
			"-q", "--checkpoint-dir", ckpt}, args...)...)
	}
	local := filepath.Join(dir, "local.arrow")
	embed(nil, append(inputs, "-o", local)...).wantCode(t, exitPartial)
	_, want := readOutput(t, local)
	localErrs, _ := os.ReadFile(local + ".errors.jsonl")
	wantErrs := strings.ReplaceAll(string(localErrs), `"`+dir+"/", `"s3://corpus/in/`)
	same := func(t *testing.T, key string) {
		t.Helper()
		_, got := readOutput(t, fetchObject(t, srv, "out", key))
		sameRows(t, "s3://out/"+key+" vs the local run", got, want)
		if errs, _ := srv.Get(t, "out", key+".errors.jsonl"); string(errs) != wantErrs || wantErrs == "" {
			t.Errorf("s3://out/%s.errors.jsonl:\n%s\nwant (the local run's):\n%s", key, errs, wantErrs)
		}
	}
	t.Run("bucket to bucket", func(t *testing.T) {
		embed(nil, "s3://corpus/in/*", "-o", "s3://out/v.arrow").wantCode(t, exitPartial)
		same(t, "v.arrow")
		if left, _ := os.ReadDir(ckpt); len(left) != 0 {
			t.Errorf("resume files left in --checkpoint-dir after the commit: %v", left)
		}
	})
	t.Run("shards and merge", func(t *testing.T) {
		for i := range 4 {
			embed(nil, "s3://corpus/in/*", "-o", "s3://out/sh.arrow", "--shard", fmt.Sprintf("%d/4", i)).wantCode(t, exitPartial)
		}
		runSynapse(t, srv.Env(), "merge", "s3://out/sh.arrow", "-o", "s3://out/merged.arrow").wantCode(t, exitPartial)
		same(t, "merged.arrow")
	})
	t.Run("server killed mid-upload", func(t *testing.T) {
		proxy := srv.Proxy(t)
		proxy.Arm(s3test.Writes("out", "cut.arrow"), srv.Kill)
		res := runSynapse(t, append(proxy.Env(srv), "AWS_MAX_ATTEMPTS=2"), "embed", "-m", model, "--workers", "2", "--threads", "1",
			"--checkpoint-dir", ckpt, "s3://corpus/in/*", "-o", "s3://out/cut.arrow")
		res.wantCode(t, exitFatal)
		if !proxy.Fired() || !strings.Contains(res.stderr, "s3://out/cut.arrow") {
			t.Fatalf("the drill fired: %v; stderr (want the key named):\n%s", proxy.Fired(), res.stderr)
		}
		srv.Restart(t)
		if _, ok := srv.Get(t, "out", "cut.arrow"); ok {
			t.Fatal("an interrupted upload left an object under the final key")
		}
		res = runSynapse(t, proxy.Env(srv), "embed", "-m", model, "--workers", "2", "--threads", "1",
			"--checkpoint-dir", ckpt, "s3://corpus/in/*", "-o", "s3://out/cut.arrow", "--resume")
		res.wantCode(t, exitPartial)
		same(t, "cut.arrow")
		if ups := srv.Uploads(t, "out"); len(ups) != 0 {
			t.Errorf("incomplete multipart uploads left: %v", ups)
		}
	})
	t.Run("refused before any work", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			env   []string
			args  []string
			words []string
		}{
			{"wrong secret", []string{"AWS_SECRET_ACCESS_KEY=wrong"}, []string{"s3://corpus/in/a.jsonl", "-o", filepath.Join(dir, "x.arrow")},
				[]string{"s3://corpus/in/a.jsonl", "credentials are refused"}},
			{"unknown access key", []string{"AWS_ACCESS_KEY_ID=nobody"}, []string{"s3://corpus/in/a.jsonl", "-o", filepath.Join(dir, "x.arrow")},
				[]string{"s3://corpus/in/a.jsonl"}},
			{"missing bucket", nil, []string{inputs[0], "-o", "s3://no-such-bucket/v.arrow"}, []string{"s3://no-such-bucket", "no such bucket"}},
			{"missing object", nil, []string{"s3://corpus/in/nope.jsonl", "-o", filepath.Join(dir, "x.arrow")}, []string{"s3://corpus/in/nope.jsonl"}},
			{"glob matching nothing", nil, []string{"s3://corpus/in/*.csv", "-o", filepath.Join(dir, "x.arrow")}, []string{"s3://corpus/in/*.csv", "no object matches"}},
		} {
			res := embed(c.env, c.args...)
			res.wantCode(t, exitUsage)
			for _, w := range c.words {
				if !strings.Contains(strings.ToLower(res.stderr), strings.ToLower(w)) {
					t.Errorf("%s: stderr does not say %q:\n%s", c.name, w, res.stderr)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "x.arrow")); err == nil {
			t.Error("a refused run wrote its output")
		}
	})
}

// TestS3ParquetShardFetchesItsQuarter: a shard of four of a Parquet file
// in a bucket fetches the footer and its row groups, about a quarter of
// the file, by range requests, as its manifest (in the bucket) says.
func TestS3ParquetShardFetchesItsQuarter(t *testing.T) {
	srv := s3test.Start(t, "corpus", "out")
	dir := t.TempDir()
	pq := filepath.Join(dir, "big.parquet")
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, d := range testmodels.Corpus(1600) {
		bld.Field(0).(*array.StringBuilder).Append(d.ID)
		bld.Field(1).(*array.StringBuilder).Append(d.Title)
	}
	writeRecordGroups(t, pq, bld.NewRecordBatch(), 100) // 16 row groups: 4 a shard
	srv.PutFile(t, "corpus", "big.parquet", pq)
	b, _ := os.ReadFile(pq)
	size := int64(len(b))
	footer := int64(binary.LittleEndian.Uint32(b[size-8:])) + 8
	res := runSynapse(t, srv.Env(), "embed", "-m", tinyModel(t), "--workers", "2", "--threads", "1", "-q",
		"--checkpoint-dir", t.TempDir(), "s3://corpus/big.parquet", "-o", "s3://out/big.arrow", "--shard", "1/4")
	res.wantCode(t, exitOK)
	var m output.Manifest
	mb, _ := srv.Get(t, "out", "big.shard-1-of-4.json")
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Inputs) != 1 {
		t.Fatalf("manifest: %v\n%s", err, mb)
	}
	in := m.Inputs[0]
	quarter := (size - footer) / 4
	got := in.BytesRead - footer
	t.Logf("shard 1 of 4 fetched %d of %d bytes (footer %d, a quarter of the rest %d); row groups [%d, %d)",
		in.BytesRead, size, footer, quarter, in.RowGroup0, in.RowGroup1)
	if got < quarter*3/4 || got > quarter*5/4 {
		t.Errorf("shard 1 of 4 fetched %d bytes beyond the footer; want about %d (a quarter of %d)", got, quarter, size-footer)
	}
	if m.Rows.Read != 400 {
		t.Errorf("shard read %d rows; want 400", m.Rows.Read)
	}
}

// TestS3PreviousIncremental: --previous s3://… (Arrow: spooled and mapped;
// Parquet: ranged reads) and --deleted s3://… give the local incremental run.
func TestS3PreviousIncremental(t *testing.T) {
	srv := s3test.Start(t, "data")
	dir := t.TempDir()
	v := makeVersions(400)
	oldIn, newIn := filepath.Join(dir, "old.jsonl"), filepath.Join(dir, "new.jsonl")
	writeJSONL(t, oldIn, v.old)
	writeJSONL(t, newIn, v.new)
	srv.PutFile(t, "data", "new.jsonl", newIn)
	model := tinyModel(t)
	embed := func(in, out string, args ...string) embedResult {
		t.Helper()
		res := runSynapse(t, srv.Env(), append([]string{"embed", in, "-m", model, "-o", out, "--chunk-tokens", "64",
			"--workers", "2", "--threads", "1", "--checkpoint-dir", t.TempDir()}, args...)...)
		res.wantCode(t, exitOK)
		return res
	}
	for _, ext := range []string{"arrow", "parquet"} {
		t.Run(ext, func(t *testing.T) {
			prev := filepath.Join(dir, "prev."+ext)
			embed(oldIn, prev)
			srv.PutFile(t, "data", "prev."+ext, prev)
			localOut, localDel := filepath.Join(dir, "inc-"+ext+".arrow"), filepath.Join(dir, "deleted-"+ext+".txt")
			wantRes := embed(newIn, localOut, "--previous", prev, "--deleted", localDel)
			gotRes := embed("s3://data/new.jsonl", "s3://data/inc-"+ext+".arrow", "--previous", "s3://data/prev."+ext,
				"--deleted", "s3://data/deleted-"+ext+".txt")
			if g, w := gotRes.incCounts(t), wantRes.incCounts(t); g != w || w.reused == 0 {
				t.Errorf("counts %+v; the local run's %+v", g, w)
			}
			_, want := readOutput(t, localOut)
			_, got := readOutput(t, fetchObject(t, srv, "data", "inc-"+ext+".arrow"))
			sameRows(t, "incremental from the bucket vs local", got, want)
			wantDel, _ := os.ReadFile(localDel)
			gotDel, _ := srv.Get(t, "data", "deleted-"+ext+".txt")
			if !bytes.Equal(gotDel, wantDel) || len(wantDel) == 0 {
				t.Errorf("--deleted in the bucket:\n%s\nwant:\n%s", gotDel, wantDel)
			}
		})
	}
}

// TestS3Search: embed --dtype int8 --calibration from a bucket into the
// bucket equals the local calibrated run; search with its queries, corpus
// (by a glob), --rescore-with and --qrels in a bucket writes to the bucket
// the bytes the local search writes (TREC and TSV) and prints the same
// metrics; a missing object is refused before any work (exit 2).
func TestS3Search(t *testing.T) {
	srv := s3test.Start(t, "vec", "out")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	docs := testCorpus(40)
	writeJSONL(t, p("corpus.jsonl"), docs)
	var qs []map[string]any
	var qrels strings.Builder
	for i, d := range docs[:10] {
		qs = append(qs, map[string]any{"_id": fmt.Sprint("q", i), "text": strings.Join(strings.Fields(d["text"].(string))[:5], " ")})
		fmt.Fprintf(&qrels, "q%d 0 %v 1\n", i, d["_id"])
	}
	writeJSONL(t, p("queries.jsonl"), qs)
	if err := os.WriteFile(p("qrels.txt"), []byte(qrels.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	model := tinyModel(t)
	runSynapse(t, nil, embedArgs(p("corpus.jsonl"), model, p("c.arrow"))...).wantCode(t, 0)
	runSynapse(t, nil, embedArgs(p("queries.jsonl"), model, p("q.arrow"))...).wantCode(t, 0)
	runSynapse(t, nil, embedArgs(p("corpus.jsonl"), model, p("c8.arrow"), "--dtype", "int8", "--calibration", p("c.arrow"))...).wantCode(t, 0)
	for _, n := range []string{"c.arrow", "q.arrow", "qrels.txt"} {
		srv.PutFile(t, "vec", "in/"+n, p(n))
	}
	env := srv.Env()
	runSynapse(t, env, embedArgs(p("corpus.jsonl"), model, "s3://out/c8.arrow", "--dtype", "int8", "--calibration", "s3://vec/in/c.arrow")...).wantCode(t, 0)
	want, got := readVecFile(t, p("c8.arrow")), readVecFile(t, fetchObject(t, srv, "out", "c8.arrow"))
	wr, _ := want.meta.GetValue(vector.MetaRanges)
	gr, _ := got.meta.GetValue(vector.MetaRanges)
	if got.dtype != vector.Int8 || gr != wr || !slices.Equal(got.ids, want.ids) || !slices.EqualFunc(got.rows, want.rows, bytes.Equal) {
		t.Errorf("int8 calibrated on s3://vec/in/c.arrow (%s) differs from the local run (ranges equal: %v)", got.dtype, gr == wr)
	}
	srv.PutFile(t, "vec", "in/c8.arrow", p("c8.arrow"))
	for _, ext := range []string{"trec", "tsv"} {
		local := runSynapse(t, nil, "search", "--queries", p("q.arrow"), "--corpus", p("c8.arrow"), "--rescore", "4", "--rescore-with", p("c.arrow"),
			"-k", "5", "--qrels", p("qrels.txt"), "-o", p("run."+ext))
		local.wantCode(t, 0)
		remote := runSynapse(t, env, "search", "--queries", "s3://vec/in/q.arrow", "--corpus", "s3://vec/in/c8*", "--rescore", "4",
			"--rescore-with", "s3://vec/in/c.arrow", "-k", "5", "--qrels", "s3://vec/in/qrels.txt", "-o", "s3://out/run."+ext)
		remote.wantCode(t, 0)
		wantRun, _ := os.ReadFile(p("run." + ext))
		gotRun, _ := srv.Get(t, "out", "run."+ext)
		if len(wantRun) == 0 || !bytes.Equal(gotRun, wantRun) {
			t.Errorf("s3://out/run.%s:\n%s\nwant the local run's:\n%s", ext, gotRun, wantRun)
		}
		metrics := func(s string) string { return s[max(0, strings.Index(s, "nDCG@10")):] }
		if !strings.Contains(local.stdout, "nDCG@10") || metrics(remote.stdout) != metrics(local.stdout) {
			t.Errorf("--qrels in a bucket printed\n%s\nwant the local run's\n%s", remote.stdout, local.stdout)
		}
	}
	res := runSynapse(t, env, "search", "--queries", "s3://vec/in/q.arrow", "--corpus", "s3://vec/in/nope.arrow", "-o", "s3://out/x.trec")
	if res.wantCode(t, exitUsage); !strings.Contains(res.stderr, "s3://vec/in/nope.arrow") {
		t.Errorf("a missing corpus object: stderr does not name it:\n%s", res.stderr)
	}
	if _, ok := srv.Get(t, "out", "x.trec"); ok {
		t.Error("a refused search wrote its output")
	}
}
