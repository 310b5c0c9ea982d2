package pgtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// vectorBinary is pgvector's binary form of a vector (its vector_send):
// the dimension and a reserved zero as big-endian int16s, then the elements
// as big-endian float32s. pgx, which knows no type vector, sends a []byte
// to such a column as it is, so CopyFrom writes these bytes unchanged.
func vectorBinary(v []float32) []byte {
	b := make([]byte, 4, 4+4*len(v))
	binary.BigEndian.PutUint16(b, uint16(len(v)))
	for _, x := range v {
		b = binary.BigEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

var items = []struct {
	id  int32
	vec []float32
}{
	{1, []float32{1, 0, 0}},
	{2, []float32{0, 1, 0}},
	{3, []float32{0.5, 0.25, 0}},
	{4, []float32{-1, 0, 0}},
	{5, []float32{1, 1, 1}},
}

func copyItems(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE items (id int PRIMARY KEY, embedding vector(3) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	rows := make([][]any, len(items))
	for i, it := range items {
		rows[i] = []any{it.id, vectorBinary(it.vec)}
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id", "embedding"}, pgx.CopyFromRows(rows))
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if n != int64(len(items)) {
		t.Fatalf("copied %d rows; want %d", n, len(items))
	}
}

func nearest(t *testing.T, conn *pgx.Conn, query string) []int32 {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id FROM items ORDER BY embedding <=> $1 LIMIT 2", query)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestCopySearch copies vectors in pgx's binary COPY and finds the two
// nearest by cosine distance, by a scan and through an HNSW index.
func TestCopySearch(t *testing.T) {
	s := Start(t)
	t.Logf("PostgreSQL %s, pgvector %s", s.Version(), s.VectorVersion())
	conn := s.Conn(t)
	ctx := context.Background()
	copyItems(t, conn)

	var text string
	if err := conn.QueryRow(ctx, "SELECT embedding::text FROM items WHERE id = 3").Scan(&text); err != nil {
		t.Fatal(err)
	}
	if want := "[0.5,0.25,0]"; text != want {
		t.Errorf("item 3 reads back as %s; want %s", text, want)
	}
	want := []int32{1, 3} // cosine distances to [1,0,0]: 0, 0.106, 0.423 (5), 1 (2), 2 (4)
	if got := nearest(t, conn, "[1,0,0]"); !slices.Equal(got, want) {
		t.Errorf("scan: nearest to [1,0,0] are %v; want %v", got, want)
	}

	for _, sql := range []string{"CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops)", "SET enable_seqscan = off"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN (COSTS off) SELECT id FROM items ORDER BY embedding <=> '[1,0,0]' LIMIT 2")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "Index Scan using items_embedding_idx") {
		t.Fatalf("the query does not use the HNSW index:\n%s", plan)
	}
	if got := nearest(t, conn, "[1,0,0]"); !slices.Equal(got, want) {
		t.Errorf("HNSW: nearest to [1,0,0] are %v; want %v", got, want)
	}
}

// TestTypes checks the pgvector types and indexes the output may use.
func TestTypes(t *testing.T) {
	s := Start(t)
	conn := s.Conn(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		sql  string // one float8
		want float64
	}{
		{"vector cosine", "SELECT '[1,2]'::vector <=> '[2,1]'", 0.2},
		{"vector L2", "SELECT '[0,0]'::vector <-> '[3,4]'", 5},
		{"vector inner product", "SELECT '[1,2]'::vector <#> '[3,4]'", -11},
		{"halfvec cosine", "SELECT '[1,0]'::halfvec <=> '[1,1]'::halfvec", 1 - 1/math.Sqrt2},
		{"bit hamming", "SELECT B'1010' <~> B'0110'", 2},
		{"bit jaccard", "SELECT B'1110' <%> B'0111'", 0.5},
		{"sparsevec L2", "SELECT '{1:3,3:4}/5'::sparsevec <-> '{}/5'::sparsevec", 5},
		{"binary_quantize", "SELECT binary_quantize('[1,-1,2,-2]'::vector) <~> B'1010'", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got float64
			if err := conn.QueryRow(ctx, tc.sql).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tc.want) > 1e-3 {
				t.Errorf("%s = %v; want %v", tc.sql, got, tc.want)
			}
		})
	}
	_, err := conn.Exec(ctx, `CREATE TABLE typed (v vector(3), h halfvec(3), b bit(3), s sparsevec(3));
		INSERT INTO typed SELECT ARRAY[i, 1, 0]::real[]::vector, ARRAY[i, 1, 0]::real[]::halfvec,
			(i % 8)::bit(3), ('{1:' || i || '}/3')::sparsevec FROM generate_series(1, 100) i`)
	if err != nil {
		t.Fatal(err)
	}
	for _, idx := range []string{
		"hnsw (v vector_l2_ops)", "hnsw (h halfvec_cosine_ops)", "hnsw (b bit_hamming_ops)", "hnsw (s sparsevec_ip_ops)",
		"ivfflat (v vector_cosine_ops) WITH (lists = 4)", "ivfflat (h halfvec_l2_ops) WITH (lists = 4)",
		"ivfflat (b bit_hamming_ops) WITH (lists = 4)",
	} {
		if _, err := conn.Exec(ctx, "CREATE INDEX ON typed USING "+idx); err != nil {
			t.Errorf("index %s: %v", idx, err)
		}
	}
}

// killingSource is a COPY source of many rows that, at row killAt, kills
// the server, mid-COPY.
type killingSource struct {
	s      *Server
	n      int
	killAt int
}

func (k *killingSource) Next() bool {
	k.n++
	if k.n == k.killAt {
		k.s.Kill()
	}
	return k.n < 10*k.killAt // bounded, should pgx not stop at the broken connection
}

func (k *killingSource) Values() ([]any, error) {
	return []any{int32(1000 + k.n), vectorBinary([]float32{float32(k.n), 1, 0})}, nil
}

func (k *killingSource) Err() error { return nil }

// TestKillMidCopy kills the server during a COPY: the COPY fails, and the
// restarted server has what was committed before it and nothing of it.
func TestKillMidCopy(t *testing.T) {
	s := Start(t)
	conn := s.Conn(t)
	ctx := context.Background()
	copyItems(t, conn)
	src := &killingSource{s: s, killAt: 50_000}
	_, err := conn.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id", "embedding"}, src)
	if err == nil {
		t.Fatal("copy went on after the server was killed")
	}
	if src.n < src.killAt {
		t.Fatalf("copy failed at row %d, before the kill at %d: %v", src.n, src.killAt, err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the connection still answers after Kill")
	}
	s.Kill() // twice is safe
	s.Restart(t)
	if log := s.Log(); !strings.Contains(log, "database system was interrupted") {
		t.Errorf("the restarted server did not recover from a crash:\n%s", log)
	}
	var n int
	if err := s.Conn(t).QueryRow(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(items) {
		t.Errorf("after the restart items has %d rows; want %d", n, len(items))
	}
}

// TestMissingServer skips naming make pg-server, or fails under
// SYNAPSE_REQUIRE_PG=1.
func TestMissingServer(t *testing.T) {
	t.Setenv(ServerEnv, t.TempDir())
	for _, require := range []string{"", "1"} {
		t.Setenv(RequireEnv, require)
		r := &recorder{TB: t}
		func() {
			defer func() { recover() }()
			install(r)
		}()
		if !strings.Contains(r.msg, "`make pg-server`") {
			t.Errorf("%s=%q: message %q; want one naming `make pg-server`", RequireEnv, require, r.msg)
		}
		if r.failed != (require == "1") || r.skipped == (require == "1") {
			t.Errorf("%s=%q: failed %v, skipped %v", RequireEnv, require, r.failed, r.skipped)
		}
	}
}

// recorder records a Skip or a Fatal and stops there, as the testing
// package does, with a panic instead of runtime.Goexit.
type recorder struct {
	testing.TB
	msg             string
	failed, skipped bool
}

var errStopped = errors.New("stopped")

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.msg, r.skipped = fmt.Sprint(args...), true
	panic(errStopped)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg, r.failed = fmt.Sprintf(format, args...), true
	panic(errStopped)
}

// BenchmarkStart measures Start: initdb, the server's start, the role,
// the database and the extension.
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		Start(b).Stop()
	}
}
