package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// codeRE finds fenced code blocks and inline code spans in Markdown.
var codeRE = regexp.MustCompile("(?s)```.*?```|`[^`\n]+`")

// absPathRE finds absolute paths: a slash and a name at the start of a word
// or after "=" (SYNAPSE_FIXTURES=/x/y).
var absPathRE = regexp.MustCompile(`(?:^|[\s=:("'])(/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)`)

// systemDirs are absolute paths a command may name on any machine.
var systemDirs = []string{"/tmp", "/dev", "/proc", "/sys", "/usr", "/etc", "/bin", "/opt", "/run", "/var"}

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

// layoutEntryRE is a package line of the README's layout tree: two spaces
// per level (at most four levels: description lines are indented further),
// the directory with a slash, then its description (or nothing).
var layoutEntryRE = regexp.MustCompile(`^((?:  ){0,4})([a-z0-9_]+(?:/[a-z0-9_]+)*)/(?:\s{2,}|$)`)

// TestReadmeLayoutListsPackages: the layout tree in README.md
// (Development → Layout) lists every package of the module outside
// examples/ (a directory holding .go files, testdata aside) and nothing
// else: a package added without its line, or a line left after its package
// went, fails here, naming it. A directory without .go files may stand in
// the tree as the parent of the packages under it (io/, model/).
func TestReadmeLayoutListsPackages(t *testing.T) {
	data, err := os.ReadFile(repoPath("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := readmeLayout(string(data))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]bool{}
	for _, root := range layoutRoots(t) {
		err := filepath.WalkDir(repoPath(root), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir // the go tool ignores these
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") {
				rel, err := filepath.Rel(repoPath(), filepath.Dir(p))
				if err != nil {
					return err
				}
				pkgs[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages; want the repository's (run from cli/)", len(pkgs))
	}
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		if !tree[p] {
			t.Errorf("package %s/ is not in README.md's layout tree (Development → Layout); add its line", p)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(tree)) {
		if pkgs[dir] {
			continue
		}
		parent := false
		for p := range pkgs {
			parent = parent || strings.HasPrefix(p, dir+"/")
		}
		if !parent {
			t.Errorf("README.md's layout tree lists %s/, which holds no package; remove its line or fix its name", dir)
		}
	}
}

// layoutRoots lists the root's directories that hold the module's
// packages: all but the hidden ones, docs/ and examples/ (example programs,
// not parts of synapse).
func layoutRoots(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(repoPath())
	if err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "docs" && e.Name() != "examples" && e.Name() != "bin" {
			roots = append(roots, e.Name())
		}
	}
	return roots
}

// readmeLayout returns the directories the first code block under the
// README's "### Layout" heading lists, as paths from the repository root.
func readmeLayout(readme string) (map[string]bool, error) {
	_, rest, ok := strings.Cut(readme, "\n### Layout\n")
	if !ok {
		return nil, errors.New(`README.md: no "### Layout" section`)
	}
	_, rest, ok = strings.Cut(rest, "\n```\n")
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		return nil, errors.New("README.md: no code block under Layout")
	}
	dirs := map[string]bool{}
	var stack []string // the path at each level
	for i, line := range strings.Split(block, "\n") {
		m := layoutEntryRE.FindStringSubmatch(line)
		if m == nil {
			continue // a description's continuation
		}
		level := len(m[1]) / 2
		if level > len(stack) {
			return nil, fmt.Errorf("README.md layout line %d: %q is indented under nothing", i+1, line)
		}
		stack = append(stack[:level], m[2])
		dirs[strings.Join(stack, "/")] = true
	}
	if len(dirs) == 0 {
		return nil, errors.New("README.md: the layout block lists no directories")
	}
	return dirs, nil
}
