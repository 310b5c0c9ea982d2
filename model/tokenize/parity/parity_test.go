package parity

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/tokenize"
	"github.com/synapse-embed/synapse/supervise"
	"github.com/synapse-embed/synapse/wire"
)

// lanes is the number of workers and of goroutines feeding them.
const lanes = 2

// requestTimeout bounds one TOKENIZE (a deadline, not a timed assertion).
const requestTimeout = time.Minute

// maxReported is how many mismatches of one vocabulary are described in full.
const maxReported = 5

// TestWorkerParity tokenizes every text with the Go tokenizer and with
// llama.cpp in a real `synapse worker` (TOKENIZE), for every vocabulary and
// every combination of AddSpecial and ParseSpecial, and wants identical ids.
// A text with invalid UTF-8 goes to the worker twice: as the Go tokenizer
// repaired it (Result.Text), and raw, which TOKENIZE's JSON carries as
// U+FFFD per invalid byte, the same repair.
func TestWorkerParity(t *testing.T) {
	pool := newPool(t)
	texts := corpusTexts(t)
	for i, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			tok, err := tokenize.Load(tg.path)
			if err != nil {
				t.Fatalf("tokenize.Load: %v", err)
			}
			ctx := context.Background()
			loaded, err := pool.Load(ctx, wire.Load{ArtifactPath: tg.path, ArtifactDigest: digest(t, tg.path),
				Format: "gguf", RuntimeConfig: tg.config})
			if err != nil {
				t.Fatalf("worker LOAD: %v", err)
			}
			all := append(slices.Clip(texts), generated(t, tok, len(texts), uint64(i)+1)...)
			c := &checker{t: t, tok: tok, name: tg.name, pool: pool, ref: loaded.ModelRef}
			if err := c.run(ctx, all); err != nil {
				t.Fatal(err)
			}
			c.report(len(all))
		})
	}
}

// newPool starts `synapse worker` processes (testenv.Binary fails the test
// when synapse does not build).
func newPool(t *testing.T) *supervise.Pool {
	t.Helper()
	lib := testenv.LlamaLib(t)
	testenv.Fixtures(t)
	dir, err := os.MkdirTemp("", "par") // socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pool, err := supervise.NewPool(context.Background(), supervise.Config{
		Command:      []string{testenv.Binary(t), "worker"},
		Env:          []string{"SYNAPSE_LLAMA_LIB=" + lib},
		Workers:      lanes,
		RuntimeDir:   dir,
		PingInterval: -1,
	})
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Errorf("pool.Close: %v", err)
		}
	})
	return pool
}

// checker compares one vocabulary's tokenizers over many texts.
type checker struct {
	t    *testing.T
	tok  tokenize.Tokenizer
	name string
	pool *supervise.Pool
	ref  string

	mu         sync.Mutex
	mismatches []mismatch
	compared   int
}

type mismatch struct {
	Vocab        string  `json:"vocab"`
	Text         string  `json:"text"`
	Raw          bool    `json:"raw"` // Text is the raw input with invalid UTF-8, not Result.Text
	AddSpecial   bool    `json:"add_special"`
	ParseSpecial bool    `json:"parse_special"`
	Go           []int32 `json:"go"`
	Llama        []int32 `json:"llama"`
	res          tokenize.Result
}

