package output

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/synapse-embed/synapse/io/vector"
)

func TestChunkID(t *testing.T) {
	for _, tc := range []struct {
		id    string
		chunk int32
		want  string
	}{
		{"doc", 0, "doc#0"},
		{"a#b", 12, "a#b#12"},
		{"#17", 3, "#17#3"}, // a fallback id
		{"x#1", 2, "x#1#2"}, // not the chunk_id of ("x", 1)
		{"", 0, "#0"},       // no reader gives an empty id; the rule still holds
		{"ü#é", 7, "ü#é#7"}, // non-ASCII
	} {
		got := ChunkID(tc.id, tc.chunk)
		if got != tc.want {
			t.Errorf("ChunkID(%q, %d): got %q; want %q", tc.id, tc.chunk, got, tc.want)
		}
		id, chunk, err := ParseChunkID(got)
		if err != nil || id != tc.id || chunk != tc.chunk {
			t.Errorf("ParseChunkID(%q): got %q, %d, %v; want %q, %d", got, id, chunk, err, tc.id, tc.chunk)
		}
	}
	for _, bad := range []string{"doc", "doc#", "doc#x", "doc#-1", "doc#01", "doc#1 ", "doc#99999999999"} {
		if _, _, err := ParseChunkID(bad); err == nil {
			t.Errorf("ParseChunkID(%q): got no error; want one", bad)
		}
	}
}

func TestFillSpans(t *testing.T) {
	text := "日本語のテキスト 👩‍🔬 e\u0301te\u0301 naïve ok"
	emoji := strings.Index(text, "👩")
	for _, tc := range []struct {
		name       string
		start, end int32
		wantText   string
	}{
		{"all", 0, int32(len(text)), text},
		{"CJK", 3, 9, "本語"},
		{"emoji ZWJ sequence", int32(emoji), int32(emoji + len("👩‍🔬")), "👩‍🔬"},
		{"combining marks", int32(strings.Index(text, "e\u0301t")), int32(strings.Index(text, " naïve")), "e\u0301te\u0301"},
		{"inside a character widens", 4, 8, "本語"},                           // bytes 4 and 8 are inside 本 and 語
		{"inside an emoji widens", int32(emoji + 1), int32(emoji + 2), "👩"}, // a byte-fallback token
		{"empty", 0, 0, ""},
		{"end", int32(len(text)), int32(len(text)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := EmbedRows{{ID: "d", ByteStart: tc.start, ByteEnd: tc.end}}
			if err := FillSpans(text, rows, true); err != nil {
				t.Fatal(err)
			}
			r := rows[0]
			if r.Text != tc.wantText || r.Text != text[r.ByteStart:r.ByteEnd] {
				t.Errorf("text: got %q (bytes [%d, %d)); want %q", r.Text, r.ByteStart, r.ByteEnd, tc.wantText)
			}
			runes := []rune(text)
			if got, want := string(runes[r.CPStart:r.CPEnd]), r.Text; got != want {
				t.Errorf("code points [%d, %d): got %q; want %q", r.CPStart, r.CPEnd, got, want)
			}
			if want := int32(utf8.RuneCountInString(text[:r.ByteStart])); r.CPStart != want {
				t.Errorf("codepoint_start: got %d; want %d", r.CPStart, want)
			}
		})
	}
}

// TestFillSpansRows fills overlapping chunks in one pass and in an order
// that goes back, and refuses a range outside the text.
func TestFillSpansRows(t *testing.T) {
	text := strings.Repeat("añ字😀", 50)
	var rows EmbedRows
	for _, s := range []int32{0, 7, 7, 30, 3, 200} { // 3 goes back
		rows = append(rows, EmbedRow{ID: "d", Chunk: int32(len(rows)), ByteStart: s, ByteEnd: s + 40})
	}
	if err := FillSpans(text, rows, false); err != nil {
		t.Fatal(err)
	}
	runes := []rune(text)
	for _, r := range rows {
		if r.Text != "" {
			t.Errorf("chunk %d: got text %q without withText; want none", r.Chunk, r.Text)
		}
		if got, want := string(runes[r.CPStart:r.CPEnd]), text[r.ByteStart:r.ByteEnd]; got != want || !utf8.ValidString(want) {
			t.Errorf("chunk %d: code points give %q; bytes give %q", r.Chunk, got, want)
		}
	}
	bad := EmbedRows{{ID: "d", ByteStart: 2, ByteEnd: int32(len(text) + 1)}}
	if err := FillSpans(text, bad, true); err == nil {
		t.Errorf("a range past the text: got no error; want one")
	}
}

// TestAppendToText writes rows to a schema with text and one without.
func TestAppendToText(t *testing.T) {
	for _, withText := range []bool{false, true} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		sc := EmbedSchemaWith(2, vector.Float32, withText, nil)
		b := array.NewRecordBuilder(mem, sc)
		rows := EmbedRows{{ID: "a#1", Chunk: 3, Text: "héllo", ByteEnd: 6, CPEnd: 5, Embedding: []float32{1, 2}}}
		if err := rows.AppendTo(b); err != nil {
			t.Fatal(err)
		}
		rec := b.NewRecordBatch()
		if got := rec.Column(sc.FieldIndices(ColChunkID)[0]).(*array.String).Value(0); got != "a#1#3" {
			t.Errorf("chunk_id: got %q; want a#1#3", got)
		}
		if idx := sc.FieldIndices(ColText); withText != (len(idx) == 1) {
			t.Errorf("withText %v: got text columns %v", withText, idx)
		} else if withText {
			if got := rec.Column(idx[0]).(*array.String).Value(0); got != "héllo" {
				t.Errorf("text: got %q; want héllo", got)
			}
		}
		rec.Release()
		b.Release()
		mem.AssertSize(t, 0)
	}
}
