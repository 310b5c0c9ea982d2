package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/wire"
)

// These tests run the real `synapse worker` against a minimal module side
// written here: a Unix socket listener in t.TempDir() and the handshake.

const workerDeadline = 60 * time.Second // generous bound for any single wait

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testWorker struct {
	t      testing.TB
	cmd    *exec.Cmd
	nc     *net.UnixConn
	conn   *wire.Conn
	hello  *wire.Hello
	stderr *syncBuffer
	stdout *syncBuffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// spawnWorker starts `synapse worker` with the llama.cpp libraries and
// accepts its connection, without handshaking.
func spawnWorker(t testing.TB, env ...string) *testWorker {
	t.Helper()
	return spawnWorkerEnv(t, append([]string{"SYNAPSE_LLAMA_LIB=" + testenv.LlamaLib(t)}, env...)...)
}

// spawnWorkerEnv starts `synapse worker` with env added to the test's
// environment and accepts its connection, without handshaking.
func spawnWorkerEnv(t testing.TB, env ...string) *testWorker {
	t.Helper()
	bin := testenv.Binary(t)
	sock := filepath.Join(t.TempDir(), "w.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w := &testWorker{t: t, stderr: &syncBuffer{}, stdout: &syncBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(bin, "worker", "--socket", sock, "--nonce", "nonce-42")
	w.cmd.Stdout = w.stdout
	w.cmd.Env = append(os.Environ(), "SYNAPSE_WORKER_ID=w-test", "SYNAPSE_CHAOS=")
	w.cmd.Env = append(w.cmd.Env, env...)
	w.cmd.Stderr = w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("worker stderr:\n%s", w.stderr.String())
		}
	})
	ln.SetDeadline(time.Now().Add(workerDeadline))
	if w.nc, err = ln.AcceptUnix(); err != nil {
		t.Fatalf("accept: %v\nstderr: %s", err, w.stderr.String())
	}
	t.Cleanup(func() { w.nc.Close() })
	w.nc.SetDeadline(time.Now().Add(workerDeadline))
	w.conn = wire.NewConn(w.nc)
	msg, err := w.conn.Recv()
	if err != nil {
		t.Fatalf("reading HELLO: %v", err)
	}
	var ok bool
	if w.hello, ok = msg.(*wire.Hello); !ok {
		t.Fatalf("first message %s; want HELLO", msg.Type())
	}
	return w
}

// startWorker spawns a worker and completes the handshake.
func startWorker(t testing.TB, env ...string) *testWorker {
	t.Helper()
	w := spawnWorker(t, env...)
	if err := w.conn.Send(&wire.HelloAck{V: wire.Version, Accept: true, MaxFrame: wire.DefaultMaxFrame}); err != nil {
		t.Fatal(err)
	}
	return w
}

// startWorkerEnv is spawnWorkerEnv with the handshake.
func startWorkerEnv(t testing.TB, env ...string) *testWorker {
	t.Helper()
	w := spawnWorkerEnv(t, env...)
	if err := w.conn.Send(&wire.HelloAck{V: wire.Version, Accept: true, MaxFrame: wire.DefaultMaxFrame}); err != nil {
		t.Fatal(err)
	}
	return w
}

// call sends a request and returns the answer.
func (w *testWorker) call(req wire.Message) wire.Message {
	w.t.Helper()
	w.nc.SetDeadline(time.Now().Add(workerDeadline))
	if err := w.conn.Send(req); err != nil {
		w.t.Fatalf("send %s: %v", req.Type(), err)
	}
	msg, err := w.conn.Recv()
	if err != nil {
		w.t.Fatalf("answer to %s: %v", req.Type(), err)
	}
	return msg
}

