package supervise

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
)

// TestRuntimeDirTrust: a runtime directory another user could change (its
// entries renamed, a listener put where a restarted worker dials) is
// refused before any worker starts, and nothing is created in it or
// through a link planted in it; a missing XDG_RUNTIME_DIR is not created.
func TestRuntimeDirTrust(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, root string) (runtimeDir string)
		ok    bool
		want  string // in the error
	}{
		{"private", func(t *testing.T, root string) string { return root }, true, ""},
		{"sticky and world-writable, as /tmp", func(t *testing.T, root string) string {
			os.Chmod(root, 0o777|os.ModeSticky)
			return root
		}, true, ""},
		{"world-writable without the sticky bit", func(t *testing.T, root string) string {
			os.Chmod(root, 0o777)
			return root
		}, false, "writable by others"},
		{"a parent writable by others", func(t *testing.T, root string) string {
			os.Chmod(root, 0o770)
			sub := filepath.Join(root, "run")
			os.Mkdir(sub, 0o700)
			return sub
		}, false, "writable by others"},
		{"owned by another user", func(t *testing.T, root string) string {
			testenv.Stranger(t)
			os.Chown(root, testenv.StrangerUID, testenv.StrangerUID)
			return root
		}, false, "owned by uid 65534"},
		{"a parent owned by another user", func(t *testing.T, root string) string {
			testenv.Stranger(t)
			sub := filepath.Join(root, "run")
			os.Mkdir(sub, 0o700)
			os.Chown(root, testenv.StrangerUID, testenv.StrangerUID)
			return sub
		}, false, "owned by uid 65534"},
		{"missing", func(t *testing.T, root string) string { return filepath.Join(root, "missing") }, false, "does not create it"},
		{"a planted link to synapse/", func(t *testing.T, root string) string {
			os.Symlink(t.TempDir(), filepath.Join(root, "synapse"))
			return root
		}, false, "not a directory"},
		{"a planted link to workers/", func(t *testing.T, root string) string {
			os.Mkdir(filepath.Join(root, "synapse"), 0o700)
			os.Symlink(t.TempDir(), filepath.Join(root, "synapse", "workers"))
			return root
		}, false, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := shortDir(t)
			dir := tt.setup(t, root)
			before := tree(t, root)
			cfg := helperConfig(t, "worker", "")
			cfg.RuntimeDir = ""
			t.Setenv("XDG_RUNTIME_DIR", dir)
			if tt.ok {
				startPool(t, cfg)
				return
			}
			p, err := NewPool(context.Background(), cfg)
			if err == nil {
				p.Close()
			}
			if !errors.Is(err, ErrRuntimeDir) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewPool: got %v; want ErrRuntimeDir naming %q", err, tt.want)
			}
			if err := CheckRuntimeDir(""); !errors.Is(err, ErrRuntimeDir) {
				t.Errorf("CheckRuntimeDir: got %v; want ErrRuntimeDir", err)
			}
			if after := tree(t, root); after != before {
				t.Errorf("after a refused start the runtime directory holds\n%s\nwant what it held before\n%s", after, before)
			}
		})
	}
}

// tree lists what is under root, following the links in it.
func tree(t *testing.T, root string) string {
	var b strings.Builder
	var walk func(dir string)
	walk = func(dir string) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			b.WriteString(p + "\n")
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				walk(p)
			}
		}
	}
	walk(root)
	return b.String()
}

// TestSocketPathTooLong: a runtime directory too deep for sun_path is
// refused before work (a configuration error, not a failed start).
func TestSocketPathTooLong(t *testing.T) {
	dir := shortDir(t)
	for len(dir) < maxSocketPath {
		dir = filepath.Join(dir, "dddddddddddddddddddd")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckRuntimeDir(dir); !errors.Is(err, ErrSocketPathTooLong) {
		t.Errorf("CheckRuntimeDir: got %v; want ErrSocketPathTooLong", err)
	}
	cfg := helperConfig(t, "worker", "")
	cfg.RuntimeDir = dir
	p, err := NewPool(context.Background(), cfg)
	if err == nil {
		p.Close()
	}
	if !errors.Is(err, ErrSocketPathTooLong) {
		t.Errorf("NewPool: got %v; want ErrSocketPathTooLong", err)
	}
}
