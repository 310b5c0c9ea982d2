package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Info describes an object.
type Info struct {
	Size    int64
	ModTime time.Time
	ETag    string
	// VersionID is the object's version on a bucket with versioning, ""
	// on one without.
	VersionID string
}

// Stat returns what the server says of the object at url.
func Stat(ctx context.Context, url string) (Info, error) {
	loc, err := Parse(url)
	if err != nil {
		return Info{}, err
	}
	c, _, err := client(ctx)
	if err != nil {
		return Info{}, err
	}
	out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &loc.Bucket, Key: &loc.Key})
	if err != nil {
		return Info{}, opError("stat", url, err)
	}
	return Info{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag),
		VersionID: aws.ToString(out.VersionId)}, nil
}

// File is an object open for reading: ReadAt is a ranged GET, Read streams
// from the offset Seek set. It is not safe for concurrent Read and Seek;
// ReadAt is safe for concurrent use.
type File struct {
	ctx  context.Context
	c    *s3.Client
	max  int
	url  string
	loc  Location
	info Info

	off      int64         // offset of the next Read
	body     io.ReadCloser // the streaming GET Read reads from, nil before the first Read
	bodyAt   int64         // offset body is at
	fetchedN atomic.Int64  // bytes read by this File (Read and ReadAt)
}

// Open opens the object at url. ctx bounds every request the File makes.
func Open(ctx context.Context, url string) (*File, error) {
	loc, err := Parse(url)
	if err != nil {
		return nil, err
	}
	info, err := Stat(ctx, url)
	if err != nil {
		return nil, err
	}
	c, max, err := client(ctx)
	if err != nil {
		return nil, err
	}
	return &File{ctx: ctx, c: c, max: max, url: url, loc: loc, info: info}, nil
}

// Name is the object's URL.
func (f *File) Name() string { return f.url }

// Size is the object's size when it was opened.
func (f *File) Size() int64 { return f.info.Size }

// Info is what the server said of the object when it was opened.
func (f *File) Info() Info { return f.info }

// get starts a GET of [off, end) (end -1: to the end of the object).
func (f *File) get(off, end int64) (io.ReadCloser, error) {
	rng := fmt.Sprintf("bytes=%d-", off)
	if end >= 0 {
		rng += fmt.Sprint(end - 1)
	}
	in := &s3.GetObjectInput{Bucket: &f.loc.Bucket, Key: &f.loc.Key, Range: &rng}
	if f.info.ETag != "" {
		in.IfMatch = &f.info.ETag
	}
	out, err := f.c.GetObject(f.ctx, in)
	if err != nil {
		return nil, opError("read", f.url, err)
	}
	return out.Body, nil
}

// ReadAt reads len(p) bytes at off by one ranged GET (again from where it
// stopped if the body is cut short).
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.info.Size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), f.info.Size-off)
	var n int64
	for attempt := 1; n < want; attempt++ {
		body, err := f.get(off+n, off+want)
		var m int
		if err == nil {
			m, err = io.ReadFull(body, p[n:want])
			body.Close()
		}
		n += int64(m)
		stats.fetched.Add(int64(m))
		f.fetchedN.Add(int64(m))
		if err == nil {
			break
		}
		if err = f.again(attempt, err); err != nil {
			return int(n), err
		}
	}
	if want < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// again waits before another attempt after err, or returns err (with the
// URL) when it is permanent or the attempts are spent.
func (f *File) again(attempt int, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = fmt.Errorf("the connection ended early: %w", io.ErrUnexpectedEOF)
	}
	if attempt >= f.max || !transient(f.ctx, err) {
		var oe *Error
		if !errors.As(err, &oe) {
			err = opError("read", f.url, err)
		}
		return err
	}
	stats.retries.Add(1)
	return sleep(f.ctx, backoff(attempt))
}

