package previous

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapping is a read-only memory-mapped file.
type mapping struct {
	data []byte
}

func mapFile(path string) (*mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("empty file")
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &mapping{data: data}, nil
}

// release hands the pages read so far back to the kernel: they leave the
// module's resident set (the page cache keeps them); the data stays valid.
func (m *mapping) release() {
	if len(m.data) > 0 {
		_ = unix.Madvise(m.data, unix.MADV_DONTNEED) // advice only: a failure costs memory, not data
	}
}

func (m *mapping) close() {
	if m.data != nil {
		_ = unix.Munmap(m.data)
		m.data = nil
	}
}

// touch counts n bytes read through the mappings; past TouchBudget, their
// pages are released.
func (s *Set) touch(n int64) {
	s.touched += n
	if s.touched < TouchBudget {
		return
	}
	s.releaseAll()
}

// releaseAll releases the pages of every mapping.
func (s *Set) releaseAll() {
	s.touched = 0
	for _, f := range s.files {
		if f.mm != nil {
			f.mm.release()
		}
	}
}
