package corpus

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestUniqueIDs(t *testing.T) {
	lines := []string{
		`{"id":"a","text":"one"}`,      // 0
		`{"id":"b","text":"two"}`,      // 1
		`{"id":"a","text":"three"}`,    // 2 duplicate of 0
		`{"id":"c","text":""}`,         // 3 empty_text: claims no id
		`{"id":"c","text":"four"}`,     // 4
		`{"text":"no id"}`,             // 5 #5
		`{"id":"b","text":"five"}`,     // 6 duplicate of 1
		`{"id":"#5","text":"planted"}`, // 7 bad_id: would collide with row 5's
		`{"text":"no id either"}`,      // 8 #8
	}
	path := writeFile(t, t.TempDir(), "ids.jsonl", []byte(strings.Join(lines, "\n")))
	want := []outcome{
		{Index: 0, Line: 1, ID: "a", Text: "one"},
		{Index: 1, Line: 2, ID: "b", Text: "two"},
		{Index: 2, Line: 3, ID: "a", Reason: ReasonDuplicateID},
		{Index: 3, Line: 4, ID: "c", Reason: ReasonEmptyText},
		{Index: 4, Line: 5, ID: "c", Text: "four"},
		{Index: 5, Line: 6, ID: "#5", Text: "no id"},
		{Index: 6, Line: 7, ID: "b", Reason: ReasonDuplicateID},
		{Index: 7, Line: 8, Reason: ReasonBadID},
		{Index: 8, Line: 9, ID: "#8", Text: "no id either"},
	}
	r, err := Open([]string{path}, ReadOptions{SkipEmpty: true, UniqueIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	var dupDetail string
	for {
		_, err := r.Next()
		if re, ok := err.(*RowError); ok && re.Reason == ReasonDuplicateID {
			dupDetail = re.Detail
			break
		}
		if err != nil {
			t.Fatalf("no duplicate_id row; ended with %v", err)
		}
	}
	if !strings.Contains(dupDetail, "index 0") {
		t.Errorf("duplicate detail %q; want the first record's index 0", dupDetail)
	}
	r, _ = Open([]string{path}, ReadOptions{SkipEmpty: true, UniqueIDs: true})
	got, _ := readAll(t, r)
	compareOutcomes(t, got, want)
	if s := r.IDStats(); s != (IDStats{Fallback: 2, Duplicates: 2}) {
		t.Errorf("IDStats: got %+v; want 2 fallbacks, 2 duplicates", s)
	}

	// Resumed at every index, the reader reads the ids before its start and
	// returns from there what the whole run returns.
	for start := range int64(len(want) + 1) {
		r, _ := Open([]string{path}, ReadOptions{SkipEmpty: true, UniqueIDs: true, StartIndex: start})
		got, _ := readAll(t, r)
		compareOutcomes(t, got, want[start:])
		if s := r.IDStats(); s.Duplicates != 2 {
			t.Errorf("resumed at %d: IDStats %+v; want the job's 2 duplicates", start, s)
		}
	}
}

func TestUniqueIDsParquet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ids.parquet")
	writeParquet(t, path, 2, []string{"id", "text"}, []arrow.Array{
		int64Arr(7, 8, 7, 9, 8), stringsArr(sp("a"), sp("b"), sp("c"), sp("d"), sp("e"))})
	want := []outcome{
		{Index: 0, ID: "7", Text: "a"},
		{Index: 1, Row: 1, ID: "8", Text: "b"},
		{Index: 2, Row: 2, ID: "7", Reason: ReasonDuplicateID},
		{Index: 3, Row: 3, ID: "9", Text: "d"},
		{Index: 4, Row: 4, ID: "8", Reason: ReasonDuplicateID},
	}
	for _, start := range []int64{0, 2, 4} { // whole row groups before the start are read for their ids
		r, _ := Open([]string{path}, ReadOptions{UniqueIDs: true, StartIndex: start})
		got, _ := readAll(t, r)
		compareOutcomes(t, got, want[start:])
	}
}

// BenchmarkIDSet reports the bytes an IDSet holds per distinct id
// (IDSetBytes): go test ./io/corpus -run '^$' -bench IDSet -benchtime 1x
func BenchmarkIDSet(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s := NewIDSet()
				for i := range n {
					s.Add("doc-"+fmt.Sprint(i), int64(i))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "bytes/id")
				runtime.KeepAlive(s)
			}
		})
	}
}
