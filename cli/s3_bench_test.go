package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/objstore/s3test"
	"github.com/synapse-embed/synapse/io/output"
)

// BenchmarkEmbedObjectStore measures `synapse embed` from and to a bucket
// (versitygw on 127.0.0.1, started as the TestS3… tests start it) against
// the same run from and to local files: the first SYNAPSE_S3_BENCH_DOCS
// (default 2000) SciFact documents (title and text) as JSON Lines and as
// Parquet in row groups of 250 rows, the tiny generated model, two workers
// of one thread. Each iteration is one round of the four runs (local and
// bucket, JSON Lines and Parquet) in an order that rotates from round to
// round; each run's wall time and peak RSS (the synapse process alone:
// VmHWM; with its workers: the rusage maximum) are logged, and the medians
// (time) and maxima (RSS) are reported per run kind, with the bucket/local
// ratio of the median times. Then each of 4 shards is run from the bucket
// and its manifest's bytes_read is logged beside the file's size:
//
//	go test -run '^$' -bench EmbedObjectStore -benchtime 5x -timeout 1h ./cli
//
// (with SYNAPSE_S3_SERVER, SYNAPSE_LLAMA_LIB and the fixtures as for make
// test; docs/s3.md has the figures.)
func BenchmarkEmbedObjectStore(b *testing.B) {
	docs := benchDocs(b)
	srv := s3test.Start(b, "bench")
	dir := b.TempDir()
	files := map[string]string{"jsonl": filepath.Join(dir, "corpus.jsonl"), "parquet": filepath.Join(dir, "corpus.parquet")}
	writeBenchJSONL(b, files["jsonl"], docs)
	writeBenchParquet(b, files["parquet"], docs, 250)
	for ext, p := range files {
		srv.PutFile(b, "bench", "corpus."+ext, p)
	}
	model := tinyModel(b)
	testenv.Binary(b) // built before the first run
	common := []string{"-m", model, "--text-field", "title", "--text-field", "text", "--workers", "2", "--threads", "1", "-q",
		"--checkpoint-dir", filepath.Join(dir, "checkpoints")}
	kinds := []string{"local-jsonl", "s3-jsonl", "local-parquet", "s3-parquet"}
	runs := map[string][]benchRun{}
	round := 0
	for b.Loop() {
		for i := range kinds {
			kind := kinds[(i+round)%len(kinds)]
			loc, ext, _ := strings.Cut(kind, "-")
			in, out, env := files[ext], filepath.Join(dir, "out.arrow"), []string(nil)
			if loc == "s3" {
				in, out, env = "s3://bench/corpus."+ext, "s3://bench/out.arrow", srv.Env()
			}
			r := timedEmbed(b, env, append([]string{"embed", in, "-o", out}, common...)...)
			removeBenchOutput(b, srv, out)
			runs[kind] = append(runs[kind], r)
			b.Logf("round %d %-13s %6.2f s  peak %4d MiB  with workers %4d MiB", round, kind, r.wall.Seconds(), r.hwm>>10, r.maxrss>>10)
		}
		round++
	}
	b.StopTimer()
	med := map[string]float64{}
	for _, kind := range kinds {
		rs := runs[kind]
		walls := make([]float64, len(rs))
		var hwm, maxrss int64
		for i, r := range rs {
			walls[i], hwm, maxrss = r.wall.Seconds(), max(hwm, r.hwm), max(maxrss, r.maxrss)
		}
		slices.Sort(walls)
		med[kind] = walls[len(walls)/2]
		b.ReportMetric(med[kind], kind+"-s")
		b.ReportMetric(float64(hwm>>10), kind+"-peak-MiB")
		b.ReportMetric(float64(maxrss>>10), kind+"-peak-with-workers-MiB")
	}
	for _, ext := range []string{"jsonl", "parquet"} {
		b.ReportMetric(med["s3-"+ext]/med["local-"+ext], "s3/local-"+ext)
	}
	for _, ext := range []string{"jsonl", "parquet"} {
		benchShardFetches(b, srv, files[ext], "s3://bench/corpus."+ext, common)
	}
}

// benchRun is one timed run.
type benchRun struct {
	wall        time.Duration
	hwm, maxrss int64 // KiB: synapse alone, and with its workers
}

