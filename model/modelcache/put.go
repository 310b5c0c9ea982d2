package modelcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/gguf"
)

// How Put stored a file (Entry.Stored).
const (
	StoredHardlink  = "hardlink"
	StoredCopy      = "copy"
	StoredQuantized = "quantized"
	StoredConverted = "converted"
)

// ErrChanged means a file's contents changed while it was being added.
var ErrChanged = errors.New("changed while being added")

// Put places the file at src, whose key and digest the caller took, in the
// staging directory as ModelFile: a hard link when the file system allows
// one, else a copy, hashed as it is written. The user's file is never moved.
// A file that no longer matches digest is ErrChanged.
func (st *Staging) Put(src string, key FileKey, digest string) (stored string, err error) {
	return st.PutAs(src, ModelFile, key, digest)
}

// PutAs is Put with the file's name in the entry (ONNXFile for a graph).
func (st *Staging) PutAs(src, name string, key FileKey, digest string) (stored string, err error) {
	if name != ModelFile && name != ONNXFile {
		return "", fmt.Errorf("modelcache: put %s: want %s or %s", name, ModelFile, ONNXFile)
	}
	dst := st.Path(name)
	src, err = filepath.EvalSymlinks(src) // link the file, not a symbolic link to it
	if err != nil {
		return "", fmt.Errorf("modelcache: %w", err)
	}
	if linkable(src) && os.Link(src, dst) == nil {
		got, err := KeyOf(dst)
		if err != nil {
			return "", err
		}
		got.Path = key.Path
		if got == key {
			return StoredHardlink, nil
		}
		os.Remove(dst) // changed since it was hashed: copy and hash it again
	}
	got, err := copyHashed(src, dst)
	if err != nil {
		return "", err
	}
	if got != digest {
		return "", fmt.Errorf("modelcache: %s: %w (digest %s, now %s); add it again", src, ErrChanged, digest, got)
	}
	return StoredCopy, nil
}

// CopyIn copies the files of files (path in the entry → file to read, as
// hfmodel.Files.Sidecars returns them) into the staging directory. A path
// that is not local, or names the entry's own files, is refused.
func (st *Staging) CopyIn(files map[string]string) error {
	for rel, src := range files {
		p := filepath.FromSlash(rel)
		if !filepath.IsLocal(p) || p == EntryFile || p == ModelFile || p == ONNXFile {
			return fmt.Errorf("modelcache: copy %s: %q is not a file an entry may hold", src, rel)
		}
		dst := st.Path(rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("modelcache: %w", err)
		}
		if _, err := copyHashed(src, dst); err != nil {
			return err
		}
	}
	return nil
}

// Sidecars returns the files of entry e besides its model file and
// entry.json, as CopyIn takes them: a quantized variant of an ONNX model
// carries its source's.
func (e Entry) Sidecars() (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(e.dir, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(e.dir, p)
		if err != nil || de.IsDir() || rel == EntryFile || rel == e.File {
			return err
		}
		out[filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("modelcache: %s: %w", e.Name, err)
	}
	return out, nil
}

// copyHashed copies src to the new file dst, syncs it, and returns the
// digest of the bytes written.
func copyHashed(src, dst string) (string, error) {
	in, err := readlimit.Open(src)
	if err != nil {
		return "", fmt.Errorf("modelcache: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("modelcache: %w", err)
	}
	h := sha256.New()
	err = out.Chmod(0o644) // whatever the umask: others may not write a store's files
	if err == nil {
		_, err = io.Copy(io.MultiWriter(out, h), in)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("modelcache: copy %s: %w", src, err)
	}
	return digestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// CorruptError reports a cached file whose bytes no longer match its digest.
type CorruptError struct {
	Entry      Entry
	File       string // the file that differs: "" for the model file, else a sidecar's path
	Size       int64
	Digest     string // what the file hashes to now
	WantSize   int64
	WantDigest string
}

func (e *CorruptError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("modelcache: %s is corrupt: %s hashes to %s; its entry says %s", e.Entry.Name, e.File, e.Digest, e.WantDigest)
	}
	return fmt.Sprintf("modelcache: %s (%s) is corrupt: %d bytes hashing to %s; want %d bytes, %s",
		e.Entry.Name, e.Entry.Path(), e.Size, e.Digest, e.WantSize, e.WantDigest)
}

// Verify hashes an entry's files again (the model file, and the others
// its entry lists in Files) and returns *CorruptError when one no longer
// matches the entry.
func (s *Store) Verify(e Entry) error {
	size, digest, err := gguf.Digest(e.Path())
	if err != nil {
		return fmt.Errorf("modelcache: verify %s: %w", e.Name, err)
	}
	if size != e.Size || digest != e.Digest {
		return &CorruptError{Entry: e, Size: size, Digest: digest, WantSize: e.Size, WantDigest: e.Digest}
	}
	return verifySidecars(e)
}

// linkable reports whether the user's file src may be hard-linked into a
// store: only a file of this user's that others may not write, since the
// link shares its owner and mode (a copy is made otherwise).
func linkable(src string) bool {
	fi, err := os.Lstat(src)
	if err != nil || files.CheckTrusted(src, fi, getuid()) != nil {
		return false
	}
	owner, ok := files.Owner(fi)
	return !ok || owner == getuid()
}
