package modelcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/io/files"
	"github.com/synapse-embed/synapse/io/readlimit"
)

// TestStoreTrust: a store another user could change — its root or an
// entry owned by another uid (a real one: 65534), or writable by others —
// is refused with ErrUntrusted naming the path and the owner or mode, for
// lookups and for additions; a FIFO in an entry is refused too. The
// issue's attack is the first case: another user owns SYNAPSE_MODELS and
// renames root's entry aside for one whose digest is rewritten to match.
func TestStoreTrust(t *testing.T) {
	tests := []struct {
		name     string
		stranger bool
		plant    func(t *testing.T, s *Store, e Entry)
		want     string
	}{
		{"root owned by another user", true, func(t *testing.T, s *Store, e Entry) { chown(t, s.Root) }, "is owned by uid 65534"},
		{"a parent owned by another user", true, func(t *testing.T, s *Store, e Entry) { chown(t, filepath.Dir(s.Root)) }, "is owned by uid 65534"},
		{"root writable by all", false, func(t *testing.T, s *Store, e Entry) { os.Chmod(s.Root, 0o777) }, "is writable by others (mode -rwxrwxrwx)"},
		{"an entry owned by another user", true, func(t *testing.T, s *Store, e Entry) { chown(t, e.Dir()) }, "is owned by uid 65534"},
		{"a model file owned by another user", true, func(t *testing.T, s *Store, e Entry) { chown(t, e.Path()) }, "is owned by uid 65534"},
		{"a model file writable by the group", false, func(t *testing.T, s *Store, e Entry) { os.Chmod(e.Path(), 0o664) }, "is writable by others (mode -rw-rw-r--)"},
		{"a FIFO in an entry", false, func(t *testing.T, s *Store, e Entry) {
			if err := syscall.Mkfifo(filepath.Join(e.Dir(), "tokenizer.json"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stranger {
				testenv.Stranger(t)
			}
			s := newStore(t)
			path, key, digest := writeFile(t, "GGUF model bytes")
			e, _ := add(t, s, path, key, digest, "m")
			tt.plant(t, s, e)
			_, err := s.Lookup("m")
			if !(errors.Is(err, files.ErrUntrusted) || errors.Is(err, readlimit.ErrNotRegular)) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Lookup: got %v; want ErrUntrusted saying %q", err, tt.want)
			}
			if _, err := s.Stage(); tt.name == "root writable by all" && !errors.Is(err, files.ErrUntrusted) {
				t.Errorf("Stage in a store writable by all: got %v; want ErrUntrusted", err)
			}
		})
	}
}

// TestStoreVerifiesOthersEntries: an entry this user does not own (root's,
// seen by another user: getuid says 65534 here) is used only after its
// files hash to what the entry says — the model file and every other file
// it lists; one changed, added or removed is refused.
func TestStoreVerifiesOthersEntries(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, e Entry)
		want   string // in Verify's error; "" for none
	}{
		{"intact", func(t *testing.T, e Entry) {}, ""},
		{"model file changed", func(t *testing.T, e Entry) { os.WriteFile(e.Path(), []byte("GGUF patched bytes"), 0o644) }, "is corrupt"},
		{"tokenizer changed", func(t *testing.T, e Entry) {
			os.WriteFile(filepath.Join(e.Dir(), "tokenizer.json"), []byte(`{"patched":1}`), 0o644)
		}, "tokenizer.json hashes to"},
		{"a file added", func(t *testing.T, e Entry) { os.WriteFile(filepath.Join(e.Dir(), "extra.json"), []byte(`{}`), 0o644) }, "extra.json is not among"},
		{"a file removed", func(t *testing.T, e Entry) { os.Remove(filepath.Join(e.Dir(), "tokenizer.json")) }, "tokenizer.json is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			path, key, digest := writeFile(t, "GGUF model bytes")
			st, err := s.Stage()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put(path, key, digest); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(st.Path("tokenizer.json"), []byte(`{"model":{}}`), 0o644)
			if _, _, err := st.Commit(Entry{Name: "m", Digest: digest, Size: key.Size, File: ModelFile, Stored: StoredCopy}); err != nil {
				t.Fatal(err)
			}
			mine, err := s.Lookup("m")
			if err != nil || mine.NeedsVerify() || len(mine.Files) != 1 {
				t.Fatalf("own entry: got %v, NeedsVerify %t, files %v; want no need to verify and the tokenizer's digest", err, mine.NeedsVerify(), mine.Files)
			}
			uid := getuid
			getuid = func() int { return testenv.StrangerUID }
			defer func() { getuid = uid }()
			e, err := s.Lookup("m")
			if err != nil || !e.NeedsVerify() {
				t.Fatalf("root's entry seen by another user: got %v, NeedsVerify %t; want it found, to be verified", err, e.NeedsVerify())
			}
			tt.change(t, e)
			err = s.Verify(e)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Verify: got %v; want %q", err, tt.want)
			}
		})
	}
}

