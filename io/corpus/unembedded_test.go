package corpus

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestUnembedded: a field of ReadOptions.Unembedded that is not a text
// field is reported once per Reader, for the first record that has it
// (JSONL: a non-empty string; Parquet: the file's column).
func TestUnembedded(t *testing.T) {
	dir := t.TempDir()
	jsonl := writeFile(t, dir, "c.jsonl", []byte(`{"id":"a","text":"x"}
{"id":"b","text":"y","title":""}
{"id":"c","text":"z","title":"T"}
{"id":"d","text":"w","title":"U"}
`))
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"p", "q"}, nil)
	ids := b.NewArray()
	b.AppendValues([]string{"tp", "tq"}, nil)
	titles := b.NewArray()
	b.AppendValues([]string{"xp", "xq"}, nil)
	texts := b.NewArray()
	defer ids.Release()
	defer titles.Release()
	defer texts.Release()
	b.Release()
	pq := filepath.Join(dir, "c.parquet")
	writeParquet(t, pq, 10, []string{"id", "title", "text"}, []arrow.Array{ids, titles, texts})
	for _, tc := range []struct {
		name   string
		files  []string
		fields []string
		want   []string
	}{
		{"jsonl", []string{jsonl}, nil, []string{"title c.jsonl:3 c"}},
		{"jsonl, title embedded", []string{jsonl}, []string{"title", "text"}, nil},
		{"parquet", []string{pq}, nil, []string{"title c.parquet:0 p"}},
		{"once over files", []string{pq, jsonl}, nil, []string{"title c.parquet:0 p"}},
		{"parquet, title embedded", []string{pq}, []string{"text", "title"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			r, err := Open(tc.files, ReadOptions{TextFields: tc.fields, Unembedded: []string{"title"},
				OnUnembedded: func(d Doc, f string) {
					got = append(got, fmt.Sprintf("%s %s:%d %s", f, filepath.Base(d.Source), d.Line+int(d.Row), d.ID))
				}})
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, r)
			if !slices.Equal(got, tc.want) {
				t.Errorf("reported %q; want %q", got, tc.want)
			}
		})
	}
}
