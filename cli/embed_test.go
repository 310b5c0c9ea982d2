package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/gguf"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// End-to-end tests of `synapse embed`: the real binary (testenv.Binary),
// real `synapse worker` processes running llama.cpp, real files. Crashes and
// hangs are real worker processes armed with SYNAPSE_CHAOS drills (README,
// "Chaos drills"). Models: the reference BERT fixture where vectors are
// compared with transformers (TestEmbedReference), else a one-layer,
// 32-wide BERT written by gguf/modelgen with a vocabulary of the generated
// corpus's words (testmodels), so that these tests run without fixtures.

// TestEmbedReference embeds the reference texts from JSONL and from Parquet
// and compares chunk 0 with the transformers vectors. The reference cuts at
// 512 tokens ([CLS] + 510 + [SEP]), so chunks are 510 tokens.
func TestEmbedReference(t *testing.T) {
	items := readReference(t)
	model := refModel(t)
	tok, err := tokenize.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	pre, suf := tok.Affixes()
	compared := 0
	for i, it := range items {
		var ids []int32
		for _, tk := range tok.Tokenize(it.Text, tokenize.Options{}).Tokens {
			ids = append(ids, tk.ID)
		}
		// ids_plain is cut at 512 ids for the text the reference truncated.
		if len(ids) > len(it.IDsPlain) && len(it.IDsPlain) >= 510 {
			ids = ids[:len(it.IDsPlain)]
		}
		if !slices.Equal(ids, it.IDsPlain) {
			t.Errorf("item %d %.30q: Go tokenizer ids %v; want ids_plain %v", i, it.Text, ids, it.IDsPlain)
			continue
		}
		want := append(append(slices.Clone(pre), ids[:min(len(ids), 510)]...), suf...)
		if !slices.Equal(want, it.IDs) {
			t.Errorf("item %d %.30q: chunk 0 ids %v; want reference ids %v", i, it.Text, want, it.IDs)
			continue
		}
		compared++
	}
	if compared != len(items) {
		t.Fatalf("compared %d of %d reference items", compared, len(items))
	}

	dir := t.TempDir()
	var docs []map[string]any
	var ids, texts []string
	for i, it := range items {
		id := fmt.Sprintf("ref-%02d", i)
		docs = append(docs, map[string]any{"id": id, "text": it.Text})
		ids, texts = append(ids, id), append(texts, it.Text)
	}
	writeJSONL(t, filepath.Join(dir, "ref.jsonl"), docs)
	writeParquet(t, filepath.Join(dir, "ref.parquet"), ids, texts)
	for _, in := range []string{"ref.jsonl", "ref.parquet"} {
		t.Run(in, func(t *testing.T) {
			out := filepath.Join(dir, in+".arrow")
			res := runSynapse(t, nil, "embed", filepath.Join(dir, in), "-m", model, "-o", out, "--chunk-tokens", "510", "-q")
			res.wantCode(t, exitOK)
			_, rows := readOutput(t, out)
			got := rowsByID(rows)
			for i, it := range items {
				chunks := got[ids[i]]
				if len(chunks) == 0 || chunks[0].Chunk != 0 {
					t.Errorf("%s: no chunk 0", ids[i])
					continue
				}
				if c := testenv.Cosine(chunks[0].Emb, it.Embedding); c < 0.9999 {
					t.Errorf("%s %.30q: cosine to the reference %.6f; want ≥ 0.9999", ids[i], it.Text, c)
				}
				if n := norm(chunks[0].Emb); math.Abs(n-1) > 1e-5 {
					t.Errorf("%s: norm %v; want 1", ids[i], n)
				}
			}
		})
	}
}

// TestEmbedWorkerCountBitExact embeds the same corpus with 1, 2 and 3
// workers of one thread: batches depend only on the input, so the vectors
// must be the same bit for bit.
func TestEmbedWorkerCountBitExact(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(40))
	var first []outRow
	for _, n := range []string{"1", "2", "3"} {
		out := filepath.Join(dir, "w"+n+".arrow")
		res := runSynapse(t, nil, "embed", in, "-m", tinyModel(t), "-o", out, "--text-field", "title", "--text-field", "text",
			"--chunk-tokens", "96", "--overlap", "16", "--batch-tokens", "400", "--workers", n, "--threads", "1", "-q")
		res.wantCode(t, exitOK)
		_, rows := readOutput(t, out)
		if first == nil {
			first = rows
			if len(rows) <= 40 {
				t.Fatalf("%d rows for 40 documents; want several chunks for some", len(rows))
			}
			continue
		}
		sameRows(t, n+" workers vs 1", rows, first)
	}
}