// wait waits for the worker to exit and returns its wait status.
func (w *testWorker) wait() syscall.WaitStatus {
	w.t.Helper()
	select {
	case <-w.done:
	case <-time.After(workerDeadline):
		w.t.Fatalf("worker still running after %v", workerDeadline)
	}
	var ee *exec.ExitError
	if w.err != nil && !errors.As(w.err, &ee) {
		w.t.Fatalf("wait: %v", w.err)
	}
	return w.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

func (w *testWorker) load(id uint64, name string, rc wire.RuntimeConfig) *wire.Loaded {
	w.t.Helper()
	path := modelPath(w.t, name)
	msg := w.call(&wire.Load{ReqID: id, ArtifactPath: path, ArtifactDigest: fileDigest(w.t, path), Format: wire.FormatGGUF, RuntimeConfig: rc})
	l, ok := msg.(*wire.Loaded)
	if !ok || l.ReqID != id {
		w.t.Fatalf("LOAD %s: got %#v; want LOADED req_id %d", name, msg, id)
	}
	return l
}

func wantErr(t *testing.T, msg wire.Message, id uint64, code wire.Code) {
	t.Helper()
	e, ok := msg.(*wire.Err)
	if !ok || e.ReqID != id || e.Code != code {
		t.Errorf("got %#v; want ERR req_id %d code %s", msg, id, code)
	}
}

func TestWorkerHandshake(t *testing.T) {
	w := spawnWorker(t)
	h := w.hello
	if h.V != wire.Version || h.Nonce != "nonce-42" || h.PID != w.cmd.Process.Pid || h.MaxFrame != wire.DefaultMaxFrame {
		t.Errorf("HELLO %+v; want v %d, nonce nonce-42, pid %d, max_frame %d", h, wire.Version, w.cmd.Process.Pid, wire.DefaultMaxFrame)
	}
	// The worker's engine serves the three formats, each opened on first use.
	if h.Engine.Name != "synapse-mux" || !strings.Contains(h.Engine.Version, "llama.cpp "+LlamaRelease) ||
		!strings.Contains(h.Engine.Version, "onnxruntime "+ORTRelease) || !strings.Contains(h.Engine.Version, StaticVersion) ||
		h.Engine.BuildFlags != "formats=gguf,onnx,static" {
		t.Errorf("HELLO engine %+v; want synapse-mux naming llama.cpp %s, onnxruntime %s and %s", h.Engine, LlamaRelease, ORTRelease, StaticVersion)
	}
	if !slices.Equal(h.Extensions, []string{wire.ExtRerankGroups, wire.ExtSampling, wire.ExtQuantizeONNX, wire.ExtSTModules, wire.ExtEmbedTokens, wire.ExtEmbedSparse, wire.ExtEmbedMulti}) {
		t.Errorf("HELLO extensions %q; want %q", h.Extensions, []string{wire.ExtRerankGroups, wire.ExtSampling, wire.ExtQuantizeONNX, wire.ExtSTModules, wire.ExtEmbedTokens, wire.ExtEmbedSparse, wire.ExtEmbedMulti})
	}
	// A smaller negotiated max frame is adopted: an answer above it is an ERR.
	const small = 1 << 20
	w.conn.SetMaxFrame(small)
	if err := w.conn.Send(&wire.HelloAck{V: wire.Version, Accept: true, MaxFrame: small}); err != nil {
		t.Fatal(err)
	}
	l := w.load(1, genEmbed, embedConfig)
	n := small/(4*l.Dims) + 1
	req := &wire.EmbedBatch{ReqID: 2, ModelRef: l.ModelRef, Items: make([]wire.Item, n), IDs: make([]int32, n)}
	for i := range req.Items {
		req.Items[i] = wire.Item{ID: uint64(i), NTokens: 1}
		req.IDs[i] = 101
	}
	wantErr(t, w.call(req), 2, wire.CodeBadRequest)
	if _, ok := w.call(&wire.Ping{ReqID: 3}).(*wire.Pong); !ok {
		t.Error("no PONG after the oversized answer; want the worker to keep serving")
	}
}

func TestWorkerHandshakeFailures(t *testing.T) {
	tests := []struct {
		name  string
		reply func(w *testWorker) error
		want  string // in stderr
	}{
		{"refused", func(w *testWorker) error {
			return w.conn.Send(&wire.HelloAck{V: wire.Version, Accept: false})
		}, "refused"},
		{"wrong version", func(w *testWorker) error {
			return w.conn.Send(&wire.HelloAck{V: 2, Accept: true})
		}, "protocol v2"},
		{"other message first", func(w *testWorker) error {
			return w.conn.Send(&wire.Ping{ReqID: 1})
		}, "before HELLO_ACK"},
		{"closed", func(w *testWorker) error { return w.nc.Close() }, "closed the connection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := spawnWorker(t)
			if err := tt.reply(w); err != nil {
				t.Fatal(err)
			}
			ws := w.wait()
			if ws.Exited() && ws.ExitStatus() == 0 || ws.Signaled() {
				t.Errorf("worker ended with %v; want a non-zero exit", w.err)
			}
			if !strings.Contains(w.stderr.String(), tt.want) {
				t.Errorf("stderr %q; want it to mention %q", w.stderr.String(), tt.want)
			}
		})
	}
}

