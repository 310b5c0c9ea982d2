package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// CacheDir is the Hugging Face hub cache, found as huggingface_hub finds
// it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. from says
// which of these chose it ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME" or
// "default").
func CacheDir() (dir, from string, err error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, "HF_HUB_CACHE", nil
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), "HF_HOME", nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub"), "XDG_CACHE_HOME", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", "", fmt.Errorf("no home directory for the Hugging Face cache (set HF_HUB_CACHE): %w", err)
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), "default", nil
}

// StoreDir is where Pull keeps the models it fetched: hub/ in the model
// cache, in the Hugging Face cache's layout.
func StoreDir(s *modelcache.Store) string { return filepath.Join(s.Root, "hub") }

// Snapshot returns the snapshot directory of r in the cache at dir: the
// commit refs/REVISION names (refs/main without a revision), or, for a
// revision of 40 hex digits, that commit's snapshot itself. Every symbolic
// link in the snapshot must resolve to a file inside the repository's
// folder (the Hugging Face cache links to ../../blobs/…); one that leads
// outside it, to a directory or to nothing is ErrUnsafeLink. A folder
// another user could change is refused first (CheckTrust). A repository,
// ref or snapshot the cache lacks is ErrNotCached.
func Snapshot(dir string, r Ref) (string, error) {
	repo := filepath.Join(dir, r.Folder())
	if _, err := os.Stat(repo); err != nil {
		return "", fmt.Errorf("%s: %w (no %s)", r, ErrNotCached, repo)
	}
	if err := CheckTrust(dir, r); err != nil {
		return "", err
	}
	commit := r.Rev()
	if !IsCommit(commit) {
		ref := filepath.Join(repo, "refs", filepath.FromSlash(commit))
		b, err := readlimit.ReadFile(ref, readlimit.Config)
		if err != nil {
			return "", fmt.Errorf("%s: %w (no %s%s)", r, ErrNotCached, ref, snapshotsHint(repo, r))
		}
		commit = strings.TrimSpace(string(b))
		if !IsCommit(commit) {
			return "", fmt.Errorf("%s: %w: %s holds %.50q, not a commit id", r, ErrNotCached, ref, commit)
		}
	}
	snap := filepath.Join(repo, "snapshots", commit)
	if st, err := os.Stat(snap); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s: %w (no snapshot %s)", r, ErrNotCached, snap)
	}
	if err := checkLinks(repo, snap); err != nil {
		return "", fmt.Errorf("%s: %w", r, err)
	}
	return snap, nil
}

// snapshotsHint names the snapshots a repository has when its ref is
// missing, so that the user can name one as ID@COMMIT.
func snapshotsHint(repo string, r Ref) string {
	des, _ := os.ReadDir(filepath.Join(repo, "snapshots"))
	var commits []string
	for _, de := range des {
		if de.IsDir() && IsCommit(de.Name()) {
			commits = append(commits, de.Name())
		}
	}
	if len(commits) == 0 {
		return ""
	}
	sort.Strings(commits)
	return fmt.Sprintf("; its snapshots: %s; name one as %s@%s", strings.Join(commits, ", "), r.ID, commits[0])
}

// checkLinks walks a snapshot and refuses a symbolic link (or the snapshot
// itself) that resolves outside the repository folder, to a directory or to
// nothing.
func checkLinks(repo, snap string) error {
	root, err := filepath.EvalSymlinks(repo)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafeLink, err)
	}
	inside := func(p string) (string, error) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", fmt.Errorf("%w: %s leads to nothing (an incomplete download? fetch it again): %w", ErrUnsafeLink, p, err)
		}
		if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("%w: %s leads to %s, outside %s", ErrUnsafeLink, p, real, root)
		}
		return real, nil
	}
	if _, err := inside(snap); err != nil {
		return err
	}
	return filepath.WalkDir(snap, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.Type()&fs.ModeSymlink == 0 {
			return err
		}
		real, err := inside(p)
		if err != nil {
			return err
		}
		if st, err := os.Stat(real); err != nil || st.IsDir() {
			return fmt.Errorf("%w: %s leads to %s, not a file", ErrUnsafeLink, p, real)
		}
		return nil
	})
}

// Find resolves r in the model cache's pulled models (dirs[0], StoreDir)
// and then in the Hugging Face cache (dirs[1], CacheDir), in that order.
// Only ErrNotCached moves on to the next; a refused link stops the search.
func Find(r Ref, dirs ...string) (string, error) {
	var missing []error
	for _, d := range dirs {
		snap, err := Snapshot(d, r)
		if err == nil || !errors.Is(err, ErrNotCached) {
			return snap, err
		}
		missing = append(missing, err)
	}
	return "", errors.Join(missing...)
}

// Cached is one snapshot in a cache, as List finds it.
type Cached struct {
	ID     string   // ORG/NAME
	Commit string   // the snapshot's commit
	Refs   []string // the branches and tags naming it, sorted
	Files  int
	Bytes  int64 // the files' size (links followed)
	Dir    string
}

// List returns the snapshots of the cache at dir, by id then commit; a
// cache that does not exist is empty.
func List(dir string) ([]Cached, error) {
	repos, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Cached
	for _, de := range repos {
		rest, ok := strings.CutPrefix(de.Name(), "models--")
		if !ok || !de.IsDir() {
			continue
		}
		id := strings.Replace(rest, "--", "/", 1) // names hold no "--": the first one is the slash
		repo := filepath.Join(dir, de.Name())
		refs := refsOf(repo)
		snaps, _ := os.ReadDir(filepath.Join(repo, "snapshots"))
		for _, sn := range snaps {
			if !sn.IsDir() || !IsCommit(sn.Name()) {
				continue
			}
			p := Cached{ID: id, Commit: sn.Name(), Refs: refs[sn.Name()], Dir: filepath.Join(repo, "snapshots", sn.Name())}
			filepath.WalkDir(p.Dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if st, err := os.Stat(path); err == nil {
						p.Files++
						p.Bytes += st.Size()
					}
				}
				return nil
			})
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].ID < out[j].ID || out[i].ID == out[j].ID && out[i].Commit < out[j].Commit
	})
	return out, nil
}

// refsOf maps each commit of a repository folder to the refs naming it.
func refsOf(repo string) map[string][]string {
	out := map[string][]string{}
	root := filepath.Join(repo, "refs")
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := readlimit.ReadFile(path, readlimit.Config)
		rel, relErr := filepath.Rel(root, path)
		if c := strings.TrimSpace(string(b)); err == nil && relErr == nil && IsCommit(c) {
			out[c] = append(out[c], filepath.ToSlash(rel))
		}
		return nil
	})
	for _, refs := range out {
		sort.Strings(refs)
	}
	return out
}

// Remove deletes repository r's folder from the cache at dir (every
// snapshot and download in progress of it); a folder that is not there is
// ErrNotCached. The folder is renamed away first, so that a reader sees
// it whole or not at all.
func Remove(dir string, r Ref) error {
	repo := filepath.Join(dir, r.Folder())
	if _, err := os.Lstat(repo); err != nil {
		return fmt.Errorf("%s: %w (no %s)", r.ID, ErrNotCached, repo)
	}
	trash, err := os.MkdirTemp(dir, ".rm-")
	if err != nil {
		return err
	}
	if err := os.Rename(repo, filepath.Join(trash, r.Folder())); err != nil {
		os.Remove(trash)
		return err
	}
	return os.RemoveAll(trash)
}