// TestEmbedPoisonDocument arms every worker with a drill that kills it (or
// hangs it) on a token found in one document only: that document lands in
// the errors file and every other one is embedded.
func TestEmbedPoisonDocument(t *testing.T) {
	docs, model, poison, bad := poisonedCorpus(t)
	badID := fmt.Sprint(docs[bad]["_id"])
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, docs)
	for _, tc := range []struct {
		drill, reason string
		args          []string
	}{
		{"abort-on-token", "engine_crashed", []string{"--batch-tokens", "1024"}}, // bisection finds it
		// One chunk per batch: the poisoned one hangs twice (the retry), each
		// time until the deadline, which must leave healthy batches time
		// enough on a loaded machine (else they too time out and the model is
		// quarantined).
		{"hang-on-token", "engine_timeout", []string{"--deadline", "3s", "--deadline-per-token", "0", "--deadline-stretch", "2", "--batch-tokens", "512"}},
	} {
		t.Run(tc.drill, func(t *testing.T) {
			out := filepath.Join(dir, tc.drill+".arrow")
			args := append([]string{"embed", in, "-m", model, "-o", out, "--workers", "2", "--threads", "1"}, tc.args...)
			res := runSynapse(t, nil, append(args, "--chaos", fmt.Sprintf("%s=%d", tc.drill, poison))...)
			res.wantCode(t, exitPartial)
			read, embedded, failed := res.counts(t)
			if read != len(docs) || embedded != len(docs)-1 || failed != 1 {
				t.Errorf("summary: %d read, %d embedded, %d failed; want %d, %d, 1", read, embedded, failed, len(docs), len(docs)-1)
			}
			errs := readErrors(t, out+".errors.jsonl")
			if len(errs) != 1 {
				t.Fatalf("errors file has %d lines; want 1: %+v", len(errs), errs)
			}
			e := errs[0]
			if e.ID != badID || e.Reason != tc.reason || e.Chunk == nil || e.Index != int64(bad) {
				t.Errorf("error %+v; want id %s, reason %s, index %d, a chunk", e, badID, tc.reason, bad)
			}
			if !strings.Contains(e.WorkerLog, tc.drill) {
				t.Errorf("worker_log %q; want the worker's log naming the drill %s", e.WorkerLog, tc.drill)
			}
			_, rows := readOutput(t, out)
			got := rowsByID(rows)
			for i, d := range docs {
				id := fmt.Sprint(d["_id"])
				if (len(got[id]) > 0) == (i == bad) {
					t.Errorf("document %s: %d rows in the output (poisoned: %v)", id, len(got[id]), i == bad)
				}
			}
		})
	}
}

