package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/objstore"
	"github.com/synapse-embed/synapse/io/objstore/s3test"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		url, bucket, key string
		bad              bool
	}{
		{"s3://b/k", "b", "k", false},
		{"s3://b/dir/a//b.parquet", "b", "dir/a//b.parquet", false},
		{"s3://b", "b", "", false},
		{"s3://b/", "b", "", false},
		{"s3:///k", "", "", true},
		{"s3://b/a/../k", "", "", true},
		{"/local/path", "", "", true},
	} {
		loc, err := objstore.Parse(c.url)
		if (err != nil) != c.bad || (!c.bad && (loc.Bucket != c.bucket || loc.Key != c.key)) {
			t.Errorf("Parse(%q) = %+v, %v; want %q %q (error %v)", c.url, loc, err, c.bucket, c.key, c.bad)
		}
	}
	for _, c := range [][3]string{
		{"s3://bkt/runs/out.shard-0-of-4.json", "out.shard-0-of-4.arrow", "s3://bkt/runs/out.shard-0-of-4.arrow"},
		{"s3://bkt/runs/m.json", "s3://c/p.arrow", "s3://c/p.arrow"},
		{"/data/m.json", "rel/p.arrow", "/data/p.arrow"},
		{"/data/m.json", "/abs/p.arrow", "/abs/p.arrow"},
	} {
		if got := objstore.Beside(c[0], c[1]); got != c[2] {
			t.Errorf("Beside(%q, %q) = %q; want %q", c[0], c[1], got, c[2])
		}
	}
}

