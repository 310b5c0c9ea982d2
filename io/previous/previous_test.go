package previous

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/io/corpus"
	"github.com/synapse-embed/synapse/io/output"
)

const testDims = 4

// testDoc is a previous document: its id, text and chunk count.
type testDoc struct {
	id, text string
	chunks   int
}

func testDocs(n int) []testDoc {
	docs := make([]testDoc, n)
	for i := range docs {
		docs[i] = testDoc{id: fmt.Sprintf("doc-%d", i), text: fmt.Sprintf("text %d", i), chunks: 1 + i%3}
	}
	return docs
}

func hashOf(text string) [output.DocHashSize]byte { return sha256.Sum256([]byte(text)) }

// rowsOf are a document's rows: the vector values say which document and chunk.
func rowsOf(d testDoc, k int) output.EmbedRows {
	rows := make(output.EmbedRows, d.chunks)
	for c := range rows {
		rows[c] = output.EmbedRow{ID: d.id, Chunk: int32(c), TokenStart: int32(10 * c), TokenEnd: int32(10*c + 10),
			ByteStart: int32(50 * c), ByteEnd: int32(50*c + 50), NTokens: 10, DocHash: hashOf(d.text),
			Embedding: []float32{float32(k), float32(c), 0.5, -1}}
	}
	return rows
}

// writeOutput writes docs as an embedding output (batches of 16 rows).
func writeOutput(t *testing.T, path string, docs []testDoc) {
	t.Helper()
	meta := map[string]string{"synapse.settings_digest": "sha256:x", "synapse.settings": "{}"}
	w, err := output.Create(path, output.WriterOptions{Schema: output.EmbedSchema(testDims, meta), BatchRows: 16})
	if err != nil {
		t.Fatal(err)
	}
	for k, d := range docs {
		if err := w.Put(int64(k), int64(k), rowsOf(d, k), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestFindInOrder: the input in the previous order streams along the
// cursor: no index, every document unchanged, its rows copied as written.
func TestFindInOrder(t *testing.T) {
	for _, ext := range []string{"arrow", "parquet"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			docs := testDocs(100)
			path := filepath.Join(dir, "prev."+ext)
			writeOutput(t, path, docs)
			s, err := Open([]string{path}, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for k, d := range docs {
				m, err := s.Find(d.id, hashOf(d.text))
				if err != nil || m.Status != Unchanged {
					t.Fatalf("%s: %+v, %v; want unchanged", d.id, m, err)
				}
				rows, tokens, err := s.Copy(m.Start, m.End)
				if err != nil || tokens != int64(10*d.chunks) || fmt.Sprint(rows) != fmt.Sprint(rowsOf(d, k)) {
					t.Fatalf("%s: copied %v (%d tokens, %v); want %v", d.id, rows, tokens, err, rowsOf(d, k))
				}
			}
			if s.Stats.IndexBuilt || s.Stats.Cursor != 100 {
				t.Errorf("stats %+v; want 100 found at the cursor, no index", s.Stats)
			}
			if n, err := s.Deleted(func(string) error { return nil }); n != 0 || err != nil {
				t.Errorf("deleted %d (%v); want 0", n, err)
			}
		})
	}
}

// TestFindReordered: shuffled input with changed, new and missing
// documents goes through the index (sorted in several runs and merged):
// each status is right, and Deleted lists the missing ones in order.
func TestFindReordered(t *testing.T) {
	dir := t.TempDir()
	docs := testDocs(300)
	// the previous output is split in two files, as shards write it
	paths := []string{filepath.Join(dir, "p0.arrow"), filepath.Join(dir, "p1.parquet")}
	writeOutput(t, paths[0], docs[:150])
	writeOutput(t, paths[1], docs[150:])
	s, err := Open(paths, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sortRun = 7
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]Status{}
	var input []testDoc
	var deleted []string
	for k, d := range docs {
		switch k % 10 {
		case 3:
			d.text += " changed"
			want[d.id] = Changed
		case 7:
			deleted = append(deleted, d.id)
			continue
		default:
			want[d.id] = Unchanged
		}
		input = append(input, d)
	}
	for i := range 20 {
		d := testDoc{id: fmt.Sprintf("new-%d", i), text: "new"}
		want[d.id] = New
		input = append(input, d)
	}
	rng.Shuffle(len(input), func(i, j int) { input[i], input[j] = input[j], input[i] })
	for _, d := range input {
		m, err := s.Find(d.id, hashOf(d.text))
		if err != nil || m.Status != want[d.id] {
			t.Fatalf("%s: %+v, %v; want status %d", d.id, m, err, want[d.id])
		}
		if m.Status == Unchanged {
			rows, _, err := s.Copy(m.Start, m.End)
			if err != nil || len(rows) != d.chunks || rows[0].ID != d.id {
				t.Fatalf("%s: copied %v, %v", d.id, rows, err)
			}
		}
	}
	if !s.Stats.IndexBuilt {
		t.Error("the index was not built")
	}
	var got []string
	n, err := s.Deleted(func(id string) error { got = append(got, id); return nil })
	if err != nil || n != int64(len(deleted)) || !slices.Equal(got, deleted) {
		t.Errorf("deleted %d %v (%v); want %v", n, got, err, deleted)
	}
	if m, _ := s.Find(docs[0].id, hashOf(docs[0].text)); m.Status != New {
		t.Errorf("a document found twice: %+v; want new the second time", m)
	}
}

// TestOpenRefuses: truncated, corrupt, and non-embedding files fail at
// Open with ErrInvalid naming the file.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.arrow")
	writeOutput(t, good, testDocs(200))
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.parquet")
	if err := corpus.WriteSyntheticParquet(other, 10, 1); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	middle := slices.Clone(data)
	for i := len(middle) / 3; i < len(middle)/3+64; i++ {
		middle[i] = 0xff
	}
	for name, path := range map[string]string{
		"truncated": write("cut.arrow", data[:len(data)-100]),
		"footer":    write("footer.arrow", append(slices.Clone(data[:len(data)-40]), make([]byte, 40)...)),
		"empty":     write("empty.arrow", nil),
		"corpus":    other,
		"jsonl":     write("x.jsonl", []byte("{}\n")),
	} {
		if _, err := Open([]string{path}, dir); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	// Garbage in the middle of a batch may leave it well formed (Arrow IPC
	// has no checksums): Open must not panic, and either refuses it or
	// reads what it says.
	if s, err := Open([]string{write("middle.arrow", middle)}, dir); err == nil {
		s.Close()
	} else if !errors.Is(err, ErrInvalid) {
		t.Errorf("middle: %v; want ErrInvalid", err)
	}
}
