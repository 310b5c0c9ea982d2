// Package objstore reads and writes objects in S3-compatible storage, named
// by s3://bucket/key URLs, so that every path synapse reads or writes can be
// one.
//
// # Reading
//
// [Open] returns a [File]: its ReadAt is one ranged GET (a Parquet reader
// fetches the footer, then only the column chunks it reads), its Read a
// streaming GET from the current offset (JSON Lines are streamed, never
// downloaded whole first). Every GET after the first names the ETag the
// object had when it was opened (If-Match): an object rewritten while it is
// read fails with an error naming it instead of mixing two versions. A body
// cut short mid-stream is fetched again from where it stopped.
//
// # Writing
//
// [Create] returns an [Upload]: its bytes are buffered one part (8 MiB) at a
// time and sent as the parts of a multipart upload, so memory stays bounded
// whatever the object's size. Nothing is visible under the key until
// [Upload.Commit] completes the upload (an object smaller than one part is
// sent by one PUT at Commit); [Upload.Abort], or a Commit that fails, aborts
// the multipart upload. A process killed mid-upload leaves an incomplete
// multipart upload, never an object: [AbortStale] removes those of a key.
//
// # Configuration
//
// Credentials, region and endpoint come from the AWS SDK's standard chain:
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, AWS_PROFILE and
// the shared config and credentials files, web identity (AWS_ROLE_ARN with
// AWS_WEB_IDENTITY_TOKEN_FILE, as Kubernetes service accounts set them),
// container and instance metadata. AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3,
// or endpoint_url in the shared config) names an S3-compatible server; with
// one, requests are addressed path-style (http://host:port/bucket/key), as
// MinIO, SeaweedFS, versitygw and most S3-compatible servers expect.
// SYNAPSE_S3_ADDRESSING=virtual (or path) overrides that choice. Without a
// region, us-east-1 is used.
//
// # Retries
//
// Transient failures (5xx, throttling, connection refused or reset,
// timeouts) are retried by the SDK's standard retryer with exponential
// backoff and jitter, AWS_MAX_ATTEMPTS attempts in all (default 5), without
// its retry quota (a batch job retries each request on its own); a body cut
// mid-stream is retried here the same way. [Counters] counts them.
// Permanent failures (no such bucket or key, access denied, bad
// credentials) are not retried: [Permanent] tells them apart.
package objstore

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Scheme is the URL scheme of objects in S3-compatible storage.
const Scheme = "s3://"

// IsURL reports whether name is an object URL (s3://…) rather than a local path.
func IsURL(name string) bool { return strings.HasPrefix(name, Scheme) }

// Location is an object's bucket and key.
type Location struct{ Bucket, Key string }

// String is the location's URL.
func (l Location) String() string { return Scheme + l.Bucket + "/" + l.Key }

// ErrBadURL: an s3:// URL without a bucket, or with an empty or "."/".." key segment.
var ErrBadURL = errors.New("objstore: bad s3:// URL")

// Parse splits s3://bucket/key. The key may be empty (a bucket, or a
// prefix ending in "/"); it is never cleaned: S3 keys are strings, and
// "a//b" and "a/b" are different objects.
func Parse(url string) (Location, error) {
	if !IsURL(url) {
		return Location{}, fmt.Errorf("%w: %q does not start with %s", ErrBadURL, url, Scheme)
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(url, Scheme), "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("%w: %q has no bucket", ErrBadURL, url)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return Location{}, fmt.Errorf("%w: %q has a %q segment", ErrBadURL, url, seg)
		}
	}
	return Location{Bucket: bucket, Key: key}, nil
}

// Dir is the URL up to and including the last "/" of its key (its "directory").
func Dir(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= len(Scheme) {
		return url[:i+1]
	}
	return url
}

// Beside is name resolved next to ref: name itself when it is a URL or an
// absolute local path, else ref's directory joined with name's base name.
// Manifests name their parts this way, so that a sharded run's files can be
// moved (or copied to a bucket) together.
func Beside(ref, name string) string {
	if IsURL(name) || (!IsURL(ref) && filepath.IsAbs(name)) {
		return name
	}
	if IsURL(ref) {
		return Dir(ref) + path.Base(name)
	}
	return filepath.Join(filepath.Dir(ref), filepath.Base(name))
}

// HasGlob reports whether a URL's key has a glob metacharacter (* ? [).
func HasGlob(url string) bool { return strings.ContainsAny(url, "*?[") }

// ErrScheme: a URL of a scheme other than s3:// where a path goes.
var ErrScheme = errors.New("objstore: unsupported URL scheme")

// CheckScheme refuses a name that is a URL of another scheme (gs://,
// azblob://, https://, ...): only s3:// is supported, and such a name must
// not be taken for a local file name.
func CheckScheme(name string) error {
	scheme, _, ok := strings.Cut(name, "://")
	if !ok || IsURL(name) || scheme == "" || strings.ContainsAny(scheme, "/.") {
		return nil
	}
	return fmt.Errorf("%w: %s (object storage is s3:// only; S3-compatible stores through AWS_ENDPOINT_URL)", ErrScheme, name)
}