// TestWorkerRequests: a worker answers every request type. Each subtest
// starts its own worker and loads what it uses, so none depends on another;
// the reference comparisons need the fixtures, the rest runs on generated
// models. The req_ids are the test's own, one per request, so that an
// answer with the wrong id is caught.
func TestWorkerRequests(t *testing.T) {
	t.Run("EMBED_BATCH", testEmbedBatch)
	t.Run("EMBED_BATCH reference parity", testEmbedBatchReference)
	t.Run("RERANK and RERANK_GROUPS", testRerankGroups)
	t.Run("RERANK reference", testRerankReference)
	t.Run("TOKENIZE and GENERATE with a grammar", testGenerateGrammar)
	t.Run("unknown type", testUnknownType)
	t.Run("EMBED_TOKENS", testEmbedTokensLlama)
	t.Run("EMBED_SPARSE", testEmbedSparseLlama)
	t.Run("EMBED_MULTI", testEmbedMultiLlama)
	t.Run("LOAD errors", testLoadErrors)
	t.Run("PING and UNLOAD", testPingUnload)
}

// testEmbedBatch: VECTORS for every item, normalized when asked.
func testEmbedBatch(t *testing.T) {
	const loadID, embedID = 1, 2
	w := startWorker(t)
	emb := w.load(loadID, genEmbed, embedConfig)
	seqs := corpusIDs(t, 5)
	req := &wire.EmbedBatch{ReqID: embedID, ModelRef: emb.ModelRef, Normalize: true}
	for i, ids := range seqs {
		req.Items = append(req.Items, wire.Item{ID: uint64(i), NTokens: len(ids)})
		req.IDs = append(req.IDs, ids...)
	}
	v, ok := w.call(req).(*wire.Vectors)
	if !ok || v.ReqID != embedID || v.N != len(seqs) || v.Dims != emb.Dims {
		t.Fatalf("got %#v; want VECTORS req_id %d, n %d, dims %d", v, embedID, len(seqs), emb.Dims)
	}
	for i := range seqs {
		var sq float64
		for _, x := range v.Data[i*v.Dims : (i+1)*v.Dims] {
			sq += float64(x) * float64(x)
		}
		if math.Abs(math.Sqrt(sq)-1) > 1e-5 {
			t.Errorf("item %d: norm %v; want 1 (normalize)", i, math.Sqrt(sq))
		}
	}
}

