package wire

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// sampleMessages returns one message of every type, with every member set.
func sampleMessages() []Message {
	return []Message{
		&Hello{V: Version, Nonce: "n-0123", Engine: EngineInfo{Name: "llama.cpp", Version: "b6000", BuildFlags: "AVX2=1"}, PID: 4242, MaxFrame: DefaultMaxFrame,
			Extensions: []string{ExtRerankGroups, ExtSampling}},
		&HelloAck{V: Version, Accept: true, MaxFrame: 1 << 20},
		&Load{ReqID: 1, ArtifactPath: "/models/ref-bert-embed.gguf", ArtifactDigest: "sha256:00ff", Format: "gguf",
			RuntimeConfig: RuntimeConfig{ContextSize: 512, BatchSize: 512, UBatchSize: 256, Threads: 2, SeqMax: 8, Pooling: "mean", Embeddings: true}},
		&Loaded{ReqID: 1, ModelRef: "m1", Dims: 3, ColdLoadMS: 125},
		&EmbedBatch{ReqID: 2, ModelRef: "m1", Pooling: "cls", Normalize: true, Items: []Item{{ID: 10, NTokens: 3}, {ID: 11, NTokens: 0}, {ID: 12, NTokens: 2}}, IDs: []int32{101, -7, 2, 1 << 30, math.MinInt32}},
		&Vectors{ReqID: 2, Dims: 3, N: 2, Data: []float32{0.5, -1, float32(math.Inf(1)), 0, math.SmallestNonzeroFloat32, 3.25}},
		&Rerank{ReqID: 3, ModelRef: "r1", QueryNTokens: 2, Candidates: []Candidate{{NTokens: 1}, {NTokens: 2}}, IDs: []int32{1, 2, 3, 4, 5}},
		&Scores{ReqID: 3, N: 2, Data: []float32{0.9, -0.1}},
		&Generate{ReqID: 4, ModelRef: "g1", MaxTokens: 64, Grammar: `root ::= "yes" | "no"`, Temperature: 0.7, Seed: 42, IDs: []int32{1, 15043, 29892}},
		&RerankGroups{ReqID: 9, ModelRef: "r1", Groups: []RerankGroup{{QueryNTokens: 1, Candidates: []Candidate{{NTokens: 2}}},
			{QueryNTokens: 2, Candidates: []Candidate{{NTokens: 1}, {NTokens: 0}}}}, IDs: []int32{1, 2, 3, 4, 5, 6}},
		&Text{ReqID: 4, Text: "yes <&> \u00e9\n", NPrompt: 3, NGen: 1, FinishReason: "stop"},
		&Unload{ReqID: 5, ModelRef: "m1"},
		&Unloaded{ReqID: 5},
		&Ping{ReqID: 6},
		&Pong{ReqID: 6, RSSMB: 512, ModelsLoaded: []string{"m1", "r1"}, PlacementShare: ptr(0.75)},
		&Shutdown{},
		&Err{ReqID: 7, Code: CodeOOM, Msg: "cannot allocate 2 GiB"},
		&Tokenize{ReqID: 8, ModelRef: "m1", Text: "Hello, world", AddSpecial: true, ParseSpecial: true},
		&Tokens{ReqID: 8, N: 4, IDs: []int32{101, 7592, 1010, 102}},
		&Quantize{ReqID: 9, ArtifactPath: "/models/minilm-f16.gguf", ArtifactDigest: "sha256:00ff", OutPath: "/cache/tmp-1/model.gguf", FType: "q8_0", Threads: 2},
		&Quantized{ReqID: 9, OutDigest: "sha256:0a1b", OutSize: 25165824, MS: 1250},
		&EmbedTokens{ReqID: 10, ModelRef: "m1", Items: []Item{{ID: 0, NTokens: 2}, {ID: 1, NTokens: 1}}, IDs: []int32{101, 7592, 102}},
		&TokenStates{ReqID: 10, Dims: 2, NTokens: []int{2, 1}, Data: []float32{0.5, -1, 2, 0, math.SmallestNonzeroFloat32, -3.25}},
		&EmbedSparse{ReqID: 11, ModelRef: "m1", TopK: 2, Items: []Item{{ID: 0, NTokens: 2}, {ID: 1, NTokens: 1}}, IDs: []int32{101, 7592, 102}},
		&SparseVectors{ReqID: 11, Vocab: 30522, NNZ: []int{2, 0, 1}, Pairs: []uint32{7, math.Float32bits(1.5), 2009, math.Float32bits(0.25), 30521, math.Float32bits(3)}},
		&EmbedMulti{ReqID: 12, ModelRef: "m1", Items: []MultiItem{{ID: 0, NTokens: 2, Attend: 1}, {ID: 1, NTokens: 1}}, IDs: []int32{101, 103, 102}},
		&MultiVectors{ReqID: 12, Dims: 2, NTokens: []int{2, 1}, Data: []float32{1, 0, 0.6, 0.8, 0, -1}},
	}
}

