package output

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFile writes b to dir/name and returns its path.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
