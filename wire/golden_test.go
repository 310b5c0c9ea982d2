package wire

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden pins the exact bytes Send writes for a few messages. The golden
// files are hex dumps; run `go test ./wire/ -run TestGolden -update` after a
// deliberate change of the encoding.
func TestGolden(t *testing.T) {
	tests := []struct {
		file string
		m    Message
	}{
		{"hello.golden", &Hello{V: Version, Nonce: "4f1c", Engine: EngineInfo{Name: "llama.cpp", Version: "b6000", BuildFlags: "cpu"}, PID: 1234, MaxFrame: DefaultMaxFrame}},
		{"ping.golden", &Ping{ReqID: 7}},
		{"embed_batch.golden", &EmbedBatch{ReqID: 2, ModelRef: "m1", Pooling: "mean", Normalize: true,
			Items: []Item{{ID: 0, NTokens: 2}, {ID: 1, NTokens: 1}}, IDs: []int32{101, -1, 102}}},
		{"vectors.golden", &Vectors{ReqID: 2, Dims: 2, N: 1, Data: []float32{1, -0.5}}},
		{"quantize.golden", &Quantize{ReqID: 9, ArtifactPath: "/m/src.gguf", ArtifactDigest: "sha256:00ff",
			OutPath: "/m/tmp/out.gguf", FType: "q8_0", Threads: 2}},
		{"quantized.golden", &Quantized{ReqID: 9, OutDigest: "sha256:0a1b", OutSize: 25165824, MS: 1250}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var buf bytes.Buffer
			if err := NewConn(&buf).Send(tt.m); err != nil {
				t.Fatal(err)
			}
			got := hex.Dump(buf.Bytes())
			path := filepath.Join("testdata", tt.file)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s: got\n%s\nwant\n%s", tt.file, got, want)
			}
			// The golden bytes decode to the message.
			raw, err := hex.DecodeString(hexOnly(string(want)))
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewConn(bytes.NewBuffer(raw)).Recv()
			if err != nil {
				t.Fatalf("Recv(golden): %v", err)
			}
			if !equalMessages(m, tt.m) {
				t.Errorf("Recv(golden) = %#v; want %#v", m, tt.m)
			}
		})
	}
}

// hexOnly extracts the hex bytes from a hex.Dump.
func hexOnly(dump string) string {
	var b bytes.Buffer
	for _, line := range bytes.Split([]byte(dump), []byte("\n")) {
		if len(line) < 10 {
			continue
		}
		hexPart := line[10:min(len(line), 59)] // between the offset and the |text|
		b.Write(bytes.ReplaceAll(hexPart, []byte(" "), nil))
	}
	return b.String()
}