// testEmbedBatchReference: the reference BERT's vectors match transformers'.
func testEmbedBatchReference(t *testing.T) {
	const loadID, embedID, minCosine = 1, 2, 0.9999
	var eref embedRef
	readJSON(t, &eref, "reference", "embed.json")
	w := startWorker(t)
	ref := w.load(loadID, "ref-bert-embed.gguf", embedConfig)
	req := &wire.EmbedBatch{ReqID: embedID, ModelRef: ref.ModelRef, Pooling: eref.Pooling, Normalize: eref.Normalize}
	for i, it := range eref.Items {
		req.Items = append(req.Items, wire.Item{ID: uint64(i), NTokens: len(it.IDs)})
		req.IDs = append(req.IDs, it.IDs...)
	}
	v, ok := w.call(req).(*wire.Vectors)
	if !ok || v.ReqID != embedID || v.N != len(eref.Items) || v.Dims != ref.Dims {
		t.Fatalf("got %#v; want VECTORS req_id %d, n %d, dims %d", v, embedID, len(eref.Items), ref.Dims)
	}
	for i, it := range eref.Items {
		if c := testenv.Cosine(v.Data[i*v.Dims:(i+1)*v.Dims], it.Embedding); c < minCosine {
			t.Errorf("item %d: cosine %.6f; want ≥ %g", i, c, minCosine)
		}
	}
}

// testRerankGroups: RERANK scores every candidate, and RERANK_GROUPS scores
// the pairs of two queries (q, and q reversed) in one request, each group's
// scores those of its own RERANK.
func testRerankGroups(t *testing.T) {
	const loadID, rerankID, reversedID, groupsID, tolerance = 1, 2, 3, 4, 1e-4
	w := startWorker(t)
	rr := w.load(loadID, genRerank, embedConfig)
	query, reversed := []int32{1000, 1200}, []int32{1200, 1000}
	docs := [][]int32{{1300, 1400, 1500}, {1600}, {1001, 1002}}
	req := &wire.Rerank{ReqID: rerankID, ModelRef: rr.ModelRef, QueryNTokens: len(query), IDs: slices.Clone(query)}
	for _, d := range docs {
		req.Candidates = append(req.Candidates, wire.Candidate{NTokens: len(d)})
		req.IDs = append(req.IDs, d...)
	}
	s, ok := w.call(req).(*wire.Scores)
	if !ok || s.ReqID != rerankID || len(s.Data) != len(docs) {
		t.Fatalf("got %#v; want SCORES req_id %d with %d scores", s, rerankID, len(docs))
	}
	second := docs[1]
	req2 := &wire.Rerank{ReqID: reversedID, ModelRef: rr.ModelRef, QueryNTokens: len(reversed),
		Candidates: []wire.Candidate{{NTokens: len(second)}}, IDs: append(slices.Clone(reversed), second...)}
	s2, ok := w.call(req2).(*wire.Scores)
	if !ok || s2.ReqID != reversedID || len(s2.Data) != 1 {
		t.Fatalf("got %#v; want SCORES req_id %d with 1 score", s2, reversedID)
	}
	groups := &wire.RerankGroups{ReqID: groupsID, ModelRef: rr.ModelRef, Groups: []wire.RerankGroup{
		{QueryNTokens: len(query), Candidates: req.Candidates}, {QueryNTokens: len(reversed), Candidates: req2.Candidates}},
		IDs: append(slices.Clone(req.IDs), req2.IDs...)}
	sg, ok := w.call(groups).(*wire.Scores)
	if !ok || sg.ReqID != groupsID || len(sg.Data) != len(docs)+1 {
		t.Fatalf("got %#v; want SCORES req_id %d with %d scores", sg, groupsID, len(docs)+1)
	}
	for i, want := range append(slices.Clone(s.Data), s2.Data...) {
		if math.Abs(float64(sg.Data[i]-want)) > tolerance {
			t.Errorf("RERANK_GROUPS score %d: %.6f; want its RERANK's %.6f", i, sg.Data[i], want)
		}
	}
	if s.Data[1] == s2.Data[0] {
		t.Errorf("queries q and reversed q score a document the same: the test does not tell groups apart")
	}
}