// Read streams the object from the current offset.
func (f *File) Read(p []byte) (int, error) {
	if f.off >= f.info.Size {
		return 0, io.EOF
	}
	for attempt := 1; ; attempt++ {
		if f.body == nil || f.bodyAt != f.off {
			f.closeBody()
			body, err := f.get(f.off, -1)
			if err != nil {
				if err = f.again(attempt, err); err != nil {
					return 0, err
				}
				continue
			}
			f.body, f.bodyAt = body, f.off
		}
		n, err := f.body.Read(p)
		f.off += int64(n)
		f.bodyAt = f.off
		stats.fetched.Add(int64(n))
		f.fetchedN.Add(int64(n))
		if err == io.EOF && f.off < f.info.Size {
			err = io.ErrUnexpectedEOF
		}
		switch {
		case err == nil || (err == io.EOF && n > 0):
			return n, nil
		case err == io.EOF:
			return 0, io.EOF
		case n > 0:
			f.closeBody() // the next Read opens it again where it stopped
			return n, nil
		}
		f.closeBody()
		if err = f.again(attempt, err); err != nil {
			return 0, err
		}
	}
}

// Seek sets the offset of the next Read.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.info.Size
	}
	if offset < 0 {
		return 0, fmt.Errorf("objstore: seek %s: negative offset", f.url)
	}
	f.off = offset
	return offset, nil
}

// Fetched is the bytes this File has read from the server.
func (f *File) Fetched() int64 { return f.fetchedN.Load() }

func (f *File) closeBody() {
	if f.body != nil {
		f.body.Close()
		f.body = nil
	}
}

// Close ends the streaming GET, if any.
func (f *File) Close() error {
	f.closeBody()
	return nil
}

// ReadFile reads a whole (small) object: a manifest, a checkpoint.
func ReadFile(ctx context.Context, url string) ([]byte, error) {
	f, err := Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, f.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// List returns the URLs of the objects whose keys start with prefix's key,
// in sorted order.
func List(ctx context.Context, prefix string) ([]string, error) {
	loc, err := Parse(prefix)
	if err != nil {
		return nil, err
	}
	c, _, err := client(ctx)
	if err != nil {
		return nil, err
	}
	var urls []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &loc.Bucket, Prefix: &loc.Key})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, opError("list", prefix, err)
		}
		for _, o := range page.Contents {
			urls = append(urls, Location{loc.Bucket, aws.ToString(o.Key)}.String())
		}
	}
	slices.Sort(urls)
	return urls, nil
}

// Expand turns an input URL into the objects it names, in sorted order: a
// glob (s3://b/corpus/*.parquet; * and ? do not match "/", as in a shell)
// into the keys it matches, a prefix ending in "/" into the objects directly
// under it, any other URL into itself. A glob or prefix that matches nothing
// is an error naming it.
func Expand(ctx context.Context, url string) ([]string, error) {
	loc, err := Parse(url)
	if err != nil {
		return nil, err
	}
	dirOnly := strings.HasSuffix(loc.Key, "/") || loc.Key == ""
	if !HasGlob(loc.Key) && !dirOnly {
		return []string{url}, nil
	}
	lit := loc.Key
	if i := strings.IndexAny(lit, "*?["); i >= 0 {
		lit = lit[:i]
	}
	if _, err := path.Match(loc.Key, ""); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadURL, url, err)
	}
	all, err := List(ctx, Location{loc.Bucket, lit}.String())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range all {
		key := strings.TrimPrefix(u, Scheme+loc.Bucket+"/")
		if dirOnly {
			if rest := strings.TrimPrefix(key, loc.Key); rest != "" && !strings.Contains(rest, "/") {
				out = append(out, u)
			}
		} else if ok, _ := path.Match(loc.Key, key); ok {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, opError("list", url, ErrNoMatch)
	}
	return out, nil
}

// ErrNoMatch: a glob or prefix names no object.
var ErrNoMatch = errors.New("no object matches")

// NoMatch reports whether err is an Expand that found nothing.
func NoMatch(err error) bool { return errors.Is(err, ErrNoMatch) }
