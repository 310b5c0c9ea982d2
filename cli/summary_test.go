package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// The summary's figures, each checked against the output it describes
// (issue 44 item 3), and the one-pass int8 calibration (item 4).

// figure is the first number after a summary line's label, or fails.
func figure(t *testing.T, stdout, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + `\s+(\d+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no %q line in the summary:\n%s", label, stdout)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// arrowFile is an Arrow IPC output read whole: its metadata and record
// batches (retained; released by the test's cleanup).
type arrowFile struct {
	meta map[string]string
	recs []arrow.RecordBatch
}

func readArrowFile(t *testing.T, path string) arrowFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer r.Close()
	af := arrowFile{meta: map[string]string{}}
	md := r.Schema().Metadata()
	for i, k := range md.Keys() {
		af.meta[k] = md.Values()[i]
	}
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatalf("read %s batch %d: %v", path, i, err)
		}
		rec.Retain()
		t.Cleanup(rec.Release)
		af.recs = append(af.recs, rec)
	}
	return af
}

// rows, ids and tokens are the file's row count, distinct document ids and
// the sum of its n_tokens.
func (af arrowFile) figures() (rows, ids, tokens int) {
	seen := map[string]bool{}
	for _, rec := range af.recs {
		id := rec.Column(rec.Schema().FieldIndices(output.ColID)[0]).(*array.String)
		nt := rec.Column(rec.Schema().FieldIndices(output.ColNTokens)[0]).(*array.Int32)
		for i := range int(rec.NumRows()) {
			seen[id.Value(i)] = true
			tokens += int(nt.Value(i))
		}
		rows += int(rec.NumRows())
	}
	return rows, len(seen), tokens
}

// chunksByID counts each document's rows.
func (af arrowFile) chunksByID() (map[string]int, []string) {
	n := map[string]int{}
	var order []string
	for _, rec := range af.recs {
		id := rec.Column(rec.Schema().FieldIndices(output.ColID)[0]).(*array.String)
		for i := range int(rec.NumRows()) {
			if n[id.Value(i)] == 0 {
				order = append(order, id.Value(i))
			}
			n[id.Value(i)]++
		}
	}
	return n, order
}

// checkFigures checks a finished embedding's summary against its output:
// rows read, chunks and tokens.
func checkFigures(t *testing.T, res embedResult, out string) arrowFile {
	t.Helper()
	af := readArrowFile(t, out)
	rows, ids, tokens := af.figures()
	read, embedded, failed := res.counts(t)
	if read != ids || embedded != ids || failed != 0 {
		t.Errorf("summary: rows read %d = %d embedded + %d in errors; the output holds %d documents", read, embedded, failed, ids)
	}
	if got := figure(t, res.stdout, "chunks"); got != rows {
		t.Errorf("summary: chunks %d; the output has %d rows", got, rows)
	}
	if got := figure(t, res.stdout, "tokens"); got != tokens {
		t.Errorf("summary: tokens %d; the output's n_tokens add up to %d", got, tokens)
	}
	return af
}

// TestEmbedInt8OnePass: int8 without --calibration embeds once: the
// summary says every chunk the calibration embedded (the first 30
// documents and the rest of their packing group) was written from its
// answers, none sent again, and its figures are the output's (the tokens
// once, not twice). That the output is the two-pass
// one byte for byte is TestCalibrateOnePass (pipeline/job), which can
// still run the two passes.
func TestEmbedInt8OnePass(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(80))
	one := filepath.Join(dir, "one.arrow")
	res := runSynapse(t, nil, "embed", "-m", tinyModel(t), "-o", one, "--workers", "2", "--threads", "1", "--batch-tokens", "300",
		in, "--dtype", "int8", "--calibration-docs", "30")
	res.wantCode(t, exitOK)
	got := checkFigures(t, res, one)
	rows, _, _ := got.figures()
	m := regexp.MustCompile(`not asked again \((\d+) of the (\d+) chunks it embedded written from them\)`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("summary: no calibration line saying the chunks written from its answers:\n%s", res.stdout)
	}
	served, kept := atoi(t, m[1]), atoi(t, m[2])
	if served != kept || kept < 30 || kept > rows {
		t.Errorf("summary: %d of the calibration's %d chunks written from its answers; want all, at least the first 30 documents' and at most the output's %d rows:\n%s", served, kept, rows, res.stdout)
	}

	if !strings.Contains(res.stdout, "of the first 30 documents of the input") {
		t.Errorf("summary: the ranges are not said to be of the first 30 documents:\n%s", res.stdout)
	}
	if got.meta[vector.MetaRanges] == "" || got.meta[vector.MetaDtype] != "int8" {
		t.Errorf("metadata: dtype %q, ranges %q; want int8 and ranges", got.meta[vector.MetaDtype], got.meta[vector.MetaRanges])
	}
}

// truncCorpus writes documents of which some are longer than 8 tokens,
// and returns the ids of those (from an untruncated run's chunks).
func truncCorpus(t *testing.T, dir string, n int) (in string, long map[string]bool) {
	t.Helper()
	in = filepath.Join(dir, "c.jsonl")
	var docs []map[string]any
	for i, d := range testCorpus(n) {
		text := strings.Join(strings.Fields(d["title"].(string))[:3], " ")
		if i%3 == 0 {
			text = fmt.Sprint(d["title"], " ", d["text"])
		}
		docs = append(docs, map[string]any{"_id": d["_id"], "text": text})
	}
	writeJSONL(t, in, docs)
	full := filepath.Join(dir, "full.arrow")
	runSynapse(t, nil, "embed", in, "-m", tinyModel(t), "-o", full, "--chunk-tokens", "8", "-q").wantCode(t, exitOK)
	byID, _ := readArrowFile(t, full).chunksByID()
	long = map[string]bool{}
	for id, c := range byID {
		if c > 1 {
			long[id] = true
		}
	}
	if len(long) == 0 || len(long) == len(byID) {
		t.Fatalf("%d of %d documents longer than 8 tokens; want some, not all", len(long), len(byID))
	}
	return in, long
}

// TestEmbedSummaryTruncate: --truncate with int8 calibrated on the input
// counts each document cut once (the calibration's tokenizing is not
// counted), as the untruncated output shows: the documents with more than
// one chunk.
func TestEmbedSummaryTruncate(t *testing.T) {
	dir := t.TempDir()
	in, long := truncCorpus(t, dir, 120)
	out := filepath.Join(dir, "t.arrow")
	res := runSynapse(t, nil, "embed", in, "-m", tinyModel(t), "-o", out, "--chunk-tokens", "8", "--truncate", "--dtype", "int8")
	res.wantCode(t, exitOK)
	checkFigures(t, res, out)
	if got := figure(t, res.stdout, "truncate"); got != len(long) {
		t.Errorf("summary: truncate %d; %d documents are longer than 8 tokens\n%s", got, len(long), res.stdout)
	}
}

// TestEmbedSummaryTruncateInterrupted: an interrupted --truncate run
// counts the documents cut among the rows it kept, not those it read; the
// resumed run counts the whole job's.
func TestEmbedSummaryTruncateInterrupted(t *testing.T) {
	dir := t.TempDir()
	in, long := truncCorpus(t, dir, 3000)
	out := filepath.Join(dir, "t.arrow")
	args := []string{"embed", in, "-m", tinyModel(t), "-o", out, "--chunk-tokens", "8", "--truncate", "--workers", "2", "--threads", "1", "--batch-tokens", "160"}
	cmd := synapseCmd(context.Background(), t, nil, append(args, "--chaos", "delay=4ms")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	waitCheckpoint(t, out, exited)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-exited
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("interrupted run: exit code %d; want %d\n%s", code, exitInterrupted, stderr.String())
	}
	cutThen := figure(t, stdout.String(), "truncate")
	if line := regexp.MustCompile(`(?m)^interrupted +.*$`).FindString(stdout.String()); !strings.HasPrefix(line, "interrupted    ") ||
		strings.Contains(line, "interrupted: ") || !strings.Contains(line, "rows kept") {
		t.Errorf("interrupted summary line %q; want `interrupted    N rows kept, …` (the word once)\n%s", line, stdout.String())
	}

	res := runSynapse(t, nil, append(args, "--resume")...)
	res.wantCode(t, exitOK)
	m := regexp.MustCompile(`its (\d+) output rows kept`).FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("the resumed summary does not say the rows kept:\n%s", res.stdout)
	}
	kept, _ := strconv.Atoi(m[1])
	_, order := readArrowFile(t, out).chunksByID() // one row a document, in input order
	want := 0
	for _, id := range order[:kept] {
		if long[id] {
			want++
		}
	}
	if cutThen != want {
		t.Errorf("interrupted summary: truncate %d; %d of the %d rows it kept are documents longer than 8 tokens\n%s", cutThen, want, kept, stdout.String())
	}
	checkFigures(t, res, out)
	if got := figure(t, res.stdout, "truncate"); got != len(long) {
		t.Errorf("resumed summary: truncate %d; the job cut %d documents\n%s", got, len(long), res.stdout)
	}
}

// TestEmbedSummaryLateChunking: a late-chunked run's summary gives its
// chunk size (--chunk-tokens, not the window) and its chunks (the output's
// rows) with the windows they were pooled from.
func TestEmbedSummaryLateChunking(t *testing.T) {
	const room, chunk = 22, 5
	dir := t.TempDir()
	model := lateModel(t)
	if _, err := onnxtest.WriteST(model, onnxtest.ST{Pooling: onnxtest.PoolingConfig(onnxtest.Tiny().Hidden, true, "mean"), MaxSeqLength: 24}); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "c.jsonl")
	docs := lateCorpus(t, in, 25)
	out := filepath.Join(dir, "late.arrow")
	env := []string{"SYNAPSE_ORT_LIB=" + testenv.ORTLib(t)}
	res := runSynapse(t, env, "embed", in, "-m", model, "-o", out, "--late-chunking", "--chunk-tokens", fmt.Sprint(chunk), "--workers", "1", "--threads", "1")
	res.wantCode(t, exitOK)
	windows := 0
	for _, toks := range docs {
		windows += max(1, (len(toks)+room-1)/room)
	}
	af := readArrowFile(t, out)
	rows, ids, tokens := af.figures()
	if read, ok, _ := res.counts(t); read != ids || ok != ids {
		t.Errorf("summary: rows read %d, %d embedded; the output holds %d documents", read, ok, ids)
	}
	if got := figure(t, res.stdout, "tokens"); got != tokens+2*windows {
		t.Errorf("summary: tokens %d; the output's n_tokens add up to %d, and each window has 2 special tokens", got, tokens)
	}
	want := fmt.Sprintf("chunks         %d, pooled from %d windows of up to %d tokens", rows, windows, room)
	if !bytes.Contains([]byte(res.stdout), []byte(want)) {
		t.Errorf("summary: want %q\n%s", want, res.stdout)
	}
	if want := fmt.Sprintf("chunk size     %d tokens per chunk (--chunk-tokens), pooled from windows of up to %d tokens", chunk, room); !bytes.Contains([]byte(res.stdout), []byte(want)) {
		t.Errorf("summary: want %q\n%s", want, res.stdout)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
