package modelcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/io/files"
)

// errLocked is flock's answer when the lock is held and waiting was not asked.
var errLocked = errors.New("modelcache: locked")

// ErrNameTaken is returned by Commit when another entry has the name.
var ErrNameTaken = errors.New("name taken")

func (s *Store) tmpDir() string { return filepath.Join(s.Root, "tmp") }

// lockStore takes the store-wide lock that orders commits, removals and
// staging against the clean-up of abandoned staging directories.
func (s *Store) lockStore() (func(), error) {
	if err := s.mkdir(s.tmpDir()); err != nil {
		return nil, err
	}
	return flock(filepath.Join(s.Root, ".lock"), true)
}

// mkdir creates dir, a directory of the store (the root included), mode
// 0755 whatever the umask, and checks the store's trust (checkRoot) and
// dir's: one another user owns or may write (tmp/, locks/) is refused.
func (s *Store) mkdir(dir string) error {
	if err := s.checkRoot(); err != nil {
		return err
	}
	for _, d := range []string{s.Root, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("modelcache: %w", err)
		}
	}
	if err := s.checkRoot(); err != nil {
		return err
	}
	return checkOne(dir)
}

// checkOne checks one file or directory of the store, not followed:
// owned by this user or root, not writable by others.
func checkOne(path string) error {
	fi, err := os.Lstat(path)
	if err == nil {
		err = files.CheckTrusted(path, fi, getuid())
	}
	if err != nil {
		return fmt.Errorf("model cache: %w (use a cache of your own: set %s)", err, EnvDir)
	}
	return nil
}

// LockKey takes the lock named key (e.g. a digest) that serialises work on
// one model across processes, waiting for it as long as ctx allows;
// waiting, if not nil, is called once when another process holds it.
func (s *Store) LockKey(ctx context.Context, key string, waiting func()) (unlock func(), err error) {
	dir := filepath.Join(s.Root, "locks")
	if err := s.mkdir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, strings.NewReplacer(":", "-", "/", "-").Replace(key)+".lock")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		unlock, err := flock(path, false)
		if !errors.Is(err, errLocked) {
			return unlock, err
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("modelcache: waiting for %s: %w", key, ctx.Err())
		case <-tick.C:
		}
	}
}

// Staging is an entry being written: a private directory under tmp/, locked
// for as long as it is in use, renamed into place by Commit.
type Staging struct {
	s      *Store
	dir    string
	unlock func()
}

// Stage creates a staging directory, first removing those abandoned by
// processes that died.
func (s *Store) Stage() (*Staging, error) {
	unlockStore, err := s.lockStore()
	if err != nil {
		return nil, err
	}
	defer unlockStore()
	s.cleanLocked()
	for {
		dir := filepath.Join(s.tmpDir(), fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()))
		unlock, err := flock(dir+".lock", false)
		if err != nil {
			return nil, err
		}
		if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
			unlock()
			continue
		} else if err == nil {
			err = os.Chmod(dir, 0o755) // whatever the umask
		}
		if err != nil {
			unlock()
			return nil, fmt.Errorf("modelcache: %w", err)
		}
		return &Staging{s: s, dir: dir, unlock: unlock}, nil
	}
}

// Dir is the staging directory.
func (st *Staging) Dir() string { return st.dir }

// File is where the staged model file goes (Put, or a quantizer's output).
func (st *Staging) File() string { return filepath.Join(st.dir, ModelFile) }

// Path is where the staged file name goes (ONNXFile, a sidecar's path).
func (st *Staging) Path(name string) string { return filepath.Join(st.dir, filepath.FromSlash(name)) }

// Abort removes the staging directory. It is safe after Commit.
func (st *Staging) Abort() {
	if st.unlock == nil {
		return
	}
	os.RemoveAll(st.dir)
	os.Remove(st.dir + ".lock")
	st.unlock()
	st.unlock = nil
}

// Commit writes e's entry.json into the staging directory and renames the
// directory into place as e's entry. If an entry with e's digest exists
// and the same other files (Files) exists already (another process was
// first), it is returned with existed true and the staging directory is
// dropped. An entry with e's model file but other files beside it (an
// edited tokenizer.json or module config) is kept beside it, under
// filesDirName. A name another digest has is
// ErrNameTaken.
func (st *Staging) Commit(e Entry) (got Entry, existed bool, err error) {
	defer st.Abort()
	if err := CheckName(e.Name); err != nil {
		return Entry{}, false, err
	}
	if e.Files, err = sidecarDigests(st.dir, e.File); err != nil {
		return Entry{}, false, err
	}
	if len(e.Files) == 0 {
		e.Files = nil
	}
	if err := writeEntry(st.dir, e); err != nil {
		return Entry{}, false, err
	}
	if err := syncDir(st.dir); err != nil {
		return Entry{}, false, err
	}
	unlock, err := st.s.lockStore()
	if err != nil {
		return Entry{}, false, err
	}
	defer unlock()
	if old, ok, err := st.s.GetFiles(e.Digest, e.Files); err != nil || ok {
		return old, ok, err
	}
	entries, _ := st.s.Entries()
	for _, o := range entries {
		if o.Name == e.Name {
			return Entry{}, false, fmt.Errorf("modelcache: %w: %q is %s (added from %s)", ErrNameTaken, e.Name, o.Digest, o.SourcePath)
		}
	}
	dst := filepath.Join(st.s.Root, dirName(e.Digest))
	if _, err := os.Lstat(dst); err == nil { // the same model file with other files beside it
		dst = filepath.Join(st.s.Root, filesDirName(e.Digest, e.Files))
	}
	if err := os.Rename(st.dir, dst); err != nil {
		return Entry{}, false, fmt.Errorf("modelcache: commit %s: %w", e.Name, err)
	}
	if err := syncDir(st.s.Root); err != nil {
		return Entry{}, false, err
	}
	e.dir = dst
	return e, false, nil
}

// cleanLocked removes staging directories whose lock no process holds, and
// their lock files. Call with the store lock held.
func (s *Store) cleanLocked() {
	des, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(s.tmpDir(), name)
		if base, ok := strings.CutSuffix(name, ".lock"); ok {
			if _, err := os.Lstat(filepath.Join(s.tmpDir(), base)); errors.Is(err, fs.ErrNotExist) {
				if unlock, err := flock(path, false); err == nil {
					os.Remove(path)
					unlock()
				}
			}
			continue
		}
		unlock, err := flock(path+".lock", false)
		if err != nil {
			continue // in use
		}
		os.RemoveAll(path)
		os.Remove(path + ".lock")
		unlock()
	}
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	fh, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("modelcache: %w", err)
	}
	defer fh.Close()
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("modelcache: sync %s: %w", dir, err)
	}
	return nil
}
