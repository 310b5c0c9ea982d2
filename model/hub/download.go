package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrChecksum marks a downloaded file whose size or digest is not what the
// Hub announced for it.
var ErrChecksum = errors.New("checksum mismatch")

// errStalled cuts a download that delivers no byte for Client.Stall.
var errStalled = errors.New("stalled")

// Progress is told how far a download has come: done of size bytes of the
// file name are on disk (done == size at the end).
type Progress func(name string, done, size int64)

// Download fetches f of repository id at commit into dst: into dst.part
// first, resumed with a Range request where an earlier attempt (or an
// earlier run) left it, checked against f's size and sha256 (LFS files) or
// git blob id, then renamed to dst. A transient failure is tried again
// Client.Attempts times; a file that fails its check after a download from
// the first byte is ErrChecksum (one that fails after a resumed download is
// fetched once more from the start first).
func (c *Client) Download(ctx context.Context, id, commit string, f File, dst string, progress Progress) error {
	part := dst + ".part"
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	u := c.ResolveURL(id, commit, f.Name)
	resumed, restarted := false, false
	for n := 1; ; {
		have := partSize(part, f.Size)
		resumed = resumed || have > 0
		var err error
		var sum *digest // what fetch wrote, hashed as it was written
		if have < f.Size {
			if have > 0 {
				c.log("%s: resuming at %s of %s", f.Name, Bytes(have), Bytes(f.Size))
			}
			sum, err = c.fetch(ctx, u, part, have, f, progress)
		}
		if err == nil {
			if sum != nil {
				err = sum.check(f)
			} else {
				err = verify(part, f) // an earlier attempt's complete file
			}
			if errors.Is(err, ErrChecksum) && resumed && !restarted {
				c.log("%v; fetching it again from the start", err)
				os.Remove(part)
				resumed, restarted = false, true
				continue
			}
			if err != nil {
				os.Remove(part) // its bytes are wrong: the next run starts over
				return err
			}
			if err := os.Rename(part, dst); err != nil {
				return err
			}
			return nil
		}
		var te transientError
		if !errors.As(err, &te) || ctx.Err() != nil {
			if errors.Is(err, ErrChecksum) {
				os.Remove(part)
			}
			return err
		}
		if n == c.attempts() {
			return fmt.Errorf("%w (after %d attempts; run again to resume from %s)", err, n, part)
		}
		n++
		c.log("%v; trying again (attempt %d of %d)", err, n, c.attempts())
		if err := c.wait(ctx, n-1); err != nil {
			return err
		}
	}
}

// partSize is the size of a partial download, 0 when there is none or it
// is longer than the file (it is then removed).
func partSize(part string, size int64) int64 {
	st, err := os.Stat(part)
	if err != nil {
		return 0
	}
	if st.Size() > size {
		os.Remove(part)
		return 0
	}
	return st.Size()
}

// fetch appends to part the bytes of f from offset have on, in one
// request, and returns the digest of the whole file as written (the bytes
// before have read back from part).
func (c *Client) fetch(ctx context.Context, u, part string, have int64, f File, progress Progress) (*digest, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var header map[string]string
	if have > 0 {
		header = map[string]string{"Range": fmt.Sprintf("bytes=%d-", have)}
	}
	stall := c.stall()
	timer := time.AfterFunc(stall, func() { cancel(errStalled) }) // from the request on: an answer that never comes is cut too
	defer timer.Stop()
	resp, err := c.get(actx, u, header)
	if err != nil {
		return nil, c.fetchOutcome(ctx, actx, err, f, have, stall)
	}
	defer resp.Body.Close()
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	switch resp.StatusCode {
	case http.StatusOK:
		have, flags = 0, flags|os.O_TRUNC // the whole file, from the first byte
	case http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			os.Remove(part)
			return nil, transientError{fmt.Errorf("%s: asked for bytes %d on, got Content-Range %q; starting over", f.Name, have, resp.Header.Get("Content-Range"))}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		os.Remove(part)
		return nil, transientError{fmt.Errorf("%s: the server cannot resume at byte %d; starting over", f.Name, have)}
	default:
		return nil, c.statusError(resp, "file "+f.Name)
	}
	sum, err := newDigest(f, part, have)
	if err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(part, flags, 0o644)
	if err != nil {
		return nil, err
	}
	w := &progressWriter{w: io.MultiWriter(fh, sum), name: f.Name, done: have, size: f.Size, progress: progress}
	n, err := io.Copy(w, &stallReader{r: resp.Body, timer: timer, stall: stall})
	if cerr := fh.Close(); err == nil && cerr != nil {
		return nil, cerr
	}
	return sum, c.fetchOutcome(ctx, actx, err, f, have+n, stall)
}