// TestPutCopiesOthersFiles: a file another user owns, or others may write,
// is copied into the store, never hard-linked (a link shares its owner and
// mode, so that user could change the cached model).
func TestPutCopiesOthersFiles(t *testing.T) {
	for _, stranger := range []bool{false, true} {
		if stranger {
			testenv.Stranger(t)
		}
		s := newStore(t)
		path, key, digest := writeFile(t, "GGUF model bytes")
		os.Chmod(path, 0o666)
		if stranger {
			os.Chmod(path, 0o644)
			chown(t, path)
		}
		key, _ = KeyOf(path)
		e, _ := add(t, s, path, key, digest, "m")
		if e.Stored != StoredCopy {
			t.Errorf("stranger %t: stored %s; want %s", stranger, e.Stored, StoredCopy)
		}
	}
}

func chown(t *testing.T, path string) {
	t.Helper()
	if err := os.Chown(path, testenv.StrangerUID, testenv.StrangerUID); err != nil {
		t.Fatal(err)
	}
}

// TestStoreDirsTrust: the store's own directories and files besides its
// entries — tmp/ (staging), locks/ and digests.json — owned by another
// user (a real uid, 65534) or writable by others are refused with
// ErrUntrusted naming the path, by the call that would use them.
func TestStoreDirsTrust(t *testing.T) {
	tests := []struct {
		name     string
		stranger bool
		rel      string
		spoil    func(t *testing.T, p string)
		use      func(s *Store, file string) error
		want     string
	}{
		{"tmp owned by another user", true, "tmp", chown, func(s *Store, _ string) error { _, err := s.Stage(); return err }, "is owned by uid 65534"},
		{"locks owned by another user", true, "locks", chown, func(s *Store, _ string) error {
			_, err := s.LockKey(context.Background(), "k", nil)
			return err
		}, "is owned by uid 65534"},
		{"locks writable by all", false, "locks", func(t *testing.T, p string) { os.Chmod(p, 0o777) }, func(s *Store, _ string) error {
			_, err := s.LockKey(context.Background(), "k", nil)
			return err
		}, "is writable by others"},
		{"digests.json owned by another user", true, digestCacheFile, chown, func(s *Store, file string) error { _, _, err := s.Digest(file); return err }, "is owned by uid 65534"},
		{"digests.json writable by the group", false, digestCacheFile, func(t *testing.T, p string) { os.Chmod(p, 0o664) }, func(s *Store, file string) error { _, _, err := s.Digest(file); return err }, "is writable by others"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stranger {
				testenv.Stranger(t)
			}
			s := newStore(t)
			path, key, digest := writeFile(t, "GGUF model bytes")
			s.RecordDigest(key, digest) // makes tmp/ and digests.json
			if _, err := s.LockKey(context.Background(), "k", nil); err != nil {
				t.Fatal(err)
			}
			tt.spoil(t, filepath.Join(s.Root, tt.rel))
			err := tt.use(s, path)
			if !errors.Is(err, files.ErrUntrusted) || !strings.Contains(err.Error(), filepath.Join(s.Root, tt.rel)+" "+tt.want) {
				t.Errorf("got %v; want ErrUntrusted naming %s and saying %q", err, tt.rel, tt.want)
			}
		})
	}
}
