package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// nonASCIIDocs are documents of the test corpus with CJK, emoji (a ZWJ
// sequence and a flag), combining marks and other non-ASCII text among
// their words, under ids with '#' in them ("x" and "x#1": their chunk_ids
// must still differ).
func nonASCIIDocs(n int) []map[string]any {
	extra := []string{"日本語の文章です。", "👩‍🔬 🇯🇵 😀", "e\u0301te\u0301 cafe\u0301 n\u0303", "naïve Ærøskøbing Ελληνικά", "한국어 텍스트"}
	var docs []map[string]any
	for i, d := range testmodels.Corpus(n) {
		words := strings.Fields(d.Text)
		var b strings.Builder
		for k, w := range words {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			if k%7 == 3 {
				b.WriteString(" " + extra[(i+k)%len(extra)])
			}
		}
		id := d.ID
		switch i {
		case 0:
			id = "x"
		case 1:
			id = "x#1"
		case 2:
			id = "#5" + "#a" // looks like neither a fallback id nor a chunk_id
		}
		docs = append(docs, map[string]any{"_id": id, "title": d.Title, "text": b.String()})
	}
	return docs
}

// checkWithText checks every row of an output made with --with-text from
// docs (text field "text" only): its text is the document's text's bytes
// [byte_start, byte_end), valid UTF-8; its code point offsets select the
// same text; its chunk_id is ID#CHUNK and unique; the chunks cover the
// text. It returns the number of chunks whose text is not ASCII.
func checkWithText(t *testing.T, docs []map[string]any, rows []outRow) int {
	t.Helper()
	texts := map[string]string{}
	for _, d := range docs {
		texts[d["_id"].(string)] = d["text"].(string)
	}
	seen := map[string]bool{}
	nonASCII := 0
	for _, r := range rows {
		text, ok := texts[r.ID]
		if !ok {
			t.Fatalf("row of an unknown id %q", r.ID)
		}
		if r.ByteStart < 0 || r.ByteStart > r.ByteEnd || int(r.ByteEnd) > len(text) {
			t.Fatalf("%s chunk %d: bytes [%d, %d) outside a text of %d bytes", r.ID, r.Chunk, r.ByteStart, r.ByteEnd, len(text))
		}
		if want := text[r.ByteStart:r.ByteEnd]; r.Text != want || !utf8.ValidString(r.Text) {
			t.Fatalf("%s chunk %d: text %q; want the bytes [%d, %d) %q", r.ID, r.Chunk, r.Text, r.ByteStart, r.ByteEnd, want)
		}
		runes := []rune(text)
		if r.CPStart < 0 || r.CPStart > r.CPEnd || int(r.CPEnd) > len(runes) {
			t.Fatalf("%s chunk %d: code points [%d, %d) outside a text of %d", r.ID, r.Chunk, r.CPStart, r.CPEnd, len(runes))
		}
		if got := string(runes[r.CPStart:r.CPEnd]); got != r.Text {
			t.Fatalf("%s chunk %d: code points [%d, %d) give %q; want %q", r.ID, r.Chunk, r.CPStart, r.CPEnd, got, r.Text)
		}
		if want := output.ChunkID(r.ID, r.Chunk); r.ChunkID != want || seen[r.ChunkID] {
			t.Fatalf("%s chunk %d: chunk_id %q (seen before: %v); want %q, once", r.ID, r.Chunk, r.ChunkID, seen[r.ChunkID], want)
		}
		seen[r.ChunkID] = true
		if len(r.Text) != utf8.RuneCountInString(r.Text) {
			nonASCII++
		}
	}
	for id, chunks := range rowsByID(rows) {
		if len(chunks) < 2 {
			t.Fatalf("%s: %d chunks; want several", id, len(chunks))
		}
		text, end := texts[id], int32(0)
		for _, c := range chunks {
			if gap := text[end:c.ByteStart]; c.ByteStart < end || strings.TrimFunc(gap, dropped) != "" {
				t.Fatalf("%s chunk %d: byte_start %d after %d leaves %q uncovered", id, c.Chunk, c.ByteStart, end, gap)
			}
			end = c.ByteEnd
		}
		if rest := text[end:]; strings.TrimFunc(rest, dropped) != "" {
			t.Fatalf("%s: %q after the last chunk is not covered", id, rest)
		}
	}
	return nonASCII
}

// dropped reports whether the BERT tokenizer drops r: white space, and
// combining marks, which its accent stripping removes.
func dropped(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Mn, r) }

// TestEmbedWithText: --with-text on non-ASCII input, in Arrow, Parquet and
// from a --previous output written without text (the copied rows get
// their text and code points from the documents), and the start line and
// the title warning.
func TestEmbedWithText(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	docs := nonASCIIDocs(20)
	writeJSONL(t, in, docs)
	model := tinyModel(t)
	common := []string{"-m", model, "--chunk-tokens", "12", "--workers", "1", "--threads", "1"}
	embed := func(t *testing.T, out string, args ...string) ([]outRow, embedResult) {
		t.Helper()
		res := runSynapse(t, nil, append(append([]string{"embed", in, "-o", out}, common...), args...)...)
		res.wantCode(t, exitOK)
		_, rows := readOutput(t, out)
		return rows, res
	}
	want, res := embed(t, filepath.Join(dir, "t.arrow"), "--with-text")
	if n := checkWithText(t, docs, want); n < 10 {
		t.Errorf("%d chunks hold non-ASCII text; want at least 10", n)
	}

	t.Run("start line and title warning", func(t *testing.T) {
		if !strings.Contains(res.stderr, "text fields text, chunks of 12 tokens") || !strings.Contains(res.stderr, ", with text") {
			t.Errorf("stderr does not name the text fields and --with-text:\n%s", res.stderr)
		}
		hint := "--text-field title --text-field text"
		if n := strings.Count(res.stderr, hint); n != 1 {
			t.Errorf("stderr says %q %d times; want once:\n%s", hint, n, res.stderr)
		}
		_, res := embed(t, filepath.Join(dir, "tt.arrow"), "--text-field", "title", "--text-field", "text", "-q")
		if strings.Contains(res.stderr, "not embedded") {
			t.Errorf("a warning with the title embedded:\n%s", res.stderr)
		}
	})

	t.Run("parquet", func(t *testing.T) {
		got, _ := embed(t, filepath.Join(dir, "t.parquet"), "--with-text", "-q")
		sameRows(t, "parquet vs arrow", got, want)
	})

	t.Run("without text", func(t *testing.T) {
		got, _ := embed(t, filepath.Join(dir, "n.arrow"), "-q")
		for i := range got {
			if got[i].Text != "" {
				t.Fatalf("row %d: text %q without --with-text", i, got[i].Text)
			}
			got[i].Text = want[i].Text
		}
		sameRows(t, "without text vs with", got, want)
	})

	t.Run("previous without text", func(t *testing.T) {
		prev := filepath.Join(dir, "n.parquet")
		embed(t, prev, "-q")
		got, res := embed(t, filepath.Join(dir, "p.arrow"), "--with-text", "--previous", prev)
		if !strings.Contains(res.stdout, "20 reused") {
			t.Errorf("summary does not say 20 reused:\n%s", res.stdout)
		}
		sameRows(t, "copied from a previous output without text", got, want)
	})
}
