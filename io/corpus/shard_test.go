package corpus

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// shardRecord is a record as a range shard reads it, with its group.
type shardRecord struct {
	outcome
	Source string
	Group  int64
}

// readShard reads every record of one shard (or the whole run: shards 1).
func readShard(t *testing.T, files []string, i, n int) ([]shardRecord, []Span) {
	t.Helper()
	r, err := Open(files, ReadOptions{IDField: "id", Shard: i, Shards: n})
	if err != nil {
		t.Fatal(err)
	}
	var out []shardRecord
	for {
		d, err := r.Next()
		var re *RowError
		switch {
		case err == nil:
			out = append(out, shardRecord{outcome{Index: d.Index, Line: d.Line, Row: d.Row, ID: d.ID, Text: d.Text}, d.Source, d.Group})
		case errors.Is(err, io.EOF):
			spans := r.Spans()
			r.Close()
			return out, spans
		case errors.As(err, &re):
			out = append(out, shardRecord{outcome{Index: re.Index, Line: re.Line, Row: re.Row, ID: re.ID, Reason: re.Reason}, re.Source, re.Group})
		default:
			t.Fatalf("shard %d/%d: %v", i, n, err)
		}
	}
}

// shardInputs writes a plain JSONL file of several blocks with a bad line
// every 97 lines and lines of varied lengths, a gzip JSONL file and a
// Parquet file of several row groups.
func shardInputs(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var b bytes.Buffer
	for i := 0; i < 3000; i++ {
		switch {
		case i%97 == 50:
			b.WriteString("{broken " + strings.Repeat("x", i%300) + "\n")
		case i%211 == 7:
			b.WriteString("\n") // blank: no record
		default:
			fmt.Fprintf(&b, `{"id": "j%d", "text": "%s"}`+"\n", i, strings.Repeat("w", 20+i*37%400))
		}
	}
	plain := writeFile(t, dir, "a.jsonl", b.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for i := 0; i < 50; i++ {
		fmt.Fprintf(zw, `{"id": "g%d", "text": "gz %d"}`+"\n", i, i)
	}
	zw.Close()
	gzPath := writeFile(t, dir, "b.jsonl.gz", gz.Bytes())
	ids, texts := make([]*string, 700), make([]*string, 700)
	for i := range ids {
		ids[i], texts[i] = sp(fmt.Sprintf("p%d", i)), sp(strings.Repeat("v", 10+i%50))
	}
	pq := filepath.Join(dir, "c.parquet")
	writeParquet(t, pq, 100, []string{"id", "text"}, []arrow.Array{stringsArr(ids...), stringsArr(texts...)})
	return []string{plain, gzPath, pq}
}

// TestRangeShards: for any shard count, the shards' records put together
// are the single run's: the same records in the same order, the same
// packing groups, indexes and lines numbered from each shard's start (its
// spans say how many it read), and each shard reads little more than its
// part.
func TestRangeShards(t *testing.T) {
	files := shardInputs(t)
	whole, _ := readShard(t, files, 0, 1)
	if len(whole) < 3500 {
		t.Fatalf("%d records in the whole input", len(whole))
	}
	sizes := map[string]int64{}
	for _, f := range files {
		st, _ := os.Stat(f)
		sizes[f] = st.Size()
	}
	for _, n := range []int{2, 3, 4, 7, 40} {
		var joined []shardRecord
		var base int64
		lineBase := map[string]int{}
		for i := 0; i < n; i++ {
			recs, spans := readShard(t, files, i, n)
			parts, err := PlanShard(files, i, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				r.Index += base
				r.Group += base
				if r.Line > 0 {
					r.Line += lineBase[r.Source]
				}
				joined = append(joined, r)
			}
			for k, sp := range spans {
				base += sp.Records
				lineBase[sp.File] += int(sp.Lines)
				if p := parts[k]; p.Kind == KindJSONL && !p.Skip && sp.BytesRead > p.End-p.Start+2*jsonlBufSize {
					t.Errorf("%d shards: shard %d read %d bytes of %s for a part of %d", n, i, sp.BytesRead, sp.File, p.End-p.Start)
				}
			}
		}
		if len(joined) != len(whole) {
			t.Fatalf("%d shards: %d records; want %d", n, len(joined), len(whole))
		}
		for k := range whole {
			if joined[k] != whole[k] {
				t.Fatalf("%d shards: record %d is %+v; want %+v", n, k, joined[k], whole[k])
			}
		}
	}
}

// TestRangeShardsRefuse: stdin and pipes cannot be split.
func TestRangeShardsRefuse(t *testing.T) {
	if _, err := PlanShard([]string{"-"}, 0, 2); !errors.Is(err, ErrNotSplittable) {
		t.Errorf("stdin: %v; want ErrNotSplittable", err)
	}
}
