package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/synapse-embed/synapse/io/objstore"
)

// Version identifies the contents of an input file or object as a range
// shard found it: an object by its ETag (and version id, on a bucket with
// versioning), a file by its size and modification time. Two shards that
// read different versions of one input read different data, whatever its
// size.
type Version struct {
	Size      int64  `json:"size"`
	ModTime   string `json:"mtime,omitempty"` // a file's, RFC 3339 with nanoseconds, UTC
	ETag      string `json:"etag,omitempty"`  // an object's
	VersionID string `json:"version_id,omitempty"`
}

// VersionOf returns the version of the file or object name.
func VersionOf(ctx context.Context, name string) (Version, error) {
	if objstore.IsURL(name) {
		info, err := objstore.Stat(ctx, name)
		if err != nil {
			return Version{}, err
		}
		return Version{Size: info.Size, ETag: info.ETag, VersionID: info.VersionID}, nil
	}
	st, err := os.Stat(name)
	if err != nil {
		return Version{}, err
	}
	return Version{Size: st.Size(), ModTime: st.ModTime().UTC().Format(time.RFC3339Nano)}, nil
}

// String says what the version is, as errors name it.
func (v Version) String() string {
	if v.ETag != "" || v.VersionID != "" {
		s := fmt.Sprintf("%d bytes, etag %s", v.Size, v.ETag)
		if v.VersionID != "" {
			s += ", version " + v.VersionID
		}
		return s
	}
	return fmt.Sprintf("%d bytes, modified %s", v.Size, v.ModTime)
}

// HashRange returns "sha256:<hex>" of the bytes [start, end) of the file
// or object name (end -1: to its end).
func HashRange(ctx context.Context, name string, start, end int64) (string, error) {
	f, size, err := OpenRandom(ctx, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if end < 0 || end > size {
		end = size
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, start, max(end-start, 0))); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