// resumeCorpus writes n short titles as JSONL, with one malformed line,
// 350, before the first checkpoint: the resumed run must count it and exit 3
// although it meets no error itself, and the errors file is resumed. Many
// texts repeat (--dedup is on by default): an earlier title of the same
// packing group, or one 300 records back, in another group.
func resumeCorpus(t *testing.T, path string, n int) {
	t.Helper()
	var b bytes.Buffer
	docs := testCorpus(n)
	for i, d := range docs {
		if i == 350 {
			b.WriteString("{\"_id\": \"broken\n")
			continue
		}
		line, _ := json.Marshal(map[string]any{"_id": d["_id"], "text": dupTitle(docs, i)})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dupTitle is the title of docs[i], or for some i that of an earlier
// document: a few records back or 300 back.
func dupTitle(docs []map[string]any, i int) any {
	switch {
	case i%7 == 3 && i >= 3:
		return docs[i-3]["title"]
	case i%11 == 5 && i >= 300:
		return docs[i-300]["title"]
	}
	return docs[i]["title"]
}

// TestEmbedInterruptResume stops a slow run by SIGKILL and by SIGINT once it
// has checkpointed; --resume must then give the files of an uninterrupted run.
func TestEmbedInterruptResume(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "titles.jsonl")
	resumeCorpus(t, in, 3000)
	args := func(out string) []string {
		return []string{"embed", in, "-m", tinyModel(t), "-o", out, "--batch-tokens", "160", "--workers", "2", "--threads", "1", "-q"}
	}
	clean := filepath.Join(dir, "clean.arrow")
	res := runSynapse(t, nil, slices.DeleteFunc(args(clean), func(a string) bool { return a == "-q" })...)
	res.wantCode(t, exitPartial)
	cleanRead, cleanOK, cleanFailed := res.counts(t)
	_, want := readOutput(t, clean)
	wantErrs, err := os.ReadFile(clean + ".errors.jsonl")
	if err != nil || len(want) < 2900 {
		t.Fatalf("clean run: %d rows, errors file %v", len(want), err)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		code int // exit code of the interrupted run; -1: killed
	}{{syscall.SIGKILL, -1}, {syscall.SIGINT, exitInterrupted}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("sig%d.arrow", tc.sig))
			cmd := synapseCmd(context.Background(), t, nil, append(args(out), "--chaos", "delay=4ms")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(exited) }()
			waitCheckpoint(t, out, exited)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			<-exited
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Fatalf("interrupted run: exit code %d (%v); want %d\nstderr:\n%s", code, waitErr, tc.code, stderr.String())
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatal("the interrupted run published its output")
			}
			for _, p := range []string{output.PartialPath(out), output.CheckpointPath(out)} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("resume file: %v", err)
				}
			}
			resume := append(args(out), "--resume")
			if tc.sig == syscall.SIGINT {
				refusedResumes(t, in, resume)
				resume = append(resume, "--buffer-mb", "0") // 0 is the default: the same value in effect
			}
			res := runSynapse(t, nil, slices.DeleteFunc(resume, func(a string) bool { return a == "-q" })...)
			res.wantCode(t, exitPartial)
			if r, ok, f := res.counts(t); r != cleanRead || ok != cleanOK || f != cleanFailed {
				t.Errorf("resumed summary: %d read = %d embedded + %d in errors; want the whole job's %d = %d + %d",
					r, ok, f, cleanRead, cleanOK, cleanFailed)
			}
			if !strings.Contains(res.stdout, "in this run, the rest by the interrupted run") {
				t.Errorf("the resumed summary does not say what the interrupted run did:\n%s", res.stdout)
			}
			_, got := readOutput(t, out)
			sameRows(t, "resumed vs clean", got, want)
			gotErrs, err := os.ReadFile(out + ".errors.jsonl")
			if err != nil || !bytes.Equal(gotErrs, wantErrs) {
				t.Errorf("resumed errors file (%v):\n%s\nwant:\n%s", err, gotErrs, wantErrs)
			}
		})
	}
}

// TestEmbedSlowEngine runs workers that take 1.2 s per request against a
// 1 s deadline. The first request times out; later ones get twice the
// deadline (--deadline-stretch), so the run finishes with every row, the
// same vectors as a run on a fast engine, and a warning. With the stretch
// off the model is quarantined and the error says which flags to raise.
func TestEmbedSlowEngine(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(6))
	base := []string{"embed", in, "-m", tinyModel(t), "--workers", "1", "--threads", "1", "--batch-tokens", "1024"}
	clean := filepath.Join(dir, "clean.arrow")
	runSynapse(t, nil, append(base, "-o", clean, "-q")...).wantCode(t, 0)
	_, want := readOutput(t, clean)

	tight := []string{"--deadline", "1s", "--deadline-per-token", "0", "--chaos", "delay=1200ms"} // past 1 s, well within 2 s
	out := filepath.Join(dir, "slow.arrow")
	res := runSynapse(t, nil, append(append(base, "-o", out), tight...)...)
	res.wantCode(t, 0)
	if !strings.Contains(res.stderr, "ran past its deadline") || !strings.Contains(res.stderr, "deadline_factor=2") {
		t.Errorf("no warning that deadlines were stretched:\n%s", res.stderr)
	}
	if !regexp.MustCompile(`deadlines +stretched up to [248]×`).MatchString(res.stdout) {
		t.Errorf("the summary does not say the deadlines were stretched:\n%s", res.stdout)
	}
	_, got := readOutput(t, out)
	// Not bit for bit: on a loaded machine a retry may time out too and the
	// batch be split, which changes llama.cpp's rounding in the last bits.
	if len(got) != len(want) {
		t.Fatalf("slow engine: %d rows; want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Chunk != want[i].Chunk {
			t.Fatalf("slow engine: row %d is %s/%d; want %s/%d", i, got[i].ID, got[i].Chunk, want[i].ID, want[i].Chunk)
		}
		if c := testenv.Cosine(got[i].Emb, want[i].Emb); c < 0.9999 {
			t.Errorf("slow engine: row %d: cosine %.6f to the fast run's vector; want ≥ 0.9999", i, c)
		}
	}

	res = runSynapse(t, nil, append(append(base, "-o", filepath.Join(dir, "never.arrow"), "--deadline-stretch", "1"), tight...)...)
	res.wantCode(t, 1)
	if !strings.Contains(res.stderr, "quarantined") || !strings.Contains(res.stderr, "raise --deadline") {
		t.Errorf("stretch 1: want a quarantine that says to raise the deadline:\n%s", res.stderr)
	}
}

