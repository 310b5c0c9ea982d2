package corpus

import (
	"errors"
	"io"
	"testing"
)

// TestShardEstimate: the shards' estimates add up to the whole input's,
// and each shard's reader, at its end, has read at least its estimate (so
// that progress against it reaches 1) and exactly its Parquet rows.
func TestShardEstimate(t *testing.T) {
	files := shardInputs(t)
	whole, err := Count(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 7} {
		var sum Estimate
		for i := 0; i < n; i++ {
			est, err := ShardEstimate(files, i, n)
			if err != nil {
				t.Fatal(err)
			}
			sum.JSONLBytes += est.JSONLBytes
			sum.ParquetRows += est.ParquetRows
			r, err := Open(files, ReadOptions{IDField: "id", Shard: i, Shards: n})
			if err != nil {
				t.Fatal(err)
			}
			for {
				_, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
			}
			p := r.Progress()
			r.Close()
			if p.ParquetRows != est.ParquetRows || p.JSONLBytes < est.JSONLBytes {
				t.Errorf("%d shards: shard %d read %d Parquet rows and %d JSONL bytes; want %d and at least %d",
					n, i, p.ParquetRows, p.JSONLBytes, est.ParquetRows, est.JSONLBytes)
			}
		}
		if sum != whole {
			t.Errorf("%d shards: estimates add up to %+v; want the whole input's %+v", n, sum, whole)
		}
	}
}
