package modelcache

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/gguf"
)

// digestCacheFile holds the digests of files outside the store.
const digestCacheFile = "digests.json"

// maxDigests bounds the digest cache; the least recently recorded go first.
const maxDigests = 512

// FileKey identifies a file's contents without reading them: a file with
// the same path, size, modification time, device and inode is taken to hold
// the same bytes. (A rewrite that restores the modification time defeats
// it; a worker still verifies the digest before loading.)
type FileKey struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModNano int64  `json:"mtime_ns"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
}

// KeyOf stats path (following links) and returns its key.
func KeyOf(path string) (FileKey, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return FileKey{}, fmt.Errorf("modelcache: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return FileKey{}, fmt.Errorf("modelcache: %w", err)
	}
	k := FileKey{Path: abs, Size: st.Size(), ModNano: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		k.Dev, k.Ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	return k, nil
}

type digestRecord struct {
	FileKey
	Digest string    `json:"digest"`
	Used   time.Time `json:"used"`
}

// Digest returns the size and "sha256:<hex>" digest of the file at path:
// the entry's own for a model file in a store, a digest recorded in this
// store's digest cache for an unchanged file, else a fresh one, which is
// then recorded. Failing to record it is not an error: the cache only
// saves time.
func (s *Store) Digest(path string) (size int64, digest string, err error) {
	if e, ok := EntryFor(path); ok {
		return e.Size, e.Digest, nil
	}
	key, err := KeyOf(path)
	if err != nil {
		return 0, "", err
	}
	if d, ok, err := s.cachedDigest(key); err != nil || ok {
		return key.Size, d, err
	}
	size, digest, err = gguf.Digest(key.Path)
	if err != nil {
		return 0, "", err
	}
	if after, err := KeyOf(path); err == nil && after == key { // not changed while hashing
		s.RecordDigest(key, digest)
	}
	return size, digest, nil
}

// cachedDigest looks key up in the digest cache. A digest cache another
// user could have written (in a store she could change, or hers, or
// writable by others) is refused: its digests would name her model as the
// file the user chose.
func (s *Store) cachedDigest(key FileKey) (string, bool, error) {
	path := filepath.Join(s.Root, digestCacheFile)
	if _, err := os.Lstat(path); err == nil {
		if err := s.checkRoot(); err != nil {
			return "", false, err
		}
		if err := checkOne(path); err != nil {
			return "", false, err
		}
	}
	for _, r := range s.readDigests() {
		if r.FileKey == key {
			return r.Digest, true, nil
		}
	}
	return "", false, nil
}

// RecordDigest records that the file with key has digest.
func (s *Store) RecordDigest(key FileKey, digest string) {
	unlock, err := s.lockStore()
	if err != nil {
		return
	}
	defer unlock()
	recs := s.readDigests()
	kept := recs[:0]
	for _, r := range recs {
		if r.Path != key.Path {
			kept = append(kept, r)
		}
	}
	kept = append(kept, digestRecord{FileKey: key, Digest: digest, Used: time.Now().UTC()})
	sort.Slice(kept, func(i, j int) bool { return kept[i].Used.After(kept[j].Used) })
	if len(kept) > maxDigests {
		kept = kept[:maxDigests]
	}
	b, err := json.MarshalIndent(kept, "", " ")
	if err != nil {
		return
	}
	tmp := filepath.Join(s.tmpDir(), fmt.Sprintf("digests-%d.json", os.Getpid()))
	if writeFileSync(tmp, b) == nil {
		if os.Rename(tmp, filepath.Join(s.Root, digestCacheFile)) != nil {
			os.Remove(tmp)
		}
	}
}

// readDigests reads the digest cache; a missing or unreadable one is empty.
func (s *Store) readDigests() []digestRecord {
	b, err := readlimit.ReadFile(filepath.Join(s.Root, digestCacheFile), readlimit.Config)
	if err != nil {
		return nil
	}
	var recs []digestRecord
	if json.Unmarshal(b, &recs) != nil {
		return nil
	}
	return recs
}