// TestEmbedStdinInterrupt: Ctrl-C stops a run reading standard input from
// a producer that keeps the pipe open without writing, promptly, with exit
// code 130.
func TestEmbedStdinInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stdin.arrow")
	cmd := synapseCmd(context.Background(), t, nil, "embed", "-", "-m", tinyModel(t), "-o", out)
	// Our own pipe, whose read end the test keeps: it tells how much of the
	// input synapse has not read yet.
	pr, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer stdin.Close()
	cmd.Stdin = pr
	fmt.Fprintln(stdin, `{"id":"a","text":"hello world"}`) // the pipe holds it until synapse reads
	e := startEmbedding(t, cmd)
	waitRead(t, pr) // synapse has read the line: it now waits on the silent pipe
	e.interrupt(t, syscall.SIGINT, 20*time.Second, "with stdin open and idle")
}

// waitRead waits until every byte written to the pipe whose read end is r
// has been read (by the process it was handed to), or fails after a minute.
func waitRead(t *testing.T, r *os.File) {
	t.Helper()
	deadline := time.After(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		unread, err := unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ) // FIONREAD
		if err != nil {
			t.Fatalf("FIONREAD on the input pipe: %v", err)
		}
		if unread == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%d bytes of the input still unread after a minute", unread)
		case <-tick.C:
		}
	}
}

// refusedResumes checks that a --resume with another option, or over an
// input rewritten since the interrupted run, is refused with exit code 2
// naming the difference, and leaves the resume files usable.
func refusedResumes(t *testing.T, in string, resume []string) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch-tokens", "200"}, "--batch-tokens was 160 in the interrupted run and is 200 now"},
		{[]string{"--truncate"}, "--truncate was not set in the interrupted run and is now"},
		{[]string{"--dtype", "binary"}, "--dtype was float32 in the interrupted run and is binary now"},
		{[]string{"--dtype", "float16", "--no-normalize"}, "--dtype was float32 in the interrupted run and is float16 now; --no-normalize was not set in the interrupted run and is now"},
	} {
		res := runSynapse(t, nil, append(slices.Clone(resume), tc.args...)...)
		res.wantCode(t, exitUsage)
		if !strings.Contains(res.stderr, tc.want) || strings.Contains(res.stderr, `{"model_digest"`) {
			t.Errorf("resume with %s: stderr does not name the difference as %q (or shows the settings record):\n%s", tc.args, tc.want, res.stderr)
		}
	}
	st, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	later := st.ModTime().Add(time.Second)
	if err := os.Chtimes(in, later, later); err != nil {
		t.Fatal(err)
	}
	res := runSynapse(t, nil, resume...)
	if err := os.Chtimes(in, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "input 1 "+in+" was") || !strings.Contains(res.stderr, "modified") {
		t.Errorf("resume over a rewritten input: stderr does not name it:\n%s", res.stderr)
	}
}

// bigText is about n bytes of generated texts, one after another.
func bigText(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	docs := testCorpus(300)
	for i := 0; b.Len() < n; i++ {
		b.WriteString(docs[i%len(docs)]["text"].(string))
		b.WriteString("\n")
	}
	return b.String()[:n]
}

