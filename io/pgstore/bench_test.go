package pgstore_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/pgstore"
	"github.com/synapse-embed/synapse/io/pgstore/pgtest"
	"github.com/synapse-embed/synapse/io/vector"
)

// The writers' side of a run, without the engine: rows of 384 dims (a
// MiniLM's) Put one document (one chunk) at a time through output.Writer,
// into a PostgreSQL table and into a Parquet file.
//
//	go test ./io/pgstore -run '^$' -bench . -benchtime 1x

const benchDims = 384

func benchRows(n int, salt uint64) []output.EmbedRows {
	rng := rand.New(rand.NewPCG(1, salt))
	docs := make([]output.EmbedRows, n)
	for i := range docs {
		v := make([]float32, benchDims)
		for j := range v {
			v[j] = rng.Float32()*2 - 1
		}
		id := fmt.Sprintf("doc-%07d", i)
		docs[i] = output.EmbedRows{{ID: id, Embedding: v, DocHash: sha256.Sum256(fmt.Appendf(nil, "%s %d", id, salt))}}
	}
	return docs
}

var benchSettings = vector.Settings{ModelDigest: "sha256:bench", ChunkTokens: 256}

func benchSchema() *output.WriterOptions {
	return &output.WriterOptions{Schema: output.EmbedSchema(benchDims, benchSettings.Metadata())}
}

// openBenchStore opens the table for a run (sync or full).
func openBenchStore(b *testing.B, s *pgtest.Server, sync bool) (*output.Writer, *pgstore.Store) {
	t, err := pgstore.Parse(tableURL(s, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	st, err := pgstore.Open(context.Background(), t, pgstore.Config{Dims: benchDims, Dtype: vector.Float32,
		Digest: benchSettings.Digest(), Settings: benchSettings.JSON(), Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	opts := *benchSchema()
	opts.ErrorsPath = filepath.Join(b.TempDir(), "errors.jsonl")
	w, _, err := output.OpenStore(st, t.String(), false, opts)
	if err != nil {
		b.Fatal(err)
	}
	return w, st
}

func putAll(b *testing.B, w *output.Writer, docs []output.EmbedRows, keep func(i int) bool) {
	for i, d := range docs {
		var err error
		if keep != nil && keep(i) {
			err = w.PutKept(int64(i), 0, d[0].ID)
		} else {
			err = w.Put(int64(i), 0, d, nil)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWrite: rows a second into PostgreSQL (COPY binary, committed
// per batch, published) and into Parquet (checkpointed, committed).
func BenchmarkWrite(b *testing.B) {
	const n = 20_000
	docs := benchRows(n, 1)
	b.Run("postgresql", func(b *testing.B) {
		s := pgtest.Start(b)
		b.ResetTimer()
		for range b.N {
			w, _ := openBenchStore(b, s, false)
			putAll(b, w, docs, nil)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("parquet", func(b *testing.B) {
		for range b.N {
			out := filepath.Join(b.TempDir(), "v.parquet")
			w, _, err := output.OpenCheckpointed(out, *benchSchema())
			if err != nil {
				b.Fatal(err)
			}
			putAll(b, w, docs, nil)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

func walLSN(b *testing.B, conn *pgx.Conn) int64 {
	var lsn int64
	if err := conn.QueryRow(context.Background(), "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// BenchmarkSyncNight: a night where 2% of 200,000 documents changed
// (SYNAPSE_BENCH_SYNC_ROWS sets another count), written as a sync against
// a full reload of the same table: wall time and the server's WAL bytes
// (pg_current_wal_lsn before and after). The engine is left out: a real
// sync also embeds 2% of the documents, not all.
func BenchmarkSyncNight(b *testing.B) {
	n := 200_000
	if v := os.Getenv("SYNAPSE_BENCH_SYNC_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 50 {
			b.Fatalf("SYNAPSE_BENCH_SYNC_ROWS=%q: want a count of at least 50", v)
		}
	}
	s := pgtest.Start(b)
	conn := s.Conn(b)
	yesterday, today := benchRows(n, 1), benchRows(n, 1)
	changed := func(i int) bool { return i%50 == 0 }
	for i := range today {
		if changed(i) {
			today[i][0].DocHash[0] ^= 1
			today[i][0].Embedding[0] += 1
		}
	}
	w, _ := openBenchStore(b, s, false)
	putAll(b, w, yesterday, nil)
	for _, tc := range []struct {
		name string
		sync bool
	}{{"full-reload", false}, {"sync-2pct", true}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				// As after a day of readers and autovacuum: the hint bits set
				// (with PostgreSQL 18's default data checksums, the first read
				// after a load would log every page, which is no night's cost).
				if _, err := conn.Exec(context.Background(), "VACUUM bench"); err != nil {
					b.Fatal(err)
				}
				lsn0, t0 := walLSN(b, conn), time.Now()
				w, st := openBenchStore(b, s, tc.sync)
				var keep func(int) bool
				if tc.sync {
					keep = func(i int) bool { _, same := st.Holds(today[i][0].ID, today[i][0].DocHash); return same }
				}
				putAll(b, w, today, keep)
				b.ReportMetric(time.Since(t0).Seconds(), "s/night")
				b.ReportMetric(float64(walLSN(b, conn)-lsn0), "WAL-bytes/night")
			}
		})
	}
}