// payload is n pseudo-random bytes.
func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestS3UploadVisibleOnlyOnCommit: a 3-part upload is invisible until
// Commit, then whole; ranged and streaming reads give its bytes back.
func TestS3UploadVisibleOnlyOnCommit(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	srv.Setenv(t)
	ctx := context.Background()
	data := payload(2*objstore.PartSize + 12345)
	u, err := objstore.Create(ctx, "s3://bkt/dir/obj.bin")
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := u.Write(data[off:min(off+1<<20, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := srv.Get(t, "bkt", "dir/obj.bin"); ok {
		t.Fatal("the object is visible before Commit")
	}
	if ups := srv.Uploads(t, "bkt"); !slices.Equal(ups, []string{"dir/obj.bin"}) {
		t.Fatalf("uploads in progress %v; want the multipart upload of dir/obj.bin", ups)
	}
	if err := u.Commit(); err != nil {
		t.Fatal(err)
	}
	got, ok := srv.Get(t, "bkt", "dir/obj.bin")
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("after Commit: %d bytes (exists %v); want %d", len(got), ok, len(data))
	}
	f, err := objstore.Open(ctx, "s3://bkt/dir/obj.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 1000)
	if n, err := f.ReadAt(p, objstore.PartSize-500); err != nil || n != 1000 || !bytes.Equal(p, data[objstore.PartSize-500:objstore.PartSize+500]) {
		t.Errorf("ReadAt across a part boundary: %d, %v", n, err)
	}
	if n, err := f.ReadAt(p, int64(len(data)-10)); err != io.EOF || n != 10 || !bytes.Equal(p[:10], data[len(data)-10:]) {
		t.Errorf("ReadAt past the end: %d, %v; want 10, EOF", n, err)
	}
	f.Seek(100, io.SeekStart)
	rest, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(rest, data[100:]) {
		t.Errorf("streaming read from 100: %d bytes, %v", len(rest), err)
	}
	if got := f.Fetched(); got != int64(1000+10+len(data)-100) {
		t.Errorf("Fetched %d; want %d", got, 1000+10+len(data)-100)
	}
}

// TestS3AbortLeavesNothing: an aborted upload, or one whose context ends
// before Commit, leaves no object and no incomplete upload.
func TestS3AbortLeavesNothing(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	srv.Setenv(t)
	data := payload(objstore.PartSize + 10)
	u, err := objstore.Create(context.Background(), "s3://bkt/aborted")
	if err != nil {
		t.Fatal(err)
	}
	u.Write(data)
	u.Abort()
	ctx, cancel := context.WithCancel(context.Background())
	u2, _ := objstore.Create(ctx, "s3://bkt/canceled")
	u2.Write(data)
	cancel()
	if err := u2.Commit(); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit after the context ended: %v; want context.Canceled", err)
	}
	if keys := srv.Keys(t, "bkt", ""); len(keys) != 0 {
		t.Errorf("objects %v; want none", keys)
	}
	if ups := srv.Uploads(t, "bkt"); len(ups) != 0 {
		t.Errorf("incomplete uploads %v; want none", ups)
	}
}

// TestS3ReadChecks: an object rewritten while it is read fails naming it;
// a connection cut before the answer is retried (and counted); globs and
// prefixes expand in sorted order.
func TestS3ReadChecks(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	proxy := srv.Proxy(t)
	for _, kv := range proxy.Env(srv) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	for _, k := range []string{"c/2.jsonl", "c/1.jsonl", "c/sub/3.jsonl", "c/x.parquet", "d/4.jsonl"} {
		srv.Put(t, "bkt", k, []byte(k))
	}
	for pattern, want := range map[string][]string{
		"s3://bkt/c/*.jsonl": {"s3://bkt/c/1.jsonl", "s3://bkt/c/2.jsonl"},
		"s3://bkt/c/":        {"s3://bkt/c/1.jsonl", "s3://bkt/c/2.jsonl", "s3://bkt/c/x.parquet"},
		"s3://bkt/*/4.jsonl": {"s3://bkt/d/4.jsonl"},
		"s3://bkt/c/1.jsonl": {"s3://bkt/c/1.jsonl"},
	} {
		if got, err := objstore.Expand(ctx, pattern); err != nil || !slices.Equal(got, want) {
			t.Errorf("Expand(%s) = %v, %v; want %v", pattern, got, err, want)
		}
	}
	if _, err := objstore.Expand(ctx, "s3://bkt/c/*.csv"); !objstore.NoMatch(err) {
		t.Errorf("a glob matching nothing: %v", err)
	}
	f, err := objstore.Open(ctx, "s3://bkt/c/1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	before := objstore.Snapshot().Retries
	proxy.ArmStatus(func(r *http.Request) bool { return r.Method == http.MethodGet }, http.StatusServiceUnavailable)
	p := make([]byte, 4)
	if _, err := f.ReadAt(p, 0); err != nil || string(p) != "c/1." {
		t.Fatalf("ReadAt after a cut connection: %q, %v", p, err)
	}
	if !proxy.Fired() || objstore.Snapshot().Retries <= before {
		t.Errorf("the 503 was not retried and counted (fired %v, retries %d → %d)", proxy.Fired(), before, objstore.Snapshot().Retries)
	}
	srv.Put(t, "bkt", "c/1.jsonl", []byte("rewritten"))
	if _, err := f.ReadAt(p, 0); err == nil || !strings.Contains(err.Error(), "s3://bkt/c/1.jsonl") {
		t.Errorf("reading an object rewritten since it was opened: %v; want an error naming it", err)
	}
}

// TestS3Refusals: a missing bucket, a missing key and refused credentials
// are permanent errors naming what they are about.
func TestS3Refusals(t *testing.T) {
	srv := s3test.Start(t, "bkt")
	srv.Setenv(t)
	ctx := context.Background()
	err := objstore.CheckBucket(ctx, "s3://nope/k")
	if !objstore.Permanent(err) || !strings.Contains(err.Error(), "s3://nope") || !strings.Contains(err.Error(), "no such bucket") {
		t.Errorf("missing bucket: %v", err)
	}
	_, err = objstore.Stat(ctx, "s3://bkt/missing")
	if !objstore.Permanent(err) || !objstore.NotFound(err) || !strings.Contains(err.Error(), "s3://bkt/missing") {
		t.Errorf("missing key: %v", err)
	}
	if ok, err := objstore.Exists(ctx, "s3://bkt/missing"); ok || err != nil {
		t.Errorf("Exists(missing) = %v, %v", ok, err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	err = objstore.CheckBucket(ctx, "s3://bkt/k")
	if !objstore.Permanent(err) || !strings.Contains(err.Error(), "s3://b") {
		t.Errorf("wrong secret: %v", err)
	}
}
