package main

import "path/filepath"

// repoPath names a file of the repository from this package's directory
// (cmd/synapse), where go test runs its tests.
func repoPath(rel ...string) string {
	return filepath.Join(append([]string{"..", ".."}, rel...)...)
}
