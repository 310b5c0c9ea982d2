package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PartSize is the size of an upload's parts (and its buffer). It doubles
// after every 1000 parts, to stay within S3's 10,000 parts per object.
const PartSize = 8 << 20

// abortTimeout bounds the request that aborts an upload: the run's own
// context may be done already.
const abortTimeout = 30 * time.Second

// Upload is an object being written: see the package documentation. One
// goroutine owns it.
type Upload struct {
	ctx      context.Context
	c        *s3.Client
	url      string
	loc      Location
	buf      []byte
	partSize int
	id       string // multipart upload ID, "" before the first full part
	parts    []types.CompletedPart
	n        int64
	done     bool
	err      error // the first failure; every later call returns it
}

// Create starts writing the object at url; nothing is visible there before
// Commit. ctx bounds the upload: once it is done, Write and Commit fail and
// the upload is aborted.
func Create(ctx context.Context, url string) (*Upload, error) {
	loc, err := Parse(url)
	if err != nil {
		return nil, err
	}
	if loc.Key == "" || loc.Key[len(loc.Key)-1] == '/' {
		return nil, fmt.Errorf("%w: %s names no object", ErrBadURL, url)
	}
	c, _, err := client(ctx)
	if err != nil {
		return nil, err
	}
	return &Upload{ctx: ctx, c: c, url: url, loc: loc, partSize: PartSize}, nil
}

// Name is the URL being written.
func (u *Upload) Name() string { return u.url }

// Write buffers p, sending a part whenever the buffer is full.
func (u *Upload) Write(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	if u.done {
		return 0, fmt.Errorf("objstore: write %s: upload already finished", u.url)
	}
	written := 0
	for len(p) > 0 {
		if u.buf == nil {
			u.buf = make([]byte, 0, u.partSize)
		}
		k := min(len(p), u.partSize-len(u.buf))
		u.buf = append(u.buf, p[:k]...)
		p, written = p[k:], written+k
		if len(u.buf) == u.partSize {
			if err := u.sendPart(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// sendPart uploads the buffer as the next part.
func (u *Upload) sendPart() error {
	if u.id == "" {
		out, err := u.c.CreateMultipartUpload(u.ctx, &s3.CreateMultipartUploadInput{Bucket: &u.loc.Bucket, Key: &u.loc.Key})
		if err != nil {
			return u.fail(err)
		}
		u.id = aws.ToString(out.UploadId)
	}
	num := int32(len(u.parts) + 1)
	out, err := u.c.UploadPart(u.ctx, &s3.UploadPartInput{Bucket: &u.loc.Bucket, Key: &u.loc.Key, UploadId: &u.id,
		PartNumber: &num, Body: bytes.NewReader(u.buf), ContentLength: aws.Int64(int64(len(u.buf)))})
	if err != nil {
		return u.fail(err)
	}
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &num})
	u.n += int64(len(u.buf))
	stats.sent.Add(int64(len(u.buf)))
	u.buf = u.buf[:0]
	if len(u.parts)%1000 == 0 {
		u.partSize *= 2
		u.buf = nil
	}
	return nil
}

// fail aborts the upload and keeps err (with the URL) for every later call.
func (u *Upload) fail(err error) error {
	u.err = opError("write", u.url, err)
	u.abort()
	return u.err
}

// Commit sends what is buffered and completes the upload: only now does
// the object appear under its key. A failed Commit aborts the upload.
func (u *Upload) Commit() error {
	if u.err != nil {
		return u.err
	}
	if u.done {
		return nil
	}
	if err := u.ctx.Err(); err != nil {
		return u.fail(err)
	}
	if u.id == "" { // one part's worth or less: one PUT
		_, err := u.c.PutObject(u.ctx, &s3.PutObjectInput{Bucket: &u.loc.Bucket, Key: &u.loc.Key,
			Body: bytes.NewReader(u.buf), ContentLength: aws.Int64(int64(len(u.buf)))})
		if err != nil {
			return u.fail(err)
		}
		stats.sent.Add(int64(len(u.buf)))
		u.done, u.buf = true, nil
		return nil
	}
	if len(u.buf) > 0 {
		if err := u.sendPart(); err != nil {
			return err
		}
	}
	_, err := u.c.CompleteMultipartUpload(u.ctx, &s3.CompleteMultipartUploadInput{Bucket: &u.loc.Bucket, Key: &u.loc.Key,
		UploadId: &u.id, MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts}})
	if err != nil {
		return u.fail(err)
	}
	u.done, u.buf = true, nil
	return nil
}

// Abort drops the upload: nothing appears under the key. Abort after
// Commit, or twice, does nothing.
func (u *Upload) Abort() {
	if u.done {
		return
	}
	if u.err == nil {
		u.err = fmt.Errorf("objstore: write %s: upload aborted", u.url)
	}
	u.abort()
}

func (u *Upload) abort() {
	u.done, u.buf = true, nil
	if u.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(u.ctx), abortTimeout)
	defer cancel()
	// If this fails too (the server is gone), the incomplete upload stays
	// invisible until AbortStale or the bucket's lifecycle rule removes it.
	u.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &u.loc.Bucket, Key: &u.loc.Key, UploadId: &u.id})
	u.id = ""
}

