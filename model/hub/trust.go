package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/synapse-embed/synapse/io/files"
)

// CheckTrust refuses repository r's folder in the cache at dir when
// another user could change what synapse reads from it or writes into
// it: the cache directory and every directory above it, the folder (and,
// when it is a symbolic link, where it leads and every directory above
// that), and everything in it — refs/, snapshots/, blobs/, partial/ and
// each file and link there — must be owned by this user or by root and not
// writable by others (files.CheckTrusted; a symbolic link's own mode means
// nothing, so only its owner is checked). Whoever owns a level could swap
// the weights a run loads, or plant a link a pull writes through. A
// refusal is files.ErrUntrusted, naming the path and its owner or mode. A
// cache or folder that is not there is nothing to trust.
func CheckTrust(dir string, r Ref) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := files.TrustedPath(dir); err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	repo := filepath.Join(dir, r.Folder())
	if _, err := os.Lstat(repo); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	real, err := files.TrustedPath(repo)
	if err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	uid := os.Getuid()
	err = filepath.WalkDir(real, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return files.CheckTrusted(p, fi, uid)
		}
		if o, ok := files.Owner(fi); ok && o != uid && o != 0 {
			return fmt.Errorf("%w: %s is owned by uid %d, not by uid %d or root", files.ErrUntrusted, p, o, uid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", r, err)
	}
	return nil
}