// TestEmbedBadInputs runs inputs with every kind of bad record: each gets its
// documented reason in the errors file, every good one is embedded, and the
// summary adds up.
func TestEmbedBadInputs(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t)
	jsonl := filepath.Join(dir, "bad.jsonl")
	lines := []string{
		`{"id":"ok1","text":"hello world"}`,
		`{"id":"cut","text":"no end`,
		`{"id":"nofield","title":"x"}`,
		`{"id":"null","text":null}`,
		"{\"id\":\"utf8\",\"text\":\"abc\xff\xfe def\"}",
		`{"id":"empty","text":""}`,
		`{"id":"spaces","text":"  \n\t "}`,
		`{"id":"num","text":42}`,
		`   `, // blank: not a record
		`[1,2,3]`,
		`{"id":"ok2","text":"goodbye"}`,
	}
	if err := os.WriteFile(jsonl, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reasons := func(errs []errLine) map[string]string {
		m := map[string]string{}
		for _, e := range errs {
			m[fmt.Sprintf("%s:%d", filepath.Base(e.Source), *e.Line)] = e.Reason
		}
		return m
	}
	base := map[string]string{"bad.jsonl:2": "malformed_json", "bad.jsonl:3": "missing_field", "bad.jsonl:4": "null_text",
		"bad.jsonl:5": "invalid_utf8", "bad.jsonl:8": "not_text", "bad.jsonl:10": "malformed_json"}
	withSkip := map[string]string{"bad.jsonl:6": "empty_text", "bad.jsonl:7": "empty_text"}
	for k, v := range base {
		withSkip[k] = v
	}
	for _, tc := range []struct {
		name      string
		args      []string
		want      map[string]string
		embedded  []string
		wantCount [3]int
	}{
		{"plain", nil, base, []string{"ok1", "empty", "spaces", "ok2"}, [3]int{10, 4, 6}},
		{"skip-empty", []string{"--skip-empty"}, withSkip, []string{"ok1", "ok2"}, [3]int{10, 2, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".arrow")
			res := runSynapse(t, nil, append([]string{"embed", jsonl, "-m", model, "-o", out}, tc.args...)...)
			res.wantCode(t, exitPartial)
			r, e, f := res.counts(t)
			if [3]int{r, e, f} != tc.wantCount {
				t.Errorf("summary read/embedded/failed %v; want %v", [3]int{r, e, f}, tc.wantCount)
			}
			if got := reasons(readErrors(t, out+".errors.jsonl")); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("errors %v; want %v", got, tc.want)
			}
			_, rows := readOutput(t, out)
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tc.embedded) {
				t.Errorf("embedded %v; want %v", ids, tc.embedded)
			}
		})
	}

	t.Run("parquet", func(t *testing.T) {
		intText := filepath.Join(dir, "int.parquet")
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "text", Type: arrow.PrimitiveTypes.Int64}}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		b.Field(0).(*array.StringBuilder).AppendValues([]string{"i0", "i1", "i2"}, nil)
		b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		writeRecord(t, intText, b.NewRecordBatch())
		b.Release()
		good := filepath.Join(dir, "good.parquet")
		writeParquet(t, good, []string{"g0", "g1"}, []string{"first document", "second document"})
		data, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		truncated := filepath.Join(dir, "truncated.parquet")
		if err := os.WriteFile(truncated, data[:len(data)*2/3], 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "pq.arrow")
		res := runSynapse(t, nil, "embed", intText, truncated, good, "-m", model, "-o", out)
		res.wantCode(t, exitPartial)
		if r, e, f := res.counts(t); r != 5 || e != 2 || f != 3 {
			t.Errorf("summary read/embedded/failed %d/%d/%d; want 5/2/3", r, e, f)
		}
		if !strings.Contains(res.stdout, "files failed   1") {
			t.Errorf("summary does not count the truncated file:\n%s", res.stdout)
		}
		var got []string
		for _, e := range readErrors(t, out+".errors.jsonl") {
			got = append(got, filepath.Base(e.Source)+" "+e.Reason)
		}
		want := []string{"int.parquet not_text", "int.parquet not_text", "int.parquet not_text", "truncated.parquet file_error"}
		if !slices.Equal(got, want) {
			t.Errorf("errors %v; want %v", got, want)
		}
	})

	t.Run("5MB document", func(t *testing.T) {
		text := bigText(t, 5<<20)
		in := filepath.Join(dir, "big.jsonl")
		writeJSONL(t, in, []map[string]any{{"id": "small", "text": "a short one"}, {"id": "big", "text": text}})
		out := filepath.Join(dir, "big.arrow")
		res := runSynapse(t, nil, "embed", in, "-m", model, "-o", out, "--chunk-tokens", "510", "-q")
		res.wantCode(t, exitOK)
		_, rows := readOutput(t, out)
		chunks := rowsByID(rows)["big"]
		if len(chunks) < 1000 {
			t.Fatalf("%d chunks of a 5 MB document; want over 1000", len(chunks))
		}
		checkCoverage(t, text, chunks)
	})
}