// AbortStale aborts the incomplete multipart uploads of url's key that
// began before since: those of runs killed mid-upload. It returns how many
// it aborted.
func AbortStale(ctx context.Context, url string, since time.Time) (int, error) {
	loc, err := Parse(url)
	if err != nil {
		return 0, err
	}
	c, _, err := client(ctx)
	if err != nil {
		return 0, err
	}
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &loc.Bucket, Prefix: &loc.Key})
	if err != nil {
		return 0, opError("list uploads", url, err)
	}
	n := 0
	for _, up := range out.Uploads {
		if aws.ToString(up.Key) != loc.Key || !aws.ToTime(up.Initiated).Before(since) {
			continue
		}
		if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &loc.Bucket, Key: &loc.Key, UploadId: up.UploadId}); err != nil {
			return n, opError("abort upload", url, err)
		}
		n++
	}
	return n, nil
}

// WriteFile writes a small object (a manifest) by one PUT: it appears
// whole or not at all.
func WriteFile(ctx context.Context, url string, b []byte) error {
	u, err := Create(ctx, url)
	if err != nil {
		return err
	}
	if _, err := u.Write(b); err != nil {
		return err
	}
	return u.Commit()
}

// Remove deletes the object at url; an object that does not exist is not
// an error.
func Remove(ctx context.Context, url string) error {
	loc, err := Parse(url)
	if err != nil {
		return err
	}
	c, _, err := client(ctx)
	if err != nil {
		return err
	}
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &loc.Bucket, Key: &loc.Key})
	if err != nil && !NotFound(err) {
		return opError("remove", url, err)
	}
	return nil
}

// Exists reports whether an object is at url.
func Exists(ctx context.Context, url string) (bool, error) {
	_, err := Stat(ctx, url)
	switch {
	case err == nil:
		return true, nil
	case NotFound(err) && !noSuchBucket(err):
		return false, nil
	}
	return false, err
}

func noSuchBucket(err error) bool {
	var nb *types.NoSuchBucket
	return errors.As(err, &nb)
}

// CheckBucket fails, before any work, when the bucket of url cannot be
// written to as far as can be known without writing: it does not exist,
// or the credentials are refused. The error names the bucket.
func CheckBucket(ctx context.Context, url string) error {
	loc, err := Parse(url)
	if err != nil {
		return err
	}
	c, _, err := client(ctx)
	if err != nil {
		return err
	}
	_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &loc.Bucket})
	if err == nil {
		return nil
	}
	if NotFound(err) {
		return &Error{Op: "bucket", URL: Scheme + loc.Bucket, Err: &types.NoSuchBucket{Message: aws.String("no such bucket")}}
	}
	return opError("bucket", Scheme+loc.Bucket, err)
}