// run compares every text under every option set, lanes texts at a time.
func (c *checker) run(ctx context.Context, texts []string) error {
	g, ctx := errgroup.WithContext(ctx)
	for lane := range lanes {
		g.Go(func() error {
			for i := lane; i < len(texts); i += lanes {
				for _, opt := range optionSets {
					if err := c.compare(ctx, texts[i], opt); err != nil {
						return fmt.Errorf("text %d %+v: %w", i, opt, err)
					}
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func (c *checker) compare(ctx context.Context, text string, opt tokenize.Options) error {
	res := c.tok.Tokenize(text, opt)
	goIDs := res.IDs()
	sent := []string{res.Text}
	if res.Replaced > 0 {
		sent = append(sent, text)
	}
	for _, s := range sent {
		resp, err := c.pool.Do(ctx, &wire.Tokenize{ModelRef: c.ref, Text: s,
			AddSpecial: opt.AddSpecial, ParseSpecial: opt.ParseSpecial}, requestTimeout)
		if err != nil {
			return err
		}
		toks, ok := resp.(*wire.Tokens)
		if !ok {
			return fmt.Errorf("worker answered %T; want *wire.Tokens", resp)
		}
		c.mu.Lock()
		c.compared++
		if !slices.Equal(goIDs, toks.IDs) {
			c.mismatches = append(c.mismatches, mismatch{Vocab: c.name, Text: s, Raw: s != res.Text,
				AddSpecial: opt.AddSpecial, ParseSpecial: opt.ParseSpecial, Go: goIDs, Llama: toks.IDs, res: res})
		}
		c.mu.Unlock()
	}
	return nil
}

// report fails the test with the first mismatches described in full, and
// dumps all of them to $SYNAPSE_PARITY_DUMP when set.
func (c *checker) report(texts int) {
	c.t.Logf("%d texts, %d comparisons, %d mismatches", texts, c.compared, len(c.mismatches))
	if len(c.mismatches) == 0 {
		return
	}
	slices.SortFunc(c.mismatches, func(a, b mismatch) int { return len(a.Text) - len(b.Text) })
	for i, m := range c.mismatches[:min(maxReported, len(c.mismatches))] {
		c.t.Errorf("mismatch %d of %d:\n%s", i+1, len(c.mismatches), describe(c.tok.Vocab(), m))
	}
	if path := os.Getenv(envDump); path != "" {
		if err := dump(path, c.mismatches); err != nil {
			c.t.Error(err)
		}
	}
}

// describe shows where two id sequences part: the text around it and the
// tokens on either side, with their vocabulary texts.
func describe(v *tokenize.Vocab, m mismatch) string {
	k := 0
	for k < len(m.Go) && k < len(m.Llama) && m.Go[k] == m.Llama[k] {
		k++
	}
	var b strings.Builder
	text := m.res.Text
	fmt.Fprintf(&b, "add_special=%t parse_special=%t raw=%t, %d bytes of text: ids part at index %d (go %d ids, llama.cpp %d)\n",
		m.AddSpecial, m.ParseSpecial, m.Raw, len(text), k, len(m.Go), len(m.Llama))
	if k < len(m.res.Tokens) {
		at := int(m.res.Tokens[k].Start)
		fmt.Fprintf(&b, "  text around byte %d: %q\n", at, text[max(0, at-24):min(len(text), at+40)])
	}
	if len(m.Text) <= 200 {
		fmt.Fprintf(&b, "  text sent: %q\n", m.Text)
	}
	fmt.Fprintf(&b, "  go:        %s\n  llama.cpp: %s", window(v, m.Go, k), window(v, m.Llama, k))
	return b.String()
}

// window renders ids[k-3:k+6] as id:"piece".
func window(v *tokenize.Vocab, ids []int32, k int) string {
	var parts []string
	for i := max(0, k-3); i < min(len(ids), k+6); i++ {
		piece := "?"
		if ids[i] >= 0 && int(ids[i]) < len(v.Tokens) {
			piece = fmt.Sprintf("%q", v.Tokens[ids[i]])
		}
		mark := ""
		if i == k {
			mark = ">"
		}
		parts = append(parts, fmt.Sprintf("%s%d:%s", mark, ids[i], piece))
	}
	return strings.Join(parts, " ")
}

func dump(path string, ms []mismatch) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("parity: dump: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, m := range ms {
		if err := enc.Encode(m); err != nil {
			f.Close()
			return fmt.Errorf("parity: dump: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("parity: dump: %w", err)
	}
	return nil
}