// checkCoverage checks that a document's chunks (no overlap) follow each
// other in tokens and bytes and cover the text but for whitespace.
func checkCoverage(t *testing.T, text string, chunks []outRow) {
	t.Helper()
	prevTok, prevChar := int32(0), int32(0)
	for i, c := range chunks {
		if c.Chunk != int32(i) || c.TokenStart != prevTok || c.NTokens != c.TokenEnd-c.TokenStart+2 {
			t.Fatalf("chunk %d: %+v; want chunk %d from token %d with n_tokens = span + 2", i, c, i, prevTok)
		}
		if gap := text[prevChar:c.ByteStart]; c.ByteStart < prevChar || strings.TrimSpace(gap) != "" {
			t.Fatalf("chunk %d: byte_start %d after %d leaves %q uncovered", i, c.ByteStart, prevChar, gap)
		}
		prevTok, prevChar = c.TokenEnd, c.ByteEnd
	}
	if rest := text[prevChar:]; strings.TrimSpace(rest) != "" {
		t.Errorf("the text after the last chunk (%d bytes) is not covered", len(rest))
	}
}

// TestEmbedOutputs checks the output schema and metadata, --dims, Parquet
// output and --shard.
func TestEmbedOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(30))
	model := tinyModel(t)
	common := []string{"-m", model, "--text-field", "title", "--text-field", "text", "--chunk-tokens", "200", "--workers", "2", "--threads", "1", "-q"}
	run := func(t *testing.T, out string, args ...string) {
		t.Helper()
		runSynapse(t, nil, append(append([]string{"embed", in, "-o", out}, common...), args...)...).wantCode(t, exitOK)
	}
	embed := func(t *testing.T, out string, args ...string) []outRow {
		t.Helper()
		run(t, out, args...)
		_, rows := readOutput(t, out)
		return rows
	}
	full := filepath.Join(dir, "full.arrow")
	want := embed(t, full)
	sc, _ := readOutput(t, full)

	t.Run("schema", func(t *testing.T) {
		var got []string
		for _, f := range sc.Fields() {
			got = append(got, f.Name+" "+f.Type.String())
		}
		wantFields := []string{"id utf8", "chunk int32", "chunk_id utf8", "token_start int32", "token_end int32", "byte_start int32",
			"byte_end int32", "codepoint_start int32", "codepoint_end int32", "n_tokens int32", "embedding fixed_size_list<item: float32>[32]", "doc_hash fixed_size_binary[32]"}
		if !slices.Equal(got, wantFields) {
			t.Errorf("schema %v; want %v", got, wantFields)
		}
		meta := map[string]string{}
		for i, k := range sc.Metadata().Keys() {
			meta[k] = sc.Metadata().Values()[i]
		}
		digest, err := pipelineDigest(model)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"synapse.model": "tiny.gguf", "synapse.model_digest": digest,
			"synapse.dims": "32", "synapse.chunk_tokens": "200", "synapse.chunk_overlap": "0", "synapse.normalize": "true",
			"synapse.pooling": "mean", "synapse.text_fields": `["title","text"]`, "synapse.version": version,
			"synapse.skip_empty": "false", "synapse.shard": "0/1"} {
			if meta[k] != v {
				t.Errorf("metadata %s = %q; want %q", k, meta[k], v)
			}
		}
		if _, ok := meta["synapse.prefix"]; !ok {
			t.Error("metadata has no synapse.prefix")
		}
		settings := fmt.Sprintf(`{"model_digest":%q,"text_fields":["title","text"],"prefix":"","chunk_tokens":200,"chunk_overlap":0,"pooling":"mean","normalize":true,"dims":32}`, digest)
		if meta["synapse.settings"] != settings {
			t.Errorf("metadata synapse.settings = %s; want %s", meta["synapse.settings"], settings)
		}
		sum := sha256.Sum256([]byte(settings))
		if d := "sha256:" + hex.EncodeToString(sum[:]); meta["synapse.settings_digest"] != d {
			t.Errorf("metadata synapse.settings_digest = %s; want %s", meta["synapse.settings_digest"], d)
		}
		// doc_hash: the SHA-256 of the joined text ("title\ntext"), the same on every chunk
		docs := map[string]map[string]any{}
		for _, d := range testCorpus(30) {
			docs[d["_id"].(string)] = d
		}
		for _, r := range want {
			d := docs[r.ID]
			if h := sha256.Sum256([]byte(d["title"].(string) + "\n" + d["text"].(string))); r.Hash != h {
				t.Fatalf("%s chunk %d: doc_hash %x; want %x", r.ID, r.Chunk, r.Hash, h)
			}
		}
	})

	t.Run("dims", func(t *testing.T) {
		got := embed(t, filepath.Join(dir, "d16.arrow"), "--dims", "16")
		if len(got) != len(want) {
			t.Fatalf("%d rows; want %d", len(got), len(want))
		}
		for i := range got {
			w := want[i].Emb[:16]
			n := norm(w)
			for k, x := range got[i].Emb {
				if len(got[i].Emb) != 16 || math.Abs(float64(x)-float64(w[k])/n) > 1e-6 {
					t.Fatalf("row %d: %v; want the first 16 of the full vector re-normalized", i, got[i].Emb)
				}
			}
		}
	})

	t.Run("parquet", func(t *testing.T) {
		sameRows(t, "parquet vs arrow", embed(t, filepath.Join(dir, "full.parquet")), want)
	})

	t.Run("shards", func(t *testing.T) {
		var got []outRow
		for i := range 2 {
			// the output name gets .shard-I-of-2
			run(t, filepath.Join(dir, "s.arrow"), "--shard", fmt.Sprintf("%d/2", i))
			_, rows := readOutput(t, filepath.Join(dir, fmt.Sprintf("s.shard-%d-of-2.arrow", i)))
			got = append(got, rows...)
		}
		key := func(r outRow) string { return fmt.Sprintf("%s/%03d", r.ID, r.Chunk) }
		byKey := func(rows []outRow) []outRow {
			rows = slices.Clone(rows)
			slices.SortFunc(rows, func(a, b outRow) int { return strings.Compare(key(a), key(b)) })
			return rows
		}
		got, w := byKey(got), byKey(want)
		if len(got) != len(w) {
			t.Fatalf("shards hold %d rows; want %d", len(got), len(w))
		}
		for i := range got {
			if key(got[i]) != key(w[i]) || testenv.Cosine(got[i].Emb, w[i].Emb) < 0.99999 {
				t.Fatalf("row %s: cosine %v to %s of the whole run", key(got[i]), testenv.Cosine(got[i].Emb, w[i].Emb), key(w[i]))
			}
		}
	})
}