// edgeMessages returns messages with empty raw frames, empty and nil
// lists, zero values and NaN.
func edgeMessages() []Message {
	return []Message{
		&EmbedBatch{},
		&EmbedBatch{ReqID: 1, Items: []Item{}},
		&EmbedBatch{ReqID: 2, Items: []Item{{ID: 1, NTokens: 0}, {ID: 2, NTokens: 0}}},
		&Vectors{ReqID: 3, Dims: 384, N: 0},
		&Vectors{ReqID: 4, Dims: 0, N: 5},
		&Vectors{ReqID: 5, Dims: 2, N: 1, Data: []float32{float32(math.NaN()), float32(math.Copysign(0, -1))}},
		&Rerank{ReqID: 6, Candidates: []Candidate{}},
		&RerankGroups{ReqID: 6, Groups: []RerankGroup{}},
		&Scores{},
		&Generate{ReqID: 7},
		&Tokens{ReqID: 8},
		&Pong{ReqID: 9},
		&Pong{ReqID: 10, ModelsLoaded: []string{}, PlacementShare: ptr(0.0)},
		&Hello{},
		&Err{ReqID: 11, Code: "future_code"},
		&Text{Text: "\x00\u2028\"'"},
		&Quantize{},
		&Quantized{ReqID: 12},
	}
}

func TestRoundTripBuffer(t *testing.T) {
	var buf bytes.Buffer
	c := NewConn(&buf)
	msgs := append(sampleMessages(), edgeMessages()...)
	for _, m := range msgs {
		if err := c.Send(m); err != nil {
			t.Fatalf("Send(%s): %v", m.Type(), err)
		}
	}
	for _, want := range msgs {
		got, err := c.Recv()
		if err != nil {
			t.Fatalf("Recv (want %s): %v", want.Type(), err)
		}
		if !equalMessages(got, want) {
			t.Errorf("Recv: got %#v; want %#v", got, want)
		}
	}
	if m, err := c.Recv(); err != io.EOF {
		t.Errorf("Recv at end: got %v, %v; want io.EOF", m, err)
	}
}