// testRerankReference: the reference cross-encoder's scores for the first
// query match transformers'.
func testRerankReference(t *testing.T) {
	const loadID, rerankID, tolerance = 1, 2, 0.02
	var rref rerankRef
	readJSON(t, &rref, "reference", "rerank.json")
	w := startWorker(t)
	rr := w.load(loadID, "ref-bert-rerank.gguf", embedConfig)
	q, _ := splitPair(t, rref.Items[0].IDs)
	req := &wire.Rerank{ReqID: rerankID, ModelRef: rr.ModelRef, QueryNTokens: len(q), IDs: append([]int32(nil), q...)}
	var want []float32
	for _, it := range rref.Items {
		q2, d := splitPair(t, it.IDs)
		if !slices.Equal(q, q2) {
			break
		}
		req.Candidates = append(req.Candidates, wire.Candidate{NTokens: len(d)})
		req.IDs = append(req.IDs, d...)
		want = append(want, it.Score)
	}
	s, ok := w.call(req).(*wire.Scores)
	if !ok || s.ReqID != rerankID || len(s.Data) != len(want) {
		t.Fatalf("got %#v; want SCORES req_id %d with %d scores", s, rerankID, len(want))
	}
	for i := range want {
		if math.Abs(float64(s.Data[i]-want[i])) > tolerance {
			t.Errorf("candidate %d: score %.4f; want %.4f ± %g", i, s.Data[i], want[i], tolerance)
		}
	}
}

// testGenerateGrammar: TOKENIZE adds BOS, GENERATE under a grammar answers
// within it, and a grammar llama.cpp cannot parse is config_invalid.
func testGenerateGrammar(t *testing.T) {
	const loadID, tokenizeID, generateID, badGrammarID, bos = 1, 2, 3, 4, 1
	w := startWorker(t)
	gen := w.load(loadID, genLlama, genConfig)
	tk, ok := w.call(&wire.Tokenize{ReqID: tokenizeID, ModelRef: gen.ModelRef, Text: "Answer yes or no:", AddSpecial: true}).(*wire.Tokens)
	if !ok || tk.ReqID != tokenizeID || tk.N == 0 || tk.IDs[0] != bos {
		t.Fatalf("got %#v; want TOKENS req_id %d starting with BOS %d", tk, tokenizeID, bos)
	}
	txt, ok := w.call(&wire.Generate{ReqID: generateID, ModelRef: gen.ModelRef, MaxTokens: 16, Grammar: `root ::= ("yes" | "no")`, IDs: tk.IDs}).(*wire.Text)
	if !ok || txt.ReqID != generateID || (txt.Text != "yes" && txt.Text != "no") || txt.FinishReason != FinishGrammar || txt.NPrompt != tk.N {
		t.Errorf("got %#v; want TEXT req_id %d yes|no, finish grammar, n_prompt %d", txt, generateID, tk.N)
	}
	bad := &wire.Generate{ReqID: badGrammarID, ModelRef: gen.ModelRef, MaxTokens: 4, Grammar: `root ::= (`, IDs: tk.IDs}
	wantErr(t, w.call(bad), badGrammarID, wire.CodeConfigInvalid)
}

// testUnknownType: a frame of a type the worker does not know is
// unknown_type, with its req_id.
func testUnknownType(t *testing.T) {
	const frobID = 9
	w := startWorker(t)
	if err := wire.WriteFrame(w.nc, []byte(fmt.Sprintf(`{"type":"FROB","req_id":%d}`, frobID))); err != nil {
		t.Fatal(err)
	}
	msg, err := w.conn.Recv()
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, msg, frobID, wire.CodeUnknownType)
}

// testEmbedTokensLlama: the worker announces EMBED_TOKENS and the
// llama.cpp engine answers it with every token's state; an old worker
// (drill) answers unknown_type.
func testEmbedTokensLlama(t *testing.T) {
	w := startWorker(t)
	emb := w.load(1, genEmbed, embedConfig)
	ts, ok := w.call(&wire.EmbedTokens{ReqID: 2, ModelRef: emb.ModelRef, Items: []wire.Item{{NTokens: 2}, {NTokens: 3}}, IDs: []int32{101, 102, 101, 1592, 102}}).(*wire.TokenStates)
	if !ok || ts.ReqID != 2 || ts.Dims != emb.Dims || len(ts.NTokens) != 2 || ts.NTokens[1] != 3 || len(ts.Data) != 5*emb.Dims {
		t.Fatalf("got %#v; want TOKEN_STATES req_id 2 of 2+3 tokens × %d dims", ts, emb.Dims)
	}
	old := startWorker(t, "SYNAPSE_CHAOS=old-worker=1")
	emb = old.load(1, genEmbed, embedConfig)
	wantErr(t, old.call(&wire.EmbedTokens{ReqID: 2, ModelRef: emb.ModelRef, Items: []wire.Item{{NTokens: 2}}, IDs: []int32{1, 2}}), 2, wire.CodeUnknownType)
}