// pipelineDigest is the model digest the output metadata must carry.
func pipelineDigest(path string) (string, error) { _, d, err := gguf.Digest(path); return d, err }

// TestEmbedUsageErrors: mistakes in the command line exit 2, before or after
// the model is read.
func TestEmbedUsageErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, []map[string]any{{"text": "hello"}})
	model := tinyModel(t)
	t.Setenv("SYNAPSE_LLAMA_LIB", testenv.LlamaLib(t))
	tests := []struct {
		name string
		args []string
	}{
		{"no input", []string{"-m", model}},
		{"no model", []string{in}},
		{"unknown flag", []string{in, "-m", model, "--bogus"}},
		{"bad pooling", []string{in, "-m", model, "--pooling", "max"}},
		{"negative workers", []string{in, "-m", model, "--workers", "-1"}},
		{"zero deadline", []string{in, "-m", model, "--deadline", "0s"}},
		{"negative per-token", []string{in, "-m", model, "--deadline-per-token", "-1s"}},
		{"zero stretch", []string{in, "-m", model, "--deadline-stretch", "0"}},
		{"negative buffer", []string{in, "-m", model, "--buffer-mb", "-1"}},
		{"huge buffer", []string{in, "-m", model, "--buffer-mb", "1048577"}},
		{"bad shard", []string{in, "-m", model, "--shard", "2/2"}},
		{"shard syntax", []string{in, "-m", model, "--shard", "one"}},
		{"chunk too long", []string{in, "-m", model, "-o", filepath.Join(dir, "a.arrow"), "--chunk-tokens", "511"}},
		{"overlap too big", []string{in, "-m", model, "-o", filepath.Join(dir, "b.arrow"), "--chunk-tokens", "10", "--overlap", "10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), append([]string{"synapse", "embed"}, tt.args...), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code %d; want %d\nstderr: %s", code, exitUsage, stderr.String())
			}
		})
	}
	// Dims are known once a worker has loaded the model: the real binary.
	t.Run("dims too big", func(t *testing.T) {
		runSynapse(t, nil, "embed", in, "-m", model, "-o", filepath.Join(dir, "c.arrow"), "--dims", "33").wantCode(t, exitUsage)
	})
}

