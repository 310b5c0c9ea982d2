package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/corpus"
)

// smolLM2 is SmolLM2-135M-Instruct (Q4_1), as `make real-models` fetches it.
const smolLM2 = "SmolLM2-135M-Instruct-Q4_1/SmolLM2-135M-Instruct.Q4_1.gguf"

// realGenerateRows is how many SciFact titles the real-model generate
// checks prompt with.
const realGenerateRows = 200

// realPrompts writes the first n SciFact titles as prompts and returns the
// input's path.
func realPrompts(t *testing.T, dir, question string, n int) string {
	t.Helper()
	r, err := corpus.Open([]string{testenv.Fixture(t, "corpora", "scifact", "corpus.jsonl")}, corpus.ReadOptions{TextFields: []string{"title"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []map[string]any
	for len(rows) < n {
		d, err := r.Next()
		if err != nil {
			t.Fatalf("reading SciFact: %v", err)
		}
		rows = append(rows, map[string]any{"id": d.ID, "text": question + "\n\n" + d.Text})
	}
	in := filepath.Join(dir, "prompts.jsonl")
	writeJSONL(t, in, rows)
	return in
}

// TestRealGenerate runs SmolLM2-135M-Instruct over 200 SciFact titles in
// its own chat template, constrained by --choices and by a JSON schema:
// every output is valid (checked here, not only by synapse), and the
// output is the same bytes for 1 and 2 workers and for a rerun.
func TestRealGenerate(t *testing.T) {
	model := testenv.RealModel(t, smolLM2)
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"topic":{"type":"string","enum":["medicine","biology","chemistry","other"]},"confidence":{"type":"integer"}},"required":["topic","confidence"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, question string
		args           []string
		valid          func(text string) error
	}{
		{"choices", "Is this study about humans? Answer yes or no.", []string{"--choices", "yes,no"}, func(s string) error {
			if s != "yes" && s != "no" {
				return fmt.Errorf("%q is not one of the choices yes, no", s)
			}
			return nil
		}},
		{"json-schema", "Classify the topic of this title as JSON with a topic and a confidence from 0 to 100.", []string{"--json-schema", schema, "--max-tokens", "48"}, validTopic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := realPrompts(t, dir, tc.question, realGenerateRows)
			var first []byte
			for _, run := range []struct{ name, workers string }{{"1 worker", "1"}, {"2 workers", "2"}, {"rerun", "1"}} {
				out := filepath.Join(dir, tc.name+"-"+run.name+".jsonl")
				args := append([]string{"generate", in, "-m", model, "-o", out, "--template", "chat", "--workers", run.workers, "--threads", "1", "-q"}, tc.args...)
				runSynapseWithin(t, 15*time.Minute, nil, args...).wantCode(t, exitOK)
				rows := readGenerated(t, out)
				if len(rows) != realGenerateRows {
					t.Fatalf("%s: %d rows; want %d", run.name, len(rows), realGenerateRows)
				}
				for _, r := range rows {
					if r.FinishReason == "length" {
						t.Errorf("%s: row %s stopped at --max-tokens: %q", run.name, r.ID, r.Text)
					} else if err := tc.valid(r.Text); err != nil {
						t.Errorf("%s: row %s: %v", run.name, r.ID, err)
					}
				}
				data, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = data
				} else if !bytes.Equal(data, first) {
					t.Errorf("%s: the output differs from the first run's", run.name)
				}
			}
		})
	}
}

// validTopic checks an output against TestRealGenerate's schema, apart
// from synapse's own validation.
func validTopic(s string) error {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%q is not JSON: %v", s, err)
	}
	topic, ok := v["topic"].(string)
	if !ok || !slices.Contains([]string{"medicine", "biology", "chemistry", "other"}, topic) {
		return fmt.Errorf("%q: topic is not one of the enum", s)
	}
	n, ok := v["confidence"].(json.Number)
	if _, err := n.Int64(); !ok || err != nil {
		return fmt.Errorf("%q: confidence is not an integer", s)
	}
	return nil
}
