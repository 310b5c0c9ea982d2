package gguf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// DigestPrefix starts every artifact digest.
const DigestPrefix = "sha256:"

// Digest returns the size of the file at path and its artifact digest,
// "sha256:<64 lowercase hex digits>" of its bytes, as protocol v1's LOAD
// carries it.
func Digest(path string) (size int64, digest string, err error) {
	fh, err := readlimit.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return 0, "", fmt.Errorf("gguf: digest %s: %w", path, err)
	}
	return n, DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}
