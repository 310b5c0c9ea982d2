package modelcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/model/gguf"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "models"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeFile writes a user's file and returns its path, key and digest.
func writeFile(t *testing.T, content string) (string, FileKey, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "user.gguf")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := KeyOf(path)
	if err != nil {
		t.Fatal(err)
	}
	_, digest, err := gguf.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, key, digest
}

// add stages, puts and commits a file under name.
func add(t *testing.T, s *Store, path string, key FileKey, digest, name string) (Entry, bool) {
	t.Helper()
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Put(path, key, digest)
	if err != nil {
		t.Fatal(err)
	}
	e, existed, err := st.Commit(Entry{Name: name, Digest: digest, Size: key.Size, File: ModelFile, SourcePath: path, Stored: stored})
	if err != nil {
		t.Fatalf("Commit %s: %v", name, err)
	}
	return e, existed
}

func TestAddLookupRemove(t *testing.T) {
	s := newStore(t)
	path, key, digest := writeFile(t, "model bytes")
	e, existed := add(t, s, path, key, digest, "tiny")
	if existed || e.Stored != StoredHardlink || e.Path() != filepath.Join(s.Root, dirName(digest), ModelFile) {
		t.Fatalf("got %+v existed %t; want a new hard-linked entry in %s", e, existed, s.Root)
	}
	if b, err := os.ReadFile(e.Path()); err != nil || string(b) != "model bytes" {
		t.Fatalf("cached file: got %q, %v", b, err)
	}
	hexd := strings.TrimPrefix(digest, "sha256:")
	for _, ref := range []string{"tiny", hexd[:4], hexd, "sha256:" + hexd[:10], "sha256-" + strings.ToUpper(hexd[:8])} {
		got, err := s.Lookup(ref)
		if err != nil || got.Digest != digest {
			t.Errorf("Lookup(%q): got %s, %v; want %s", ref, got.Digest, err, digest)
		}
	}
	for _, ref := range []string{"other", hexd[:3], "zzzz"} {
		if _, err := s.Lookup(ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup(%q): got %v; want ErrNotFound", ref, err)
		}
	}
	if got, ok := EntryFor(e.Path()); !ok || got.Digest != digest {
		t.Errorf("EntryFor(cached file): got %+v, %t; want the entry", got, ok)
	}
	if _, ok := EntryFor(path); ok {
		t.Errorf("EntryFor(user's file): got an entry; want none")
	}
	if err := s.Verify(e); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := s.Remove(e); err != nil {
		t.Fatal(err)
	}
	if entries, err := s.Entries(); len(entries) != 0 || err != nil {
		t.Errorf("after Remove: got %d entries, %v; want none", len(entries), err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "model bytes" {
		t.Errorf("user's file after Remove: got %q, %v; want it intact", b, err)
	}
}

func TestCommitConflicts(t *testing.T) {
	s := newStore(t)
	path, key, digest := writeFile(t, "first")
	add(t, s, path, key, digest, "m")
	// The same file again: the existing entry wins, nothing new is written.
	if e, existed := add(t, s, path, key, digest, "other-name"); !existed || e.Name != "m" {
		t.Errorf("same digest again: got %q existed %t; want the existing entry m", e.Name, existed)
	}
	// Another file under a taken name.
	path2, key2, digest2 := writeFile(t, "second")
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(path2, key2, digest2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Commit(Entry{Name: "m", Digest: digest2, File: ModelFile}); !errors.Is(err, ErrNameTaken) {
		t.Errorf("taken name: got %v; want ErrNameTaken", err)
	}
	if _, err := os.Stat(st.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging dir after a failed commit: got %v; want removed", err)
	}
	entries, _ := s.Entries()
	if len(entries) != 1 {
		t.Errorf("entries: got %d; want 1", len(entries))
	}
	for _, bad := range []string{"", "a b", "x/y", ".hidden", "-flag", "sha256-abc", strings.Repeat("n", 129)} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q): got nil; want an error", bad)
		}
	}
}

// fakeEntry writes an entry directory by hand (no model file needed).
func fakeEntry(t *testing.T, s *Store, name, digest string) {
	t.Helper()
	dir := filepath.Join(s.Root, dirName(digest))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeEntry(dir, Entry{Name: name, Digest: digest, File: ModelFile}); err != nil {
		t.Fatal(err)
	}
}