// testEmbedSparseLlama: the worker announces EMBED_SPARSE, and the
// llama.cpp engine, which has no masked-LM logits, answers unsupported; an
// old worker (drill) answers unknown_type.
func testEmbedSparseLlama(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want wire.Code
	}{
		{"llama.cpp engine", nil, wire.CodeUnsupported},
		{"old worker", []string{"SYNAPSE_CHAOS=old-worker=1"}, wire.CodeUnknownType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startWorker(t, tt.env...)
			emb := w.load(1, genEmbed, embedConfig)
			msg := w.call(&wire.EmbedSparse{ReqID: 2, ModelRef: emb.ModelRef, Items: []wire.Item{{NTokens: 2}}, IDs: []int32{1, 2}})
			wantErr(t, msg, 2, tt.want)
		})
	}
}

// testEmbedMultiLlama: the worker announces EMBED_MULTI, and the llama.cpp
// engine, which has no multi-vector projection, answers unsupported; an
// old worker (drill) answers unknown_type.
func testEmbedMultiLlama(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want wire.Code
	}{
		{"llama.cpp engine", nil, wire.CodeUnsupported},
		{"old worker", []string{"SYNAPSE_CHAOS=old-worker=1"}, wire.CodeUnknownType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startWorker(t, tt.env...)
			emb := w.load(1, genEmbed, embedConfig)
			msg := w.call(&wire.EmbedMulti{ReqID: 2, ModelRef: emb.ModelRef, Items: []wire.MultiItem{{NTokens: 2}}, IDs: []int32{1, 2}})
			wantErr(t, msg, 2, tt.want)
		})
	}
}

// testLoadErrors: a digest that is not the file's is artifact_invalid; a
// micro-batch larger than the batch is config_invalid.
func testLoadErrors(t *testing.T) {
	const wrongDigestID, badConfigID = 1, 2
	w := startWorker(t)
	path := modelPath(t, genEmbed)
	wrongDigest := "sha256:" + strings.Repeat("ab", 32)
	bad := &wire.Load{ReqID: wrongDigestID, ArtifactPath: path, ArtifactDigest: wrongDigest, Format: wire.FormatGGUF, RuntimeConfig: embedConfig}
	wantErr(t, w.call(bad), wrongDigestID, wire.CodeArtifactInvalid)
	cfg := &wire.Load{ReqID: badConfigID, ArtifactPath: path, ArtifactDigest: fileDigest(t, path), Format: wire.FormatGGUF,
		RuntimeConfig: wire.RuntimeConfig{Embeddings: true, BatchSize: 64, UBatchSize: 128}}
	wantErr(t, w.call(cfg), badConfigID, wire.CodeConfigInvalid)
}