// timedEmbed runs synapse and returns its wall time and peak RSS; a run
// that fails fails the benchmark.
func timedEmbed(b *testing.B, env []string, args ...string) benchRun {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := synapseCmd(ctx, b, env, args...)
	stderr, err := os.CreateTemp(b.TempDir(), "stderr")
	if err != nil {
		b.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	peak := make(chan int64)
	go func() { peak <- watchHWM(cmd.Process.Pid) }()
	err = cmd.Wait()
	r := benchRun{wall: time.Since(start), hwm: <-peak}
	if err != nil {
		msg, _ := os.ReadFile(stderr.Name())
		b.Fatalf("synapse %v: %v\n%s", args, err, msg)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxrss = ru.Maxrss
	}
	return r
}

// removeBenchOutput removes a run's output so that the next run writes it anew.
func removeBenchOutput(b *testing.B, srv *s3test.Server, out string) {
	b.Helper()
	if objstore.IsURL(out) {
		loc, err := objstore.Parse(out)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := srv.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)}); err != nil {
			b.Fatal(err)
		}
		return
	}
	if err := os.Remove(out); err != nil {
		b.Fatal(err)
	}
}

// benchShardFetches runs each shard of 4 of url and logs what its manifest
// says it fetched, beside the file's size (and, for Parquet, its footer).
func benchShardFetches(b *testing.B, srv *s3test.Server, local, url string, common []string) {
	b.Helper()
	data, err := os.ReadFile(local)
	if err != nil {
		b.Fatal(err)
	}
	size, footer := int64(len(data)), int64(0)
	if filepath.Ext(local) == ".parquet" {
		footer = int64(binary.LittleEndian.Uint32(data[size-8:])) + 8
	}
	var total int64
	for i := range 4 {
		args := append([]string{"embed", url, "-o", "s3://bench/shards.arrow", "--shard", fmt.Sprintf("%d/4", i)}, common...)
		timedEmbed(b, srv.Env(), args...)
		var m output.Manifest
		key := fmt.Sprintf("shards.shard-%d-of-4.json", i)
		mb, ok := srv.Get(b, "bench", key)
		if err := json.Unmarshal(mb, &m); !ok || err != nil || len(m.Inputs) != 1 {
			b.Fatalf("manifest %s: %v\n%s", key, err, mb)
		}
		in := m.Inputs[0]
		total += in.BytesRead
		b.Logf("%s shard %d of 4: fetched %d of %d bytes (%.3f of the file; footer %d), %d records",
			filepath.Base(local), i, in.BytesRead, size, float64(in.BytesRead)/float64(size), footer, in.Records)
		for _, k := range []string{fmt.Sprintf("shards.shard-%d-of-4.arrow", i), key} {
			removeBenchOutput(b, srv, "s3://bench/"+k)
		}
	}
	b.Logf("%s: 4 shards fetched %d bytes in all, %.3f × the file", filepath.Base(local), total, float64(total)/float64(size))
}

// benchDoc is one SciFact document.
type benchDoc struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// benchDocs reads the first SYNAPSE_S3_BENCH_DOCS SciFact documents.
func benchDocs(b *testing.B) []benchDoc {
	n, err := strconv.Atoi(cmp.Or(os.Getenv("SYNAPSE_S3_BENCH_DOCS"), "2000"))
	if err != nil || n <= 0 {
		b.Fatalf("SYNAPSE_S3_BENCH_DOCS: want a positive count (%v)", err)
	}
	path := testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		testenv.MissingFixture(b, "SciFact corpus: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var docs []benchDoc
	for line := 1; len(docs) < n && sc.Scan(); line++ {
		var d benchDoc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			b.Fatalf("%s:%d: %v", path, line, err)
		}
		docs = append(docs, d)
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	if len(docs) < n {
		b.Fatalf("%s has %d documents; SYNAPSE_S3_BENCH_DOCS asks for %d", path, len(docs), n)
	}
	return docs
}

func writeBenchJSONL(b *testing.B, path string, docs []benchDoc) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

func writeBenchParquet(b *testing.B, path string, docs []benchDoc, rowGroup int64) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "_id", Type: arrow.BinaryTypes.String},
		{Name: "title", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String},
	}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for _, d := range docs {
		bld.Field(0).(*array.StringBuilder).Append(d.ID)
		bld.Field(1).(*array.StringBuilder).Append(d.Title)
		bld.Field(2).(*array.StringBuilder).Append(d.Text)
	}
	writeRecordGroups(b, path, bld.NewRecordBatch(), rowGroup)
}
