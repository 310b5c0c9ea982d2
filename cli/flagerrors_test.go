package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad flag costs nothing: every command refuses a mistake in its flags
// (a bad value, flags that conflict, an output it cannot write, a missing
// input) with exit 2 before any worker starts, any port is bound or any
// cache entry is written. What each run leaves is observed:
//
//   - workers: the pool makes $XDG_RUNTIME_DIR/synapse/workers for its
//     sockets before it spawns a worker, so XDG_RUNTIME_DIR, an empty
//     directory of the test's, must stay empty (TestFlagErrorsProbe shows
//     that a run that does start workers leaves it non-empty);
//   - the cache: SYNAPSE_MODELS and --models-dir, an empty directory, stay
//     empty although most cases ask for --quantize, which adds -m to the
//     cache and quantizes it;
//   - the port: --status-addr names a port this test holds, so a command
//     that bound it before checking its flags would fail with "address
//     already in use" instead of the flag's own message.

// flagCase is one command line that must be refused, and what the refusal
// must say.
type flagCase struct {
	name string
	args []string
	says string
}

// flagCases are the sample per command; files is the test's directory
// with in.jsonl and c.arrow (not an Arrow file) in it, model a GGUF, status
// a --status-addr.
func flagCases(files, model, status string) []flagCase {
	in := filepath.Join(files, "in.jsonl")
	missing := filepath.Join(files, "missing.jsonl")
	out := func(name string) string { return filepath.Join(files, name) }
	embed := func(args ...string) []string {
		return append([]string{"embed", in, "-m", model, "--quantize", "q8_0", "--status-addr", status}, args...)
	}
	rerank := func(args ...string) []string {
		return append([]string{"rerank", "-m", model, "--quantize", "q8_0", "--status-addr", status}, args...)
	}
	generate := func(args ...string) []string {
		return append([]string{"generate", in, "-m", model, "--quantize", "q8_0", "--status-addr", status}, args...)
	}
	search := func(args ...string) []string { return append([]string{"search"}, args...) }
	add := func(args ...string) []string {
		return append([]string{"models", "add", "--models-dir", filepath.Join(files, "models")}, args...)
	}
	return []flagCase{
		{"embed bad pooling", embed("--pooling", "max"), "--pooling"},
		{"embed negative dims", embed("--dims", "-1"), "--dims"},
		{"embed bad quantize type", embed("--quantize", "q9_9"), "--quantize"},
		{"embed deleted without previous", embed("--deleted", out("gone.txt")), "--deleted needs --previous"},
		{"embed previous missing", embed("--previous", out("old.arrow")), "--previous"},
		{"embed unknown output extension", embed("-o", out("v.csv")), "v.csv"},
		{"embed gs:// output", embed("-o", "gs://bucket/v.arrow"), "s3:// only"},
		{"embed table given twice", embed("-o", "postgresql://app@127.0.0.1:1/rag?table=a&table=b"), "the parameter table is given 2 times"},
		{"embed unknown URL parameter", embed("-o", "postgresql://app@127.0.0.1:1/rag?tabel=a"), `unknown parameter "tabel"`},
		{"embed reserved table", embed("-o", "postgresql://app@127.0.0.1:1/rag?table=docs_synapse_staging"), "is reserved"},
		{"embed azblob:// input", []string{"embed", "azblob://c/in.jsonl", "-m", model, "--status-addr", status}, "s3:// only"},
		{"embed shard of stdin", []string{"embed", "-", "-m", model, "--shard", "0/2", "--status-addr", status}, "--shard"},
		{"embed missing input", []string{"embed", missing, "-m", model, "--quantize", "q8_0", "--status-addr", status}, "missing.jsonl"},
		{"embed no model", []string{"embed", in, "--status-addr", status}, "no model"},
		{"embed linger without status", []string{"embed", in, "-m", model, "--status-linger", "1m"}, "--status-linger needs --status-addr"},
		{"rerank run without queries", rerank("--run", in), "--run needs --queries and --corpus"},
		{"rerank inputs and run", rerank(in, "--run", in, "--queries", in, "--corpus", in), "not both"},
		{"rerank negative top-n", rerank(in, "--top-n", "-1"), "--top-n"},
		{"rerank unknown output extension", rerank(in, "-o", out("r.csv")), "r.csv"},
		{"rerank qrels missing", rerank(in, "--qrels", out("qrels.tsv")), "qrels.tsv"},
		{"rerank missing input", rerank(missing), "missing.jsonl"},
		{"generate max-tokens 0", generate("--max-tokens", "0", "-o", out("g.jsonl")), "--max-tokens"},
		{"generate seed without temperature", generate("--seed", "1"), "--seed goes with --temperature"},
		{"generate two constraints", generate("--choices", "a,b", "--grammar", in), "one of --grammar"},
		{"generate bad template", generate("--template", "xml"), "--template"},
		{"generate unknown output extension", generate("-o", out("g.txt")), "g.txt"},
		{"generate missing input", []string{"generate", missing, "-m", model, "--quantize", "q8_0", "--status-addr", status}, "missing.jsonl"},
		{"models add bad quantize type", add(model, "--quantize", "q9_9"), "--quantize"},
		{"models add sample without quantize", add(model, "--sample", in), "give --quantize"},
		{"models add bad min-cosine", add(model, "--quantize", "q8_0", "--min-cosine", "2"), "--min-cosine"},
		{"models add two files", add(model, in), "want one FILE.gguf"},
		{"models add missing file", add(missing), "missing.jsonl"},
		{"inspect missing file", []string{"inspect", missing}, "missing.jsonl"},
		{"embed bad dtype", embed("--dtype", "int4"), "--dtype"},
		{"embed calibration with float16", embed("--dtype", "float16", "--calibration", in), "only int8 and uint8 have ranges"},
		{"embed calibration not an output", embed("--dtype", "int8", "--calibration", in), "not an Arrow IPC or Parquet embedding output"},
		{"embed calibration missing", embed("--dtype", "int8", "--calibration", out("old.arrow")), "old.arrow"},
		{"embed calibration is the output", embed("--dtype", "int8", "--calibration", out("c.arrow"), "-o", out("c.arrow")), "is also -o"},
		{"embed calibration docs negative", embed("--dtype", "uint8", "--calibration-docs", "-1"), "--calibration-docs"},
		{"embed int8 stdin uncalibrated", []string{"embed", "-", "-m", model, "--dtype", "int8", "--status-addr", status}, "give --calibration"},
		{"embed calibration gs://", embed("--dtype", "int8", "--calibration", "gs://b/old.arrow"), "s3:// only"},
		{"search no queries", search("--corpus", in, "-o", out("r.trec")), "give --queries"},
		{"search negative k", search("--queries", in, "--corpus", in, "-k", "-1", "-o", out("r.trec")), "-k and --block"},
		{"search rescore 1", search("--queries", in, "--corpus", in, "--rescore", "1", "-o", out("r.trec")), "--rescore 1"},
		{"search rescore-with without rescore", search("--queries", in, "--corpus", in, "--rescore-with", in, "-o", out("r.trec")), "--rescore-with needs --rescore"},
		{"search unknown output extension", search("--queries", in, "--corpus", in, "-o", out("r.csv")), "r.csv"},
		{"search gs:// output", search("--queries", in, "--corpus", in, "-o", "gs://b/r.trec"), "s3:// only"},
		{"search missing corpus", search("--queries", in, "--corpus", missing, "-o", out("r.trec")), "missing.jsonl"},
		{"search missing qrels", search("--queries", in, "--corpus", in, "--qrels", missing, "-o", out("r.trec")), "missing.jsonl"},
		{"search output is the corpus", search("--queries", in, "--corpus", out("c.arrow"), "-o", out("c.arrow")), "would overwrite"},
		{"search corpus not an output", search("--queries", in, "--corpus", in, "-o", out("r.trec")), "not an Arrow IPC or Parquet"},
	}
}

