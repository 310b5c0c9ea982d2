package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codeRE finds fenced code blocks and inline code spans in Markdown.
var codeRE = regexp.MustCompile("(?s)```.*?```|`[^`\n]+`")

// absPathRE finds absolute paths: a slash and a name at the start of a word
// or after "=" (SYNAPSE_FIXTURES=/x/y).
var absPathRE = regexp.MustCompile(`(?:^|[\s=:("'])(/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)`)

// systemDirs are absolute paths a command may name on any machine.
var systemDirs = []string{"/tmp", "/dev", "/proc", "/sys", "/usr", "/etc", "/bin", "/opt"}

// TestDocsCommandsAreRelative: the commands in the README and docs work
// from a fresh clone: they name files relative to the repository (or
// system directories), never the folders of the machine they were run on.
func TestDocsCommandsAreRelative(t *testing.T) {
	files, _ := filepath.Glob(repoPath("docs", "*.md"))
	more, _ := filepath.Glob(repoPath("examples", "*.md"))
	files = append(append([]string{repoPath("README.md")}, files...), more...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range codeRE.FindAllString(string(data), -1) {
			for _, m := range absPathRE.FindAllStringSubmatch(code, -1) {
				if p := m[1]; !isSystemPath(p) {
					t.Errorf("%s: %q names the absolute path %s; want a path relative to the repository", f, firstLine(code, p), p)
				}
			}
		}
	}
}

func isSystemPath(p string) bool {
	for _, d := range systemDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// firstLine is the line of code that holds s.
func firstLine(code, s string) string {
	for _, line := range strings.Split(code, "\n") {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return code
}