func TestLookupAmbiguous(t *testing.T) {
	s := newStore(t)
	fakeEntry(t, s, "a", "sha256:abcd01"+strings.Repeat("0", 58))
	fakeEntry(t, s, "b", "sha256:abcd02"+strings.Repeat("0", 58))
	fakeEntry(t, s, "abcd", "sha256:ffff"+strings.Repeat("0", 60))
	var ae *AmbiguousError
	if _, err := s.Lookup("abcd0"); !errors.As(err, &ae) || len(ae.Matches) != 2 || !strings.Contains(err.Error(), "abcd01") {
		t.Errorf("Lookup(abcd0): got %v; want *AmbiguousError naming both", err)
	}
	if e, err := s.Lookup("abcd01"); err != nil || e.Name != "a" {
		t.Errorf("Lookup(abcd01): got %q, %v; want a", e.Name, err)
	}
	if e, err := s.Lookup("abcd"); err != nil || e.Name != "abcd" {
		t.Errorf("Lookup(abcd): got %q, %v; want the entry named abcd (names win over prefixes)", e.Name, err)
	}
	// A damaged entry is reported, the others still listed.
	dir := filepath.Join(s.Root, "sha256-"+strings.Repeat("1", 64))
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, EntryFile), []byte("{"), 0o644)
	entries, err := s.Entries()
	if len(entries) != 3 || err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Entries with a damaged one: got %d, %v; want 3 and an error naming %s", len(entries), err, dir)
	}
}

func TestPutCopiesAndChecks(t *testing.T) {
	s := newStore(t)
	path, key, digest := writeFile(t, "bytes to copy")
	stale := key
	stale.ModNano++ // the file no longer matches its key: it is copied and hashed
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	if stored, err := st.Put(path, stale, digest); err != nil || stored != StoredCopy {
		t.Fatalf("Put with a stale key: got %q, %v; want a copy", stored, err)
	}
	other, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Abort()
	if _, err := other.Put(path, stale, "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, ErrChanged) {
		t.Errorf("Put with a wrong digest: got %v; want ErrChanged", err)
	}
}

func TestStaleStagingRemoved(t *testing.T) {
	s := newStore(t)
	st, err := s.Stage() // alive: its lock is held
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	dead := filepath.Join(s.tmpDir(), "1-1") // a dead process's: no lock held
	if err := os.MkdirAll(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dead, ModelFile), []byte("partial"), 0o644)
	os.WriteFile(dead+".lock", nil, 0o644)
	st2, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Abort()
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead staging dir: got %v; want removed", err)
	}
	if _, err := os.Stat(dead + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead staging lock: got %v; want removed", err)
	}
	if _, err := os.Stat(st.Dir()); err != nil {
		t.Errorf("live staging dir: got %v; want kept", err)
	}
}

