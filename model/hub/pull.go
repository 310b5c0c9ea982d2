package hub

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// PullOptions say what Pull fetches.
type PullOptions struct {
	// ONNX takes the ONNX export (onnx/model.onnx) instead of
	// model.safetensors.
	ONNX bool
	// Progress, if not nil, is told how far each download has come.
	Progress Progress
}

// Pulled is what Pull did.
type Pulled struct {
	Ref    Ref
	Commit string // the commit the revision named when the API was asked
	Dir    string // the snapshot directory: what -m ID resolves to
	Files  []File // the files chosen
	Bytes  int64  // their size
	// Fetched counts the files this pull added to the snapshot (0: it
	// was all there), and FetchedBytes their size (a resumed download, or
	// one an interrupted pull finished, counts whole).
	Fetched      int
	FetchedBytes int64
}

// Pull fetches the files of r a load needs (Select) into the model cache's
// pulled models (StoreDir(s)), in the Hugging Face cache's layout with the
// files themselves in the snapshot. The revision is resolved once, by the
// model API, to a commit, and every file is downloaded from that commit, so
// a branch that moves meanwhile cannot mix two commits' files. Files are
// downloaded into partial/COMMIT/ and checked (Download); the complete set
// is renamed into snapshots/COMMIT at once, then refs/REVISION written. A
// second pull of the same commit downloads nothing. An interrupted pull
// leaves its partial files, which the next one resumes. Concurrent pulls
// of one model take turns (the model cache's lock). A repository folder
// another user could change is refused before anything is asked or
// written (CheckTrust).
func (c *Client) Pull(ctx context.Context, s *modelcache.Store, r Ref, o PullOptions) (Pulled, error) {
	if err := CheckTrust(StoreDir(s), r); err != nil {
		return Pulled{}, err
	}
	repo, err := c.Info(ctx, r)
	if err != nil {
		return Pulled{}, err
	}
	repo.ID = r.ID // the name the cache files it under (the API may give the canonical spelling)
	c.log("%s is commit %s", r, repo.SHA)
	root := filepath.Join(StoreDir(s), r.Folder())
	unlock, err := s.LockKey(ctx, "hub-"+r.Folder(), func() {
		c.log("waiting for another synapse that is pulling %s", r.ID)
	})
	if err != nil {
		return Pulled{}, err
	}
	defer unlock()
	p := Pulled{Ref: r, Commit: repo.SHA, Dir: filepath.Join(root, "snapshots", repo.SHA)}
	partial := filepath.Join(root, "partial", repo.SHA)
	if p.Files, err = c.choose(ctx, repo, p.Dir, partial, o); err != nil {
		return p, err
	}
	for _, f := range p.Files {
		p.Bytes += f.Size
	}
	c.log("taking %d of its %d files, %s", len(p.Files), len(repo.Siblings), Bytes(p.Bytes))
	for _, f := range p.Files {
		fetched, err := c.ensure(ctx, repo, f, p.Dir, partial, o.Progress)
		if err != nil {
			return p, err
		}
		if fetched {
			p.Fetched++
			p.FetchedBytes += f.Size
		}
	}
	if err := publish(root, partial, p); err != nil {
		return p, err
	}
	return p, writeRef(root, r, repo.SHA)
}

// choose fetches modules.json first, when the repository has one, to learn
// its module directories, then selects the files.
func (c *Client) choose(ctx context.Context, repo Repo, snap, partial string, o PullOptions) ([]File, error) {
	var modules []string
	for _, f := range repo.Siblings {
		if f.Name != ModulesFile {
			continue
		}
		if _, err := c.ensure(ctx, repo, f, snap, partial, o.Progress); err != nil {
			return nil, err
		}
		path := filepath.Join(snap, ModulesFile)
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join(partial, ModulesFile)
		}
		b, err := readlimit.ReadFile(path, readlimit.Config)
		if err != nil {
			return nil, err
		}
		if modules, err = Modules(b); err != nil {
			return nil, fmt.Errorf("%w (of %s@%s)", err, repo.ID, repo.SHA)
		}
	}
	return Select(repo, modules, o.ONNX)
}

// ensure makes f present: in the published snapshot with its size, or
// checked in partial (an earlier run's), or downloaded into partial now;
// added says it was not in the snapshot.
func (c *Client) ensure(ctx context.Context, repo Repo, f File, snap, partial string, progress Progress) (added bool, err error) {
	if st, err := os.Stat(filepath.Join(snap, filepath.FromSlash(f.Name))); err == nil && st.Mode().IsRegular() && st.Size() == f.Size {
		return false, nil
	}
	dst := filepath.Join(partial, filepath.FromSlash(f.Name))
	if _, err := os.Stat(dst); err == nil {
		if verify(dst, f) == nil {
			return true, nil // an earlier pull's, new to the snapshot
		}
		os.Remove(dst)
	}
	c.log("downloading %s (%s)", f.Name, Bytes(f.Size))
	if err := c.Download(ctx, repo.ID, repo.SHA, f, dst, progress); err != nil {
		return false, err
	}
	return true, nil
}

// publish moves the pulled files into the snapshot: the whole partial
// directory renamed into place when there is no snapshot yet (anything in it
// that was not chosen removed first), else each new file renamed into the
// existing snapshot (a pull with other options of a commit already there).
func publish(root, partial string, p Pulled) error {
	if _, err := os.Stat(partial); errors.Is(err, fs.ErrNotExist) {
		return nil // everything was in the snapshot already
	}
	chosen := map[string]bool{}
	for _, f := range p.Files {
		chosen[filepath.FromSlash(f.Name)] = true
	}
	if err := os.MkdirAll(filepath.Dir(p.Dir), 0o755); err != nil {
		return err
	}
	_, statErr := os.Stat(p.Dir)
	fresh := errors.Is(statErr, fs.ErrNotExist)
	err := filepath.WalkDir(partial, func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, err := filepath.Rel(partial, path)
		switch {
		case err != nil:
			return err
		case !chosen[rel]:
			return os.Remove(path) // a leftover of a pull with other options
		case fresh:
			return nil
		}
		dst := filepath.Join(p.Dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.Rename(path, dst)
	})
	if err == nil && fresh {
		err = os.Rename(partial, p.Dir)
	}
	if err == nil {
		err = os.RemoveAll(partial)
	}
	if err != nil {
		return fmt.Errorf("publishing %s: %w", p.Dir, err)
	}
	os.Remove(filepath.Dir(partial)) // partial/, when no other commit is in progress
	return syncDir(filepath.Dir(p.Dir))
}

// writeRef records the commit a branch or tag named (refs/REVISION), by
// rename; a commit asked for by its id needs no ref.
func writeRef(root string, r Ref, commit string) error {
	if IsCommit(r.Rev()) {
		return nil
	}
	ref := filepath.Join(root, "refs", filepath.FromSlash(r.Rev()))
	if b, err := os.ReadFile(ref); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(ref), ".ref-")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(commit)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), ref)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", ref, err)
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	fh, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := fh.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Bytes is a size for people: "90.9 MB", "612 B".
func Bytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
