package tokenize

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/gguf"
)

// spTestVocab loads a vocabulary GGUF from the shared fixtures.
func spTestVocab(t testing.TB, name string) *Vocab {
	t.Helper()
	path := generatedSPM(t)
	if name != genSPM {
		path = testenv.Fixture(t, "vocab", name)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != KindSPM && v.Kind != KindUGM {
		t.Fatalf("%s: tokenizer kind %q is not SentencePiece", name, v.Kind)
	}
	return v
}

// spCase is one llama.cpp tokenizer test case.
type spCase struct {
	text string
	want []int32
}

// spReadCases reads a vocabulary's .inp/.out pair: cases separated by
// "\n__ggml_vocab_test__\n" (the file ends with one), one line of ids each.
func spReadCases(t testing.TB, name string) []spCase {
	t.Helper()
	inp, err := os.ReadFile(testenv.Fixture(t, "vocab", name+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(testenv.Fixture(t, "vocab", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(string(inp), sep)
	if texts[len(texts)-1] != "" {
		t.Fatalf("%s.inp does not end with the separator", name)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d inputs but %d outputs", name, len(texts), len(lines))
	}
	cases := make([]spCase, len(texts))
	for i, text := range texts {
		cases[i].text = text
		for _, field := range strings.Fields(lines[i]) {
			id, err := strconv.ParseInt(field, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", name, i+1, err)
			}
			cases[i].want = append(cases[i].want, int32(id))
		}
	}
	return cases
}

// spTokenize runs a fragmenter over the whole text as one fragment: what
// llama.cpp does without special-token parsing when the vocabulary has no
// user-defined tokens.
func spTokenize(f fragmenter, text string) []Token {
	return f.appendTokens(nil, text, 0, true)
}

func spIDs(toks []Token) []int32 {
	ids := make([]int32, len(toks))
	for i, tk := range toks {
		ids[i] = tk.ID
	}
	return ids
}

// spCheckConformance compares a fragmenter with llama.cpp's recorded output.
func spCheckConformance(t *testing.T, name string, newFrag func(*Vocab) (fragmenter, error)) {
	v := spTestVocab(t, name)
	for i, a := range v.Attrs {
		if a == TokenUserDefined {
			t.Fatalf("%s: token %d is user-defined: the whole-text fragment is not what llama.cpp tokenizes", name, i)
		}
	}
	f, err := newFrag(v)
	if err != nil {
		t.Fatal(err)
	}
	cases := spReadCases(t, name)
	pass := 0
	for i, c := range cases {
		toks := spTokenize(f, c.text)
		if got := spIDs(toks); !slices.Equal(got, c.want) {
			t.Errorf("case %d %q: got %v; want %v", i, c.text, got, c.want)
			continue
		}
		spCheckSpans(t, c.text, 0, toks, len(v.Tokens))
		pass++
	}
	t.Logf("%s: %d/%d cases equal llama.cpp", name, pass, len(cases))
}

// spCheckSpans checks that spans lie in text[off:], are ordered and do not
// overlap, and that ids are in the vocabulary.
func spCheckSpans(t testing.TB, text string, off int, toks []Token, nVocab int) {
	t.Helper()
	prev := off
	for i, tk := range toks {
		if tk.ID < 0 || int(tk.ID) >= nVocab {
			t.Fatalf("%q: token %d id %d outside the vocabulary of %d", text, i, tk.ID, nVocab)
		}
		if int(tk.Start) < prev || tk.End < tk.Start || int(tk.End) > off+len(text) {
			t.Fatalf("%q: token %d span [%d,%d) after end %d; want ordered spans within [%d,%d]",
				text, i, tk.Start, tk.End, prev, off, off+len(text))
		}
		prev = int(tk.End)
	}
}

// spPiece is a token's text with "▁" read as a space and byte tokens as
// their byte, as llama.cpp's token_to_piece.
func spPiece(v *Vocab, id int32) string {
	s := v.Tokens[id]
	if v.Attrs != nil && v.Attrs[id] == TokenByte && len(s) == 6 {
		b, err := strconv.ParseUint(s[3:5], 16, 8)
		if err == nil {
			return string([]byte{byte(b)})
		}
	}
	return strings.ReplaceAll(s, spmSpace, " ")
}

func TestSPMConformance(t *testing.T) {
	spCheckConformance(t, "ggml-vocab-llama-spm.gguf", newSPMFragmenter)
}

// TestSPMSpans checks that each token's piece is the text its span covers
// (the prepended space aside), so the pieces rebuild the input.
func TestSPMSpans(t *testing.T) {
	v := spTestVocab(t, "ggml-vocab-llama-spm.gguf")
	f, err := newSPMFragmenter(v)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"Hello world",
		"  leading and trailing spaces  ",
		"naïve café — 東京 🦙 emoji",
		"\x00\x01 control \t tabs\nnewlines",
		"ǅ unusual 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
	}
	for _, c := range spReadCases(t, "ggml-vocab-llama-spm.gguf") {
		texts = append(texts, c.text)
	}
	for _, text := range texts {
		for _, first := range []bool{true, false} {
			const off = 7
			toks := f.appendTokens(nil, text, off, first)
			spCheckSpans(t, text, off, toks, len(v.Tokens))
			var got strings.Builder
			pieces := ""
			for i, tk := range toks {
				p := spPiece(v, tk.ID)
				pieces += p
				if i == 0 && first && v.AddSpacePrefix {
					p = strings.TrimPrefix(p, " ")
				}
				if span := text[tk.Start-off : tk.End-off]; span != p && !spByteSplit(v, tk.ID) {
					t.Errorf("%q first=%v: token %d %q has span %q", text, first, i, p, span)
				}
				got.WriteString(text[tk.Start-off : tk.End-off])
			}
			if got.String() != text {
				t.Errorf("%q first=%v: spans rebuild %q", text, first, got.String())
			}
			want := text
			if first && text != "" {
				want = " " + text
			}
			if pieces != want {
				t.Errorf("%q first=%v: pieces rebuild %q; want %q", text, first, pieces, want)
			}
		}
	}
}

// spByteSplit reports whether id is a byte token; a byte token inside a
// multi-byte "▁" has a span of zero or one whole space.
func spByteSplit(v *Vocab, id int32) bool {
	return v.Attrs != nil && v.Attrs[id] == TokenByte
}

// TestSentencePieceAfterSpecial checks the driver's use of the space prefix
// with special tokens: llama.cpp's SPM prefixes only the fragment that starts
// the input or follows a special token, which here is every fragment; UGM
// prefixes every fragment whatever precedes it.
func TestSentencePieceAfterSpecial(t *testing.T) {
	for _, tt := range []struct {
		name    string
		newFrag func(*Vocab) (fragmenter, error)
	}{
		{"ggml-vocab-llama-spm.gguf", newSPMFragmenter},
		{ugmTestVocab, newUGMFragmenter},
	} {
		v := spTestVocab(t, tt.name)
		tok, err := New(v)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := tt.newFrag(v)
		if err != nil {
			t.Fatal(err)
		}
		const text = "Hello<s>world</s>again"
		var want []Token
		want = fr.appendTokens(want, "Hello", 0, true)
		want = append(want, Token{ID: 1, Start: 5, End: 8})
		want = fr.appendTokens(want, "world", 8, true)
		want = append(want, Token{ID: 2, Start: 13, End: 17})
		want = fr.appendTokens(want, "again", 17, true)
		got := tok.Tokenize(text, Options{ParseSpecial: true}).Tokens
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q: got %v; want %v", tt.name, text, got, want)
		}
		// Without ParseSpecial the text is one fragment.
		got = tok.Tokenize(text, Options{}).Tokens
		if want := fr.appendTokens(nil, text, 0, true); !slices.Equal(got, want) {
			t.Errorf("%s: %q without ParseSpecial: got %v; want %v", tt.name, text, got, want)
		}
	}
}

func TestSPMAddSpacePrefix(t *testing.T) {
	v := spTestVocab(t, "ggml-vocab-llama-spm.gguf")
	tests := []struct {
		prefix, first bool
		text          string
		want          string // pieces joined by |
	}{
		{true, true, "Hello", "▁Hello"},
		{true, false, "Hello", "Hello"},
		{false, true, "Hello", "Hello"},
		{true, true, " Hello", "▁|▁Hello"},
	}
	for _, tt := range tests {
		vv := *v
		vv.AddSpacePrefix = tt.prefix
		f, err := newSPMFragmenter(&vv)
		if err != nil {
			t.Fatal(err)
		}
		var pieces []string
		for _, tk := range f.appendTokens(nil, tt.text, 0, tt.first) {
			pieces = append(pieces, v.Tokens[tk.ID])
		}
		if got := strings.Join(pieces, "|"); got != tt.want {
			t.Errorf("prefix=%v first=%v %q: got %s; want %s", tt.prefix, tt.first, tt.text, got, tt.want)
		}
	}
}

// TestSPMByteFallback checks characters outside the vocabulary: each byte
// becomes its <0xXX> token with its own one-byte span.
func TestSPMByteFallback(t *testing.T) {
	v := spTestVocab(t, genSPM)
	f, err := newSPMFragmenter(v)
	if err != nil {
		t.Fatal(err)
	}
	text := "\U0001F999" // not in the vocabulary
	toks := f.appendTokens(nil, text, 0, false)
	want := []Token{{ID: 3 + 0xF0, Start: 0, End: 1}, {ID: 3 + 0x9F, Start: 1, End: 2},
		{ID: 3 + 0xA6, Start: 2, End: 3}, {ID: 3 + 0x99, Start: 3, End: 4}}
	if !slices.Equal(toks, want) {
		t.Errorf("%q: got %v; want %v", text, toks, want)
	}
}

// TestSPMInvalidUTF8 feeds bytes that are not UTF-8: no panic, ids in the
// vocabulary, ordered spans.
func TestSPMInvalidUTF8(t *testing.T) {
	v := spTestVocab(t, genSPM)
	f, err := newSPMFragmenter(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"\xff", "a\xc3", "\xe2\x96", "\x80\x80 x", "\xf0\x9f\x99", " \xc0\xaf "} {
		if utf8.ValidString(text) {
			t.Fatalf("%q is valid UTF-8", text)
		}
		toks := f.appendTokens(nil, text, 0, true)
		spCheckSpans(t, text, 0, toks, len(v.Tokens))
		if len(toks) == 0 {
			t.Errorf("%q: no tokens", text)
		}
	}
}

// FuzzSPM: arbitrary bytes never panic, and give in-vocabulary ids with
// ordered spans inside the fragment.
func FuzzSPM(f *testing.F) {
	v := spTestVocab(f, genSPM)
	fr, err := newSPMFragmenter(v)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Hello world", true)              // plain words, space prefix
	f.Add("   ", false)                     // spaces only, no prefix
	f.Add("", true)                         // empty fragment
	f.Add("naïve 東京 🦙", true)               // multi-byte characters, byte fallback
	f.Add("\xff\xfe\x80 \xc3", true)        // invalid UTF-8: stray and truncated sequences
	f.Add("\xe2\x96\x81\xe2\x96", false)    // a literal ▁ then a truncated one
	f.Add("\t\n\r\x00 mixed\u00a0ws", true) // control characters and a no-break space
	whole := spmWholeText(f, v)
	f.Fuzz(func(t *testing.T, text string, first bool) {
		toks := fr.appendTokens(nil, text, 3, first)
		spCheckSpans(t, text, 3, toks, len(v.Tokens))
		if want := whole.appendTokens(nil, text, 3, first); !slices.Equal(toks, want) {
			t.Errorf("%q: word by word %v; whole text %v", text, toks, want)
		}
	})
}

// spmWholeText is an SPM fragmenter that merges the whole text in one queue,
// as llama.cpp does, without the word split and its cache.
func spmWholeText(t testing.TB, v *Vocab) *spmFragmenter {
	fr, err := newSPMFragmenter(v)
	if err != nil {
		t.Fatal(err)
	}
	f := fr.(*spmFragmenter)
	f.wordSafe = false
	return f
}

// TestSPMWordSplit checks that merging word by word, cached, gives what one
// queue over the whole text gives, on the scifact corpus (twice, so the
// second pass comes from the cache).
func TestSPMWordSplit(t *testing.T) {
	v := spTestVocab(t, "ggml-vocab-llama-spm.gguf")
	fr, err := newSPMFragmenter(v)
	if err != nil {
		t.Fatal(err)
	}
	if !fr.(*spmFragmenter).wordSafe {
		t.Fatal("llama vocabulary: wordSafe is false; want true")
	}
	whole := spmWholeText(t, v)
	docs, _ := spScifact(t)
	if testing.Short() {
		docs = docs[:100]
	}
	for pass := range 2 {
		for i, d := range docs[:min(len(docs), 300)] {
			got := fr.appendTokens(nil, d, 0, true)
			if want := whole.appendTokens(nil, d, 0, true); !slices.Equal(got, want) {
				t.Fatalf("pass %d doc %d: word by word differs from whole text", pass, i)
			}
		}
	}
}

func TestSPMWordSafe(t *testing.T) {
	tests := []struct {
		tokens []string
		want   bool
	}{
		{[]string{"▁the", "▁▁", "▁▁▁▁", "a", "<0x20>"}, true},
		{[]string{"▁the", "of▁the"}, false},
		{[]string{"▁▁x▁"}, false},
	}
	for _, tt := range tests {
		if got := spmWordSafe(tt.tokens); got != tt.want {
			t.Errorf("spmWordSafe(%q): got %v; want %v", tt.tokens, got, tt.want)
		}
	}
}

// spScifact reads the scifact corpus as title+"\n"+text documents.
func spScifact(b testing.TB) ([]string, int) {
	b.Helper()
	fh, err := os.Open(testenv.Fixture(b, "corpora", "scifact", "corpus.jsonl"))
	if err != nil {
		b.Skip(err)
	}
	defer fh.Close()
	var docs []string
	total := 0
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var d struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			b.Fatal(err)
		}
		doc := d.Title + "\n" + d.Text
		docs = append(docs, doc)
		total += len(doc)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return docs, total
}

// spBench tokenizes the scifact corpus once per iteration on one goroutine
// and reports tokens/s next to MB/s.
func spBench(b *testing.B, f fragmenter) {
	docs, total := spScifact(b)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	var out []Token
	ntok := 0
	b.ResetTimer()
	for b.Loop() {
		for _, d := range docs {
			out = f.appendTokens(out[:0], d, 0, true)
			ntok += len(out)
		}
	}
	b.ReportMetric(float64(ntok)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkSPMScifact: go test ./tokenize -run '^$' -bench SPMScifact
func BenchmarkSPMScifact(b *testing.B) {
	f, err := newSPMFragmenter(spTestVocab(b, "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	spBench(b, f)
}

// TestSentencePieceConcurrent tokenizes from several goroutines at once (run
// with -race): results equal the sequential ones, the per-call buffers and
// SPM's word caches being private to each call.
func TestSentencePieceConcurrent(t *testing.T) {
	docs, _ := spScifact(t)
	docs = docs[:64]
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", ugmTestVocab} {
		tok, err := New(spTestVocab(t, name))
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]Token, len(docs))
		for i, d := range docs {
			want[i] = tok.Tokenize(d, Options{}).Tokens
		}
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for g := range 4 {
			wg.Go(func() {
				for k := range docs {
					i := (k + 16*g) % len(docs)
					if got := tok.Tokenize(docs[i], Options{}).Tokens; !slices.Equal(got, want[i]) {
						errs <- fmt.Sprintf("%s: goroutine %d doc %d differs", name, g, i)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}
