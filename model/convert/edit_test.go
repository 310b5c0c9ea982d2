package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// EditJSON rewrites the JSON object in the file at p with edit applied
// (exported for the package's external tests: editConfig).
func EditJSON(t *testing.T, p string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editedCopy copies the test checkpoint testdata/name into a directory of
// the test's and sets key to value in its JSON file file.
func editedCopy(t *testing.T, name, file, key string, value any) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	EditJSON(t, filepath.Join(dir, file), func(m map[string]any) { m[key] = value })
	return dir
}