// TestRoundTripPipe sends every message both ways at once over a
// synchronous pipe, so Send and Recv run concurrently on each Conn.
func TestRoundTripPipe(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(10 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	ca, cb := NewConn(a), NewConn(b)

	sendErr := make(chan error, 2)
	for _, c := range []*Conn{ca, cb} {
		go func() {
			for _, m := range sampleMessages() {
				if err := c.Send(m); err != nil {
					sendErr <- err
					return
				}
			}
			sendErr <- nil
		}()
	}
	for _, c := range []*Conn{ca, cb} {
		for _, want := range sampleMessages() {
			got, err := c.Recv()
			if err != nil {
				t.Fatalf("Recv (want %s): %v", want.Type(), err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Recv: got %#v; want %#v", got, want)
			}
		}
	}
	for range 2 {
		if err := <-sendErr; err != nil {
			t.Errorf("Send: %v", err)
		}
	}
}

// TestRequestID checks every message with a req_id reports it.
func TestRequestID(t *testing.T) {
	for _, m := range sampleMessages() {
		r, ok := m.(interface{ RequestID() uint64 })
		switch m.(type) {
		case *Hello, *HelloAck, *Shutdown:
			if ok {
				t.Errorf("%s implements RequestID; want not", m.Type())
			}
			continue
		}
		if !ok {
			t.Errorf("%s does not implement RequestID", m.Type())
			continue
		}
		want := reflect.ValueOf(m).Elem().FieldByName("ReqID").Uint()
		if got := r.RequestID(); got != want {
			t.Errorf("%s.RequestID() = %d; want %d", m.Type(), got, want)
		}
	}
}

// TestControlJSON pins the JSON member names the spec writes.
func TestControlJSON(t *testing.T) {
	tests := []struct {
		m    Message
		want string
	}{
		{&Hello{V: 1, Nonce: "x", Engine: EngineInfo{"llama.cpp", "1", "f"}, PID: 9, MaxFrame: 64},
			`{"type":"HELLO","v":1,"nonce":"x","engine":{"name":"llama.cpp","version":"1","build_flags":"f"},"pid":9,"max_frame":64}`},
		{&HelloAck{V: 1, Accept: true, MaxFrame: 64}, `{"type":"HELLO_ACK","v":1,"accept":true,"max_frame":64}`},
		{&Load{ReqID: 1, ArtifactPath: "p", ArtifactDigest: "sha256:ab", Format: "gguf", RuntimeConfig: RuntimeConfig{1, 2, 3, 4, 5, "mean", true, false, ""}},
			`{"type":"LOAD","req_id":1,"artifact_path":"p","artifact_digest":"sha256:ab","format":"gguf","runtime_config":{"n_ctx":1,"n_batch":2,"n_ubatch":3,"n_threads":4,"n_seq_max":5,"pooling":"mean","embeddings":true}}`},
		{&Load{ReqID: 1, ArtifactPath: "p", ArtifactDigest: "sha256:ab", Format: "gguf", RuntimeConfig: RuntimeConfig{VocabOnly: true}},
			`{"type":"LOAD","req_id":1,"artifact_path":"p","artifact_digest":"sha256:ab","format":"gguf","runtime_config":{"n_ctx":0,"n_batch":0,"n_ubatch":0,"n_threads":0,"n_seq_max":0,"pooling":"","embeddings":false,"vocab_only":true}}`},
		{&Load{ReqID: 1, ArtifactPath: "d/model.onnx", ArtifactDigest: "sha256:ab", Format: "onnx", RuntimeConfig: RuntimeConfig{Embeddings: true, STModules: "Pooling(cls) + Normalize"}},
			`{"type":"LOAD","req_id":1,"artifact_path":"d/model.onnx","artifact_digest":"sha256:ab","format":"onnx","runtime_config":{"n_ctx":0,"n_batch":0,"n_ubatch":0,"n_threads":0,"n_seq_max":0,"pooling":"","embeddings":true,"st_modules":"Pooling(cls) + Normalize"}}`},
		{&Loaded{ReqID: 1, ModelRef: "m", Dims: 8, ColdLoadMS: 3}, `{"type":"LOADED","req_id":1,"model_ref":"m","dims":8,"cold_load_ms":3}`},
		{&EmbedBatch{ReqID: 2, ModelRef: "m", Pooling: "", Normalize: true, Items: []Item{{ID: 7, NTokens: 1}}, IDs: []int32{5}},
			`{"type":"EMBED_BATCH","req_id":2,"model_ref":"m","pooling":"","normalize":true,"items":[{"id":7,"n_tokens":1}]}`},
		{&EmbedBatch{ReqID: 2, ModelRef: "m", Items: []Item{{ID: 0, NTokens: 3, PoolFrom: 2}, {ID: 1, NTokens: 1}}, IDs: []int32{5, 6, 7, 8}},
			`{"type":"EMBED_BATCH","req_id":2,"model_ref":"m","pooling":"","normalize":false,"items":[{"id":0,"n_tokens":3,"pool_from":2},{"id":1,"n_tokens":1}]}`},
		{&Vectors{ReqID: 2, Dims: 1, N: 1, Data: []float32{1}}, `{"type":"VECTORS","req_id":2,"dims":1,"n":1}`},
		{&Rerank{ReqID: 3, ModelRef: "r", QueryNTokens: 1, Candidates: []Candidate{{NTokens: 0}}, IDs: []int32{1}},
			`{"type":"RERANK","req_id":3,"model_ref":"r","query_n_tokens":1,"candidates":[{"n_tokens":0}]}`},
		{&Scores{ReqID: 3, N: 0, Data: nil}, `{"type":"SCORES","req_id":3,"n":0}`},
		{&Generate{ReqID: 4, ModelRef: "g", MaxTokens: 8}, `{"type":"GENERATE","req_id":4,"model_ref":"g","max_tokens":8}`},
		{&Generate{ReqID: 4, ModelRef: "g", MaxTokens: 8, Grammar: "root ::= x"}, `{"type":"GENERATE","req_id":4,"model_ref":"g","max_tokens":8,"grammar":"root ::= x"}`},
		{&Text{ReqID: 4, Text: "<b>", NPrompt: 1, NGen: 2, FinishReason: "length"}, `{"type":"TEXT","req_id":4,"text":"<b>","n_prompt":1,"n_gen":2,"finish_reason":"length"}`},
		{&Unload{ReqID: 5, ModelRef: "m"}, `{"type":"UNLOAD","req_id":5,"model_ref":"m"}`},
		{&Unloaded{ReqID: 5}, `{"type":"UNLOADED","req_id":5}`},
		{&Ping{ReqID: 6}, `{"type":"PING","req_id":6}`},
		{&Pong{ReqID: 6, RSSMB: 10, ModelsLoaded: []string{"m"}}, `{"type":"PONG","req_id":6,"rss_mb":10,"models_loaded":["m"]}`},
		{&Pong{ReqID: 6, RSSMB: 10, ModelsLoaded: []string{}, PlacementShare: ptr(0.5)}, `{"type":"PONG","req_id":6,"rss_mb":10,"models_loaded":[],"placement_share":0.5}`},
		{&Shutdown{}, `{"type":"SHUTDOWN"}`},
		{&Err{ReqID: 7, Code: CodeUnknownType, Msg: "m"}, `{"type":"ERR","req_id":7,"code":"unknown_type","msg":"m"}`},
		{&Tokenize{ReqID: 8, ModelRef: "m", Text: "t", AddSpecial: true, ParseSpecial: false},
			`{"type":"TOKENIZE","req_id":8,"model_ref":"m","text":"t","add_special":true,"parse_special":false}`},
		{&Tokens{ReqID: 8, N: 1, IDs: []int32{3}}, `{"type":"TOKENS","req_id":8,"n":1}`},
		{&RerankGroups{ReqID: 9, ModelRef: "r", Groups: []RerankGroup{{QueryNTokens: 1, Candidates: []Candidate{{NTokens: 1}}}}, IDs: []int32{1, 2}},
			`{"type":"RERANK_GROUPS","req_id":9,"model_ref":"r","groups":[{"query_n_tokens":1,"candidates":[{"n_tokens":1}]}]}`},
		{&Generate{ReqID: 4, ModelRef: "g", MaxTokens: 8, Temperature: 0.5, Seed: 7}, `{"type":"GENERATE","req_id":4,"model_ref":"g","max_tokens":8,"temperature":0.5,"seed":7}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.m.Type()), func(t *testing.T) {
			var buf bytes.Buffer
			if err := NewConn(&buf).Send(tt.m); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFrame(&buf, DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("control frame:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestRawFrameBytes checks the raw frame is the little-endian array.
func TestRawFrameBytes(t *testing.T) {
	var buf bytes.Buffer
	m := &Vectors{ReqID: 1, Dims: 2, N: 1, Data: []float32{1.5, -2}}
	if err := NewConn(&buf).Send(m); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrame(&buf, DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	want := []byte{8, 0, 0, 0}
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(1.5))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(-2))
	if got := buf.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("raw frame: got % x; want % x", got, want)
	}
}

// TestConversionPath runs the big-endian-host code (conversion loops) on
// this host: the bytes on the wire and the decoded values must not change.
func TestConversionPath(t *testing.T) {
	var native bytes.Buffer
	c := NewConn(&native)
	for _, m := range sampleMessages() {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	saved := littleEndian
	littleEndian = false
	defer func() { littleEndian = saved }()

	var conv bytes.Buffer
	cc := NewConn(&conv)
	for _, m := range sampleMessages() {
		if err := cc.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(conv.Bytes(), native.Bytes()) {
		t.Fatalf("conversion path wrote different bytes")
	}
	big := &Vectors{ReqID: 1, Dims: 1500, N: 1, Data: make([]float32, 1500)} // more than one conversion chunk
	for i := range big.Data {
		big.Data[i] = float32(i) / 7
	}
	if err := cc.Send(big); err != nil {
		t.Fatal(err)
	}
	for _, want := range append(sampleMessages(), big) {
		got, err := cc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Recv: got %#v; want %#v", got, want)
		}
	}
}

// equalMessages compares messages, float data by bits (NaN included).
func equalMessages(a, b Message) bool {
	if !reflect.DeepEqual(withoutFloats(a), withoutFloats(b)) {
		return false
	}
	return bytes.Equal(floatBytes(a), floatBytes(b))
}

func withoutFloats(m Message) Message {
	switch m := m.(type) {
	case *Vectors:
		c := *m
		c.Data = nil
		return &c
	case *Scores:
		c := *m
		c.Data = nil
		return &c
	case *TokenStates:
		c := *m
		c.Data = nil
		return &c
	}
	return m
}

func floatBytes(m Message) []byte {
	switch m := m.(type) {
	case *Vectors:
		return byteView(m.Data)
	case *Scores:
		return byteView(m.Data)
	case *TokenStates:
		return byteView(m.Data)
	}
	return nil
}

// TestUnixSocket exchanges large messages both ways over a real Unix
// socket, where reads return partial frames, while SetMaxFrame runs
// concurrently.
func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("unix sockets unavailable: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	deadline := time.Now().Add(20 * time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)

	big := &Vectors{ReqID: 1, Dims: 1024, N: 512, Data: make([]float32, 1024*512)} // 2 MiB, far over the socket buffer
	for i := range big.Data {
		big.Data[i] = float32(i)
	}
	ids := &EmbedBatch{ReqID: 2, Items: []Item{{ID: 1, NTokens: 1 << 18}}, IDs: make([]int32, 1<<18)} // 1 MiB
	for i := range ids.IDs {
		ids.IDs[i] = int32(-i)
	}
	cc, sc := NewConn(client), NewConn(server)
	done := make(chan error, 3)
	go func() { done <- cc.Send(ids) }()
	go func() { done <- sc.Send(big) }()
	go func() {
		for range 100 {
			cc.SetMaxFrame(DefaultMaxFrame)
			sc.SetMaxFrame(DefaultMaxFrame)
		}
		done <- nil
	}()
	for _, tc := range []struct {
		c    *Conn
		want Message
	}{{sc, ids}, {cc, big}} {
		got, err := tc.c.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if !equalMessages(got, tc.want) {
			t.Errorf("Recv %s: message differs from what was sent", got.Type())
		}
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("Send: %v", err)
		}
	}
}