// fetchOutcome says what a download that ended with err at got bytes of
// f's means.
func (c *Client) fetchOutcome(ctx, actx context.Context, err error, f File, got int64, stall time.Duration) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, ErrChecksum):
		return err
	case errors.Is(context.Cause(actx), errStalled):
		return transientError{fmt.Errorf("%s: nothing came for %v at %d of %d bytes; cut", f.Name, stall, got, f.Size)}
	case c.unresolved(f.Name, err) != nil:
		return c.unresolved(f.Name, err)
	case err != nil:
		return transientError{fmt.Errorf("%s: connection dropped at %d of %d bytes: %w", f.Name, got, f.Size, err)}
	case got < f.Size:
		return transientError{fmt.Errorf("%s: connection closed at %d of %d bytes", f.Name, got, f.Size)}
	}
	return nil
}

// rangeStart reads the first byte of a Content-Range: "bytes START-END/SIZE".
func rangeStart(cr string) (int64, bool) {
	s, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok = strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// stallReader pushes the stall deadline back whenever bytes arrive.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	stall time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.stall)
	}
	return n, err
}

// progressWriter writes to w, refusing bytes past size (the file is then
// not the one announced), and reports each write.
type progressWriter struct {
	w          io.Writer
	name       string
	done, size int64
	progress   Progress
}

func (p *progressWriter) Write(b []byte) (int, error) {
	if p.done+int64(len(b)) > p.size {
		return 0, fmt.Errorf("%s: %w: more than the %d bytes announced", p.name, ErrChecksum, p.size)
	}
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.progress != nil {
		p.progress(p.name, p.done, p.size)
	}
	return n, err
}

// digest hashes a file as f is checked: sha256 for an LFS file, else its
// git blob id (sha1 of "blob SIZE\x00" and the bytes).
type digest struct {
	hash.Hash
	n int64
}

func (d *digest) Write(b []byte) (int, error) {
	d.n += int64(len(b))
	return d.Hash.Write(b)
}

// newDigest starts f's digest over the first have bytes of the file at
// path (none when have is 0).
func newDigest(f File, path string, have int64) (*digest, error) {
	d := &digest{Hash: sha1.New()}
	if f.LFS != nil {
		d.Hash = sha256.New()
	} else {
		fmt.Fprintf(d.Hash, "blob %d\x00", f.Size)
	}
	if have == 0 {
		return d, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if _, err := io.CopyN(d, fh, have); err != nil {
		return nil, fmt.Errorf("%s: reading back the partial download: %w", f.Name, err)
	}
	return d, nil
}

// check compares the digest with what the Hub announced for f.
func (d *digest) check(f File) error {
	want, kind := f.BlobID, "git blob id"
	if f.LFS != nil {
		want, kind = f.LFS.SHA256, "sha256"
	}
	got := hex.EncodeToString(d.Sum(nil))
	if d.n != f.Size || !strings.EqualFold(got, want) {
		return fmt.Errorf("%s: %w: got %d bytes with %s %s; the Hub announced %d bytes with %s %s",
			f.Name, ErrChecksum, d.n, kind, got, f.Size, kind, strings.ToLower(want))
	}
	return nil
}

// verify checks the file at path against f.
func verify(path string, f File) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	d, err := newDigest(f, path, st.Size())
	if err != nil {
		return err
	}
	return d.check(f)
}