// testPingUnload: PONG lists the models loaded; after UNLOAD the model is
// gone for EMBED_BATCH and for a second UNLOAD.
func testPingUnload(t *testing.T) {
	const loadEmbedID, loadRerankID, pingID, unloadID, embedID, unloadAgainID = 1, 2, 3, 4, 5, 6
	w := startWorker(t)
	emb := w.load(loadEmbedID, genEmbed, embedConfig)
	rr := w.load(loadRerankID, genRerank, embedConfig)
	loaded := slices.Sorted(slices.Values([]string{emb.ModelRef, rr.ModelRef}))
	p, ok := w.call(&wire.Ping{ReqID: pingID}).(*wire.Pong)
	if !ok || p.ReqID != pingID || p.RSSMB <= 0 || !slices.Equal(slices.Sorted(slices.Values(p.ModelsLoaded)), loaded) {
		t.Fatalf("got %#v; want PONG req_id %d, rss_mb > 0, models %v loaded", p, pingID, loaded)
	}
	if u, ok := w.call(&wire.Unload{ReqID: unloadID, ModelRef: emb.ModelRef}).(*wire.Unloaded); !ok || u.ReqID != unloadID {
		t.Fatalf("got %#v; want UNLOADED req_id %d", u, unloadID)
	}
	oneToken := &wire.EmbedBatch{ReqID: embedID, ModelRef: emb.ModelRef, Items: []wire.Item{{ID: 1, NTokens: 1}}, IDs: []int32{101}}
	wantErr(t, w.call(oneToken), embedID, wire.CodeModelNotLoaded)
	wantErr(t, w.call(&wire.Unload{ReqID: unloadAgainID, ModelRef: emb.ModelRef}), unloadAgainID, wire.CodeModelNotLoaded)
}

// TestWorkerShutdown: after SHUTDOWN a worker that served a request exits
// 0, having written nothing to stdout and log lines tagged with its id to
// stderr.
func TestWorkerShutdown(t *testing.T) {
	const loadID = 1
	w := startWorker(t)
	w.load(loadID, genEmbed, embedConfig)
	if err := w.conn.Send(&wire.Shutdown{}); err != nil {
		t.Fatal(err)
	}
	if ws := w.wait(); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("after SHUTDOWN: %v; want exit status 0", w.err)
	}
	if out := w.stdout.String(); out != "" {
		t.Errorf("stdout %q; want nothing (workers log to stderr only)", out)
	}
	if !strings.Contains(w.stderr.String(), "worker=w-test") {
		t.Errorf("stderr %q; want log lines tagged with SYNAPSE_WORKER_ID", w.stderr.String())
	}
}

func TestWorkerExitsOnEOF(t *testing.T) {
	w := startWorker(t)
	if _, ok := w.call(&wire.Ping{ReqID: 1}).(*wire.Pong); !ok {
		t.Fatal("no PONG")
	}
	w.nc.Close()
	if ws := w.wait(); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("after EOF: %v; want exit status 0", w.err)
	}
}