func TestFlagErrorsCostNothing(t *testing.T) {
	files := t.TempDir()
	writeJSONL(t, filepath.Join(files, "in.jsonl"), testCorpus(3))
	writeJSONL(t, filepath.Join(files, "c.arrow"), testCorpus(1))
	model := tinyModel(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, tc := range flagCases(files, model, held.Addr().String()) {
		t.Run(tc.name, func(t *testing.T) {
			// A short runtime directory: t.TempDir's holds the subtest's
			// name, and a worker socket path under a long one is refused
			// (supervise.CheckRuntimeDir) before the flag is looked at.
			runtime, err := os.MkdirTemp("", "rt")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(runtime) })
			cache := t.TempDir()
			models := filepath.Join(files, "models")
			os.RemoveAll(models)
			os.Mkdir(models, 0o755)
			res := runSynapse(t, []string{"XDG_RUNTIME_DIR=" + runtime, "SYNAPSE_MODELS=" + cache}, tc.args...)
			res.wantCode(t, exitUsage)
			if !strings.Contains(res.stderr, tc.says) {
				t.Errorf("stderr does not say %q:\n%s", tc.says, res.stderr)
			}
			if strings.Contains(res.stderr, "address already in use") {
				t.Errorf("--status-addr was bound before the flags were checked:\n%s", res.stderr)
			}
			for what, dir := range map[string]string{"XDG_RUNTIME_DIR (a worker pool)": runtime, "SYNAPSE_MODELS": cache, "--models-dir": models} {
				if names := dirNames(t, dir); len(names) > 0 {
					t.Errorf("%s holds %q after a refused command; want nothing", what, names)
				}
			}
		})
	}
}

// TestFlagErrorsProbe shows that TestFlagErrorsCostNothing's worker probe
// can fail: a run that starts workers leaves synapse/workers in
// XDG_RUNTIME_DIR, and one that binds --status-addr fails when the port is
// held.
func TestFlagErrorsProbe(t *testing.T) {
	files := t.TempDir()
	in := filepath.Join(files, "in.jsonl")
	writeJSONL(t, in, testCorpus(3))
	model := tinyModel(t)
	runtime := t.TempDir()
	res := runSynapse(t, []string{"XDG_RUNTIME_DIR=" + runtime}, "embed", in, "-m", model, "-o", filepath.Join(files, "v.arrow"), "--workers", "1")
	res.wantCode(t, exitOK)
	if names := dirNames(t, runtime); len(names) == 0 {
		t.Errorf("XDG_RUNTIME_DIR is empty after a run with a worker; the probe cannot see workers")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	res = runSynapse(t, nil, "embed", in, "-m", model, "-o", filepath.Join(files, "w.arrow"), "--status-addr", held.Addr().String())
	res.wantCode(t, exitUsage)
	if !strings.Contains(res.stderr, "address already in use") {
		t.Errorf("a held --status-addr: stderr does not say so:\n%s", res.stderr)
	}
}

// dirNames lists the entries of dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
