package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckLlamaLib: a library directory is checked for the files the
// worker loads and for their release, with a message that says what is
// missing, before any worker is spawned.
func TestCheckLlamaLib(t *testing.T) {
	meta := func(release string) string {
		return `{"buildOptions":{"llamaCpp":{"release":"` + release + `"}}}`
	}
	tests := []struct {
		name  string
		files map[string]string // name → content; "->x" makes a link to x
		want  string            // "" = accepted
	}{
		{"npm layout with links", map[string]string{"libllama.v0.5.0.so": "", "libggml.v0.5.0.so": "",
			"libllama.so": "->libllama.v0.5.0.so", "libggml.so": "->libggml.v0.5.0.so", "_nlcBuildMetadata.json": meta("v0.5.0")}, ""},
		{"custom build, release unknown", map[string]string{"libllama.so": "", "libggml.so": ""}, ""},
		{"empty", nil, "no libllama.so"},
		{"npm files, no links", map[string]string{"libllama.v0.5.0.so": "", "libggml.v0.5.0.so": ""},
			"no libllama.so (libllama.v0.5.0.so is there: ln -s libllama.v0.5.0.so"},
		{"no ggml", map[string]string{"libllama.so": ""}, "no libggml.so"},
		{"dangling link", map[string]string{"libllama.so": "->gone.so", "libggml.so": ""}, "no libllama.so"},
		{"other release", map[string]string{"libllama.so": "", "libggml.so": "", "_nlcBuildMetadata.json": meta("b9999")},
			"holds llama.cpp release b9999; synapse needs v0.5.0"},
		{"other versioned file", map[string]string{"libllama.so": "", "libggml.so": "", "libllama.v0.4.0.so": ""},
			"holds llama.cpp release v0.4.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				var err error
				if target, ok := strings.CutPrefix(content, "->"); ok {
					err = os.Symlink(target, filepath.Join(dir, name))
				} else {
					err = os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			_, err := CheckLlamaLib(dir)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v; want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v; want an error saying %q", err, tt.want)
			}
		})
	}
	if _, err := CheckLlamaLib(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing directory was accepted")
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := CheckLlamaLib(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: got %v; want not a directory", err)
	}
}