func TestWorkerProtocolViolation(t *testing.T) {
	tests := []struct {
		name  string
		frame string
	}{
		{"not JSON", "\x00garbage"},
		{"no type", `{"req_id":3}`},
		{"a response", `{"type":"PONG","req_id":1,"rss_mb":1,"models_loaded":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startWorker(t)
			if err := wire.WriteFrame(w.nc, []byte(tt.frame)); err != nil {
				t.Fatal(err)
			}
			if ws := w.wait(); !ws.Exited() || ws.ExitStatus() == 0 {
				t.Errorf("worker ended with %v; want a non-zero exit", w.err)
			}
		})
	}
}

func TestWorkerChaos(t *testing.T) {
	embed := func(id uint64, tok int32) *wire.EmbedBatch {
		return &wire.EmbedBatch{ReqID: id, ModelRef: "any", Items: []wire.Item{{ID: 1, NTokens: 3}}, IDs: []int32{101, tok, 102}}
	}
	t.Run("abort-on-token", func(t *testing.T) {
		w := startWorker(t, "SYNAPSE_CHAOS=abort-on-token=7777")
		wantErr(t, w.call(embed(1, 1000)), 1, wire.CodeModelNotLoaded) // other ids pass
		if err := w.conn.Send(embed(2, 7777)); err != nil {
			t.Fatal(err)
		}
		if ws := w.wait(); !ws.Signaled() || ws.Signal() != syscall.SIGABRT {
			t.Errorf("worker ended with %v; want death by SIGABRT", w.err)
		}
	})
	t.Run("hang-on-token", func(t *testing.T) {
		w := startWorker(t, "SYNAPSE_CHAOS=hang-on-token=7777")
		if err := w.conn.Send(embed(1, 7777)); err != nil {
			t.Fatal(err)
		}
		w.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if msg, err := w.conn.Recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, %v; want no answer before the deadline", msg, err)
		}
		select {
		case <-w.done:
			t.Fatalf("worker exited (%v); want it hung", w.err)
		default:
		}
		w.cmd.Process.Kill()
		if ws := w.wait(); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("worker ended with %v; want SIGKILL from the test", w.err)
		}
	})
	t.Run("exit-after", func(t *testing.T) {
		w := startWorker(t, "SYNAPSE_CHAOS=exit-after=2")
		for id := uint64(1); id <= 2; id++ {
			if _, ok := w.call(&wire.Ping{ReqID: id}).(*wire.Pong); !ok {
				t.Fatalf("request %d not answered", id)
			}
		}
		if ws := w.wait(); !ws.Exited() || ws.ExitStatus() != 1 {
			t.Errorf("worker ended with %v; want exit status 1", w.err)
		}
	})
	t.Run("delay", func(t *testing.T) {
		w := startWorker(t, "SYNAPSE_CHAOS=delay=300ms")
		start := time.Now()
		if _, ok := w.call(&wire.Ping{ReqID: 1}).(*wire.Pong); !ok {
			t.Fatal("PING not answered")
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("PONG after %v; want at least the 300ms delay", d)
		}
	})
	t.Run("bad drill", func(t *testing.T) {
		w := &testWorker{t: t, stderr: &syncBuffer{}, done: make(chan struct{})}
		w.cmd = exec.Command(testenv.Binary(t), "worker", "--socket", filepath.Join(t.TempDir(), "none"), "--nonce", "n")
		w.cmd.Env = append(os.Environ(), "SYNAPSE_CHAOS=explode=1")
		w.cmd.Stderr = w.stderr
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { w.err = w.cmd.Wait(); close(w.done) }()
		if ws := w.wait(); ws.ExitStatus() != 2 || !strings.Contains(w.stderr.String(), "unknown drill") {
			t.Errorf("exit %d, stderr %q; want usage error 2 naming the unknown drill", ws.ExitStatus(), w.stderr.String())
		}
	})
}

// A worker without the llama.cpp libraries starts and answers a GGUF LOAD
// with ERR unsupported saying which libraries it needs and where they come
// from; it goes on serving (ONNX models do not need them: see
// TestONNXWorkerWithoutLlama).
func TestWorkerMissingLibrary(t *testing.T) {
	dir := t.TempDir()
	w := startWorkerEnv(t, "SYNAPSE_LLAMA_LIB="+dir)
	path := testenv.Fixture(t, "models", "ref-bert-embed.gguf")
	msg := w.call(&wire.Load{ReqID: 1, ArtifactPath: path, ArtifactDigest: fileDigest(t, path), Format: "gguf", RuntimeConfig: embedConfig})
	wantErr(t, msg, 1, wire.CodeUnsupported)
	if e, ok := msg.(*wire.Err); ok {
		for _, want := range []string{dir, LlamaRelease, LlamaNPMPackage, "make setup"} {
			if !strings.Contains(e.Msg, want) {
				t.Errorf("ERR %q; want it to name %q", e.Msg, want)
			}
		}
	}
	if _, ok := w.call(&wire.Ping{ReqID: 2}).(*wire.Pong); !ok {
		t.Error("no PONG after the failed LOAD; want the worker to keep serving")
	}
}

// The module owns the worker's lifecycle: a SIGINT (a terminal's ^C reaching
// the whole process group) must not stop it.
func TestWorkerIgnoresSIGINT(t *testing.T) {
	w := startWorker(t)
	if _, ok := w.call(&wire.Ping{ReqID: 1}).(*wire.Pong); !ok {
		t.Fatal("no PONG")
	}
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.call(&wire.Ping{ReqID: 2}).(*wire.Pong); !ok {
		t.Fatal("no PONG after SIGINT; want the worker to ignore it")
	}
	if err := w.conn.Send(&wire.Shutdown{}); err != nil {
		t.Fatal(err)
	}
	if ws := w.wait(); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("after SHUTDOWN: %v; want exit status 0", w.err)
	}
}