// BenchmarkEmbedPeakRSS measures the peak RSS of the synapse process itself
// (not its workers: VmHWM from /proc/PID/status, read until it exits) on
// synthetic Parquet corpora (corpus.WriteSyntheticParquet) of the sizes in
// SYNAPSE_RSS_ROWS (default 20000), embedding the title column with the tiny
// model, and reports it as peak-MiB:
//
//	SYNAPSE_RSS_ROWS=100000,1000000 go test -run '^$' -bench EmbedPeakRSS -benchtime 1x -timeout 2h .
//
// SYNAPSE_RSS_FIELD=text embeds the long column instead (much slower).
func BenchmarkEmbedPeakRSS(b *testing.B) {
	field := cmp.Or(os.Getenv("SYNAPSE_RSS_FIELD"), "title")
	dir := b.TempDir()
	for _, s := range strings.Split(cmp.Or(os.Getenv("SYNAPSE_RSS_ROWS"), "20000"), ",") {
		rows, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("SYNAPSE_RSS_ROWS: %v", err)
		}
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			in := filepath.Join(dir, fmt.Sprintf("synth-%d.parquet", rows))
			if err := corpus.WriteSyntheticParquet(in, rows, 1); err != nil {
				b.Fatal(err)
			}
			defer os.Remove(in)
			model := tinyModel(b)
			testenv.Binary(b) // built before the clock starts
			var peak, maxrss int64
			for b.Loop() {
				hwm, rss := peakRSS(b, in, filepath.Join(dir, "synth.arrow"), model, field)
				peak, maxrss = max(peak, hwm), max(maxrss, rss)
			}
			b.ReportMetric(float64(peak>>10), "peak-MiB")
			b.ReportMetric(float64(maxrss>>10), "peak-with-workers-MiB")
		})
	}
}

// peakRSS runs one embedding and returns the peak RSS (KiB) of synapse
// alone and with its workers.
func peakRSS(b *testing.B, in, out, model, field string) (hwm, maxrss int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	defer os.Remove(out)
	cmd := synapseCmd(ctx, b, nil, "embed", in, "-m", model, "-o", out, "--text-field", field, "-q")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	peak := make(chan int64)
	go func() { peak <- watchHWM(cmd.Process.Pid) }()
	err := cmd.Wait()
	hwm = <-peak
	if err != nil {
		b.Fatalf("synapse embed %s: %v", in, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		maxrss = ru.Maxrss
	}
	return hwm, maxrss
}

// watchHWM reads VmHWM (KiB) of pid every 20ms until the process is gone and
// returns the last value read.
func watchHWM(pid int) int64 {
	var last int64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return last
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if n == 0 { // a zombie: the process has exited
					return last
				}
				last = n
			}
		}
	}
	return last
}

// TestEmbedTruncate: --truncate gives every document one row, the first
// chunk of the windowed run bit for bit, and the summary counts the
// documents it cut; --overlap with it is refused before any work.
func TestEmbedTruncate(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, testCorpus(30))
	common := []string{"-m", tinyModel(t), "--text-field", "title", "--text-field", "text", "--chunk-tokens", "48", "--workers", "1", "--threads", "1"}
	windows := filepath.Join(dir, "windows.arrow")
	runSynapse(t, nil, append([]string{"embed", in, "-o", windows, "-q"}, common...)...).wantCode(t, exitOK)
	trunc := filepath.Join(dir, "trunc.arrow")
	res := runSynapse(t, nil, append([]string{"embed", in, "-o", trunc, "--truncate"}, common...)...)
	res.wantCode(t, exitOK)
	_, all := readOutput(t, windows)
	_, got := readOutput(t, trunc)
	var firsts []outRow
	long := 0
	for i, r := range all {
		if r.Chunk == 0 {
			firsts = append(firsts, r)
		} else if all[i-1].Chunk == 0 {
			long++
		}
	}
	if long == 0 {
		t.Fatal("no document of the corpus is longer than one chunk; make chunks smaller")
	}
	sameRows(t, "--truncate vs the windowed run's first chunks", got, firsts)
	if want := fmt.Sprintf("%d documents written longer than 48 tokens", long); !strings.Contains(res.stdout, want) {
		t.Errorf("summary:\n%s\nwant it to say %q", res.stdout, want)
	}
	res = runSynapse(t, nil, append([]string{"embed", in, "-o", filepath.Join(dir, "o.arrow"), "--truncate", "--overlap", "8"}, common...)...)
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "--overlap with --truncate") {
		t.Errorf("stderr %q; want it to refuse --overlap with --truncate", res.stderr)
	}
}