func TestLockKeyWaits(t *testing.T) {
	s := newStore(t)
	unlock, err := s.LockKey(context.Background(), "sha256:ab", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	waited := false
	if _, err := s.LockKey(ctx, "sha256:ab", func() { waited = true }); !errors.Is(err, context.DeadlineExceeded) || !waited {
		t.Errorf("LockKey while held: got %v, waited %t; want the context's error after waiting", err, waited)
	}
	unlock()
	unlock2, err := s.LockKey(context.Background(), "sha256:ab", nil)
	if err != nil {
		t.Errorf("LockKey after unlock: %v", err)
	} else {
		unlock2()
	}
}

func TestDigestCache(t *testing.T) {
	s := newStore(t)
	path, key, digest := writeFile(t, "hash me once")
	if _, got, err := s.Digest(path); err != nil || got != digest {
		t.Fatalf("Digest: got %s, %v; want %s", got, err, digest)
	}
	if d, ok, err := s.cachedDigest(key); err != nil || !ok || d != digest {
		t.Fatalf("digest cache after Digest: got %q, %t; want %s recorded", d, ok, digest)
	}
	// A recorded digest is returned without reading the file: record a
	// different one for the same key and get it back.
	fake := "sha256:" + strings.Repeat("f", 64)
	s.RecordDigest(key, fake)
	if _, got, _ := s.Digest(path); got != fake {
		t.Errorf("Digest of an unchanged file: got %s; want the recorded %s", got, fake)
	}
	// A new modification time is a new key: hashed again.
	later := time.Unix(0, key.ModNano).Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := s.Digest(path); got != digest {
		t.Errorf("Digest after touch: got %s; want %s", got, digest)
	}
	if recs := s.readDigests(); len(recs) != 1 {
		t.Errorf("digest cache: got %d records; want 1 per path", len(recs))
	}
}

func TestVerifyCorrupt(t *testing.T) {
	s := newStore(t)
	path, key, digest := writeFile(t, "original")
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	stale := key
	stale.Ino++ // force a copy, so corrupting the cache leaves the user's file alone
	stored, err := st.Put(path, stale, digest)
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.Commit(Entry{Name: "m", Digest: digest, Size: key.Size, File: ModelFile, Stored: stored})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.Path(), []byte("0riginal"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if err := s.Verify(e); !errors.As(err, &ce) || ce.Digest == digest {
		t.Errorf("Verify of a changed file: got %v; want *CorruptError", err)
	}
}

// A symbolic link is followed: the store links (or copies) the file itself.
func TestPutFollowsSymlinks(t *testing.T) {
	s := newStore(t)
	path, _, digest := writeFile(t, "linked model")
	link := filepath.Join(t.TempDir(), "rel.gguf")
	rel, err := filepath.Rel(filepath.Dir(link), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		t.Fatal(err)
	}
	key, err := KeyOf(link)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := add(t, s, link, key, digest, "via-link")
	if fi, err := os.Lstat(e.Path()); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("cached file: %v, mode %v; want a regular file", err, fi.Mode())
	}
	if err := s.Verify(e); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// TestSidecarsMakeTheirOwnEntry: the same model file with another
// tokenizer.json beside it is an entry of its own, found by GetFiles with
// its files, by name and by Variant of its own; the first stays as it was;
// a digest prefix naming both says so; an entry.json whose files do not
// give its directory's name is refused.
func TestSidecarsMakeTheirOwnEntry(t *testing.T) {
	s := newStore(t)
	path, key, digest := writeFile(t, "GGUF one model file")
	commit := func(name, tokenizer string) Entry {
		t.Helper()
		st, err := s.Stage()
		if err != nil {
			t.Fatal(err)
		}
		stored, err := st.Put(path, key, digest)
		if err == nil {
			err = os.WriteFile(st.Path("tokenizer.json"), []byte(tokenizer), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := st.Commit(Entry{Name: name, Digest: digest, Size: key.Size, File: ModelFile, SourcePath: path, Stored: stored})
		if err != nil {
			t.Fatalf("Commit %s: %v", name, err)
		}
		return e
	}
	a := commit("first", `{"a":1}`)
	b := commit("edited", `{"a":2}`)
	if a.Dir() == b.Dir() || filepath.Base(a.Dir()) != dirName(digest) || !strings.HasPrefix(filepath.Base(b.Dir()), dirName(digest)+".") {
		t.Fatalf("entries in %s and %s; want %s and a directory beside it", a.Dir(), b.Dir(), dirName(digest))
	}
	if again := commit("again", `{"a":2}`); again.Name != "edited" {
		t.Errorf("the edited files again gave entry %q; want the existing \"edited\"", again.Name)
	}
	for _, tc := range []struct {
		tok, want string
	}{{`{"a":1}`, "first"}, {`{"a":2}`, "edited"}, {`{"a":3}`, ""}} {
		files, err := HashFiles(map[string]string{"tokenizer.json": writeTemp(t, tc.tok)})
		if err != nil {
			t.Fatal(err)
		}
		e, ok, err := s.GetFiles(digest, files)
		if err != nil || ok != (tc.want != "") || ok && e.Name != tc.want {
			t.Errorf("GetFiles with tokenizer %s: %q, %v, %v; want %q", tc.tok, e.Name, ok, err, tc.want)
		}
	}
	if e, err := s.Lookup("edited"); err != nil || e.Dir() != b.Dir() {
		t.Errorf("Lookup edited: %v, %v", e.Dir(), err)
	}
	if _, err := s.Lookup(strings.TrimPrefix(digest, digestPrefix)[:8]); err == nil || !strings.Contains(err.Error(), "share the model file") {
		t.Errorf("a digest prefix of both: %v; want an error saying they share the model file", err)
	}
	v := Entry{Name: "edited:q", Digest: "sha256:" + strings.Repeat("ab", 32), Of: digest, Quantization: "Q8_0", Files: b.Files, File: ModelFile}
	fakeVariant(t, s, v)
	if got, ok, err := s.Variant(a, "Q8_0"); ok || err != nil {
		t.Errorf("Variant of the first: %q, %v, %v; want none (the variant carries the edited files)", got.Name, ok, err)
	}
	if got, ok, err := s.Variant(b, "Q8_0"); !ok || err != nil || got.Name != v.Name {
		t.Errorf("Variant of the edited: %q, %v, %v; want %q", got.Name, ok, err, v.Name)
	}
	lie := b
	lie.Files = map[string]string{"tokenizer.json": "sha256:" + strings.Repeat("0", 64)}
	if err := writeEntry(b.Dir(), lie); err != nil {
		t.Fatal(err)
	}
	if _, err := readEntry(b.Dir()); err == nil || !strings.Contains(err.Error(), "the directory says") {
		t.Errorf("an entry.json whose files do not give its directory's name: %v; want refused", err)
	}
}

// writeTemp writes content to a new file and returns its path.
func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeVariant writes an entry directory holding only e's entry.json, enough
// for Entries and Variant to find it.
func fakeVariant(t *testing.T, s *Store, e Entry) {
	t.Helper()
	dir := filepath.Join(s.Root, dirName(e.Digest))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeEntry(dir, e); err != nil {
		t.Fatal(err)
	}
}
