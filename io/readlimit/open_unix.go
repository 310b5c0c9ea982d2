//go:build unix

package readlimit

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Open opens path for reading if it is a regular file (after following
// symbolic links), and otherwise fails with ErrNotRegular naming it and
// what it is, without blocking: the file is opened with O_NONBLOCK (so a
// FIFO without a writer does not block the open), checked with fstat (so
// what is checked is what was opened), and O_NONBLOCK is cleared only then.
func Open(path string) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s: %w (%s): synapse reads only regular files here", path, ErrNotRegular, fileType(uint32(st.Mode)))
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// fileType names a file type of a stat mode.
func fileType(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return "a named pipe"
	case syscall.S_IFCHR:
		return "a character device"
	case syscall.S_IFBLK:
		return "a block device"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFDIR:
		return "a directory"
	}
	return fmt.Sprintf("file type %#o", mode&syscall.S_IFMT)
}
