package modelcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
)

// Trust. A store is used only when another user cannot change it: its root
// and every directory above it (files.TrustedPath), and every entry's
// directory and files (files.CheckTrusted), must be owned by this user or
// by root, and not writable by others. A store or entry that fails is
// refused with files.ErrUntrusted, naming the path and its owner: root
// running `models add` into a directory another user owns would otherwise
// run whatever model that user renamed into place.
//
// An entry that this user does not own in full (root's, in a shared
// store) is trusted only after its files are hashed again against the
// entry (Verify): the model file against Digest, the others against Files.

// getuid is os.Getuid; tests of an entry owned by someone else replace it.
var getuid = os.Getuid

// checkRoot refuses a store whose root another user could change. A store
// that does not exist yet is empty, and trusted.
func (s *Store) checkRoot() error {
	if _, err := os.Lstat(s.Root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := files.TrustedPath(s.Root); err != nil {
		return fmt.Errorf("model cache %s: %w (use a cache of your own: set %s)", s.Root, err, EnvDir)
	}
	return nil
}

// checkEntry checks an entry's directory and everything in it: regular
// files and directories only, each trusted. It reports whether this user
// owns them all (else the entry must be verified before use).
func checkEntry(dir string) (owned bool, err error) {
	uid := getuid()
	owned = true
	err = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is %v, not a regular file", readlimit.ErrNotRegular, p, fi.Mode().Type())
		}
		if err := files.CheckTrusted(p, fi, uid); err != nil {
			return err
		}
		if o, ok := files.Owner(fi); ok && o != uid {
			owned = false
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("model cache entry %s: %w", dir, err)
	}
	return owned, nil
}

// sidecarDigests hashes the files of an entry directory besides entry.json
// and the model file, by their slash-separated paths in it.
func sidecarDigests(dir, model string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == EntryFile || rel == model {
			return err
		}
		d, err := hashFile(p)
		out[filepath.ToSlash(rel)] = d
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("modelcache: %w", err)
	}
	return out, nil
}

// hashFile is "sha256:<hex>" of a regular file's bytes.
func hashFile(path string) (string, error) {
	f, err := readlimit.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return digestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// NeedsVerify reports an entry this user does not own in full: its files
// must be hashed again (Verify) before it is used.
func (e Entry) NeedsVerify() bool { return !e.owned }

// verifySidecars checks an entry's other files against Files: each file
// there must be listed, and hash to what it lists.
func verifySidecars(e Entry) error {
	got, err := sidecarDigests(e.dir, e.File)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		want, ok := e.Files[n]
		switch {
		case !ok:
			return fmt.Errorf("modelcache: %s: %s is not among the files its entry lists (an entry of an older synapse: add the model again)", e.Name, filepath.Join(e.dir, n))
		case got[n] != want:
			return &CorruptError{Entry: e, File: filepath.Join(e.dir, n), Digest: got[n], WantDigest: want}
		}
	}
	for n := range e.Files {
		if _, ok := got[n]; !ok {
			return fmt.Errorf("modelcache: %s: %s is missing", e.Name, filepath.Join(e.dir, n))
		}
	}
	return nil
}
