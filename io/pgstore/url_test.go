package pgstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/vector"
)

// TestRedact: no form of a password survives in what synapse prints.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgresql://app:s3cret@db:5432/rag?table=chunks", "postgresql://app:xxxxx@db:5432/rag?table=chunks"},
		{"postgres://app@db/rag?password=s3cret&sslmode=require", "postgres://app@db/rag?password=xxxxx&sslmode=require"},
		{"postgresql:///?table=t", "postgresql:///?table=t"},
		{"postgresql://app:s3cret@db/%zz", "postgresql://(a URL that does not parse)"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestParse: the table parameter and its refusals, never echoing the password.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, table, err string
	}{
		{"postgresql://app:s3cret@db/rag?table=chunks_v2&sslmode=disable", "chunks_v2", ""},
		{"postgresql://app:s3cret@db/rag", DefaultTable, ""},
		{"postgresql://app:s3cret@db/rag?table=Chunks", "", `table "Chunks"`},
		{"postgresql://app:s3cret@db/rag?table=a;drop", "", "do not parse"},
		{"postgresql://app:s3cret@db/rag?table=1a", "", "lowercase name"},
		{"postgresql://app:s3cret@db/rag?sslmode=bogus", "", "sslmode"},
		{"postgresql://app:s3cret@db/rag?table=a&table=b", "", "the parameter table is given 2 times"},
		{"postgresql://app:s3cret@db/rag?sslmode=disable&sslmode=require", "", "the parameter sslmode is given 2 times"},
		{"postgresql://app:s3cret@db/rag?tabel=x", "", `unknown parameter "tabel"`},
		{"postgresql://app:s3cret@db/rag?search_path=x", "", `unknown parameter "search_path"`},
		{"postgresql://app:s3cret@db/rag?connect_timeout=5&application_name=nightly&table=t", "t", ""},
		{"postgresql://app:s3cret@db/rag?table=synapse_state", "", "synapse's state table"},
		{"postgresql://app:s3cret@db/rag?table=docs_synapse_staging", "", "reserved"},
		{"postgresql://app:s3cret@db/rag?table=docs_synapse_keep", "", "reserved"},
		{"postgresql://app:s3cret@db/rag?table=docs_synapse_shard_1_of_2", "", "reserved"},
		{"postgresql://app:s3cret@db/rag?table=docs_synapse", "", "reserved"},
		{"postgresql://app:s3cret@db/rag?table=synapse_docs", "synapse_docs", ""},
	} {
		got, err := Parse(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", Redact(tc.in), err)
		case tc.err == "" && got.Table != tc.table:
			t.Errorf("Parse(%q).Table = %q; want %q", Redact(tc.in), got.Table, tc.table)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrRefused)):
			t.Errorf("Parse(%q) error %v; want ErrRefused with %q", Redact(tc.in), err, tc.err)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("Parse(%q) error holds the password: %v", Redact(tc.in), err)
		}
	}
}

func TestColumnType(t *testing.T) {
	for _, tc := range []struct {
		d    vector.Dtype
		want string
	}{{vector.Float32, "vector(384)"}, {vector.Float16, "halfvec(384)"}, {vector.Binary, "bit(384)"}, {vector.UBinary, "bit(384)"}, {vector.Int8, ""}, {vector.Uint8, ""}} {
		got, err := ColumnType(tc.d, 384)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrRefused) {
			t.Errorf("ColumnType(%s) = %q, %v; want %q", tc.d, got, err, tc.want)
		}
	}
}
