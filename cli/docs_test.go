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
	"unicode"
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

// layoutEntryRE is a package line of the layout tree: two spaces
// per level (at most four levels: description lines are indented further),
// the directory with a slash, then its description (or nothing).
var layoutEntryRE = regexp.MustCompile(`^((?:  ){0,4})([a-z0-9_]+(?:/[a-z0-9_]+)*)/(?:\s{2,}|$)`)

// TestReadmeLayoutListsPackages: the layout tree in docs/development.md
// (Layout; it moved there from the README) lists every package of the module outside
// examples/ (a directory holding .go files, testdata aside) and nothing
// else: a package added without its line, or a line left after its package
// went, fails here, naming it. A directory without .go files may stand in
// the tree as the parent of the packages under it (io/, model/).
func TestReadmeLayoutListsPackages(t *testing.T) {
	data, err := os.ReadFile(repoPath(layoutDoc))
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
			t.Errorf("package %s/ is not in %s's layout tree (Layout); add its line", p, layoutDoc)
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
			t.Errorf("%s's layout tree lists %s/, which holds no package; remove its line or fix its name", layoutDoc, dir)
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

// layoutDoc is the page whose "## Layout" section draws the package tree.
const layoutDoc = "docs/development.md"

// readmeLayout returns the directories the first code block under the
// "## Layout" heading of layoutDoc lists, as paths from the repository root.
func readmeLayout(readme string) (map[string]bool, error) {
	_, rest, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return nil, errors.New(layoutDoc + `: no "## Layout" section`)
	}
	_, rest, ok = strings.Cut(rest, "\n```\n")
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		return nil, errors.New(layoutDoc + ": no code block under Layout")
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
			return nil, fmt.Errorf("%s layout line %d: %q is indented under nothing", layoutDoc, i+1, line)
		}
		stack = append(stack[:level], m[2])
		dirs[strings.Join(stack, "/")] = true
	}
	if len(dirs) == 0 {
		return nil, errors.New(layoutDoc + ": the layout block lists no directories")
	}
	return dirs, nil
}

// markdownFiles lists README.md, docs/*.md and every .md under examples/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(repoPath("docs", "*.md"))
	files = append([]string{repoPath("README.md")}, files...)
	err := filepath.WalkDir(repoPath("examples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// fenceRE finds fenced code blocks, where a link is text.
var fenceRE = regexp.MustCompile("(?ms)^```.*?^```")

// mdLinkRE finds an inline link's target: ](target) or ](target "title").
var mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// proseOf is a Markdown text without its code blocks and code spans.
func proseOf(md string) string {
	md = fenceRE.ReplaceAllString(md, "")
	return regexp.MustCompile("`[^`\n]+`").ReplaceAllString(md, "")
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: the text lowercased, punctuation other than '-' and '_'
// dropped, spaces made '-'; a repeated one gets -1, -2, …
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(fenceRE.ReplaceAllString(md, ""), "\n") {
		text, ok := headingText(line)
		if !ok {
			continue
		}
		a := githubAnchor(text)
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// headingText returns an ATX heading's text ("## Flags: embed" → "Flags: embed").
func headingText(line string) (string, bool) {
	hashes := len(line) - len(strings.TrimLeft(line, "#"))
	if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
		return "", false
	}
	return strings.TrimSpace(line[hashes:]), true
}

func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinksResolve: every relative link of README.md, docs/*.md and
// examples/**/*.md names a file (or directory) of the repository and, with
// a #fragment, a heading of that file, by GitHub's anchor rule. A section
// moved to another page without its links fixed fails here.
func TestDocsLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(data))
		return anchors[path]
	}
	links := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(proseOf(string(data)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, frag, _ := strings.Cut(target, "#")
			dest := filepath.Clean(f)
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				st, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
				if st.IsDir() {
					if frag != "" {
						t.Errorf("%s: link %q: an anchor in a directory", f, target)
					}
					continue
				}
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", f, target, dest, frag)
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d relative links; want the docs' (is the link pattern right?)", links)
	}
}

// TestGitHubAnchor pins the anchor rule the link test uses.
func TestGitHubAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Real models", "real-models"},
		{"Compact vectors (`--dtype`)", "compact-vectors---dtype"},
		{"A model learned from your corpus (`gen-model --kind word-vectors`)", "a-model-learned-from-your-corpus-gen-model---kind-word-vectors"},
		{"llama.cpp and ONNX Runtime libraries", "llamacpp-and-onnx-runtime-libraries"},
		{"Flags: models rm, models verify", "flags-models-rm-models-verify"},
		{"snake_case & Ünïcode", "snake_case--ünïcode"},
	} {
		if got := githubAnchor(tc.heading); got != tc.want {
			t.Errorf("githubAnchor(%q) = %q; want %q", tc.heading, got, tc.want)
		}
	}
	if a := headingAnchors("# A\n## A\n```\n# A\n```\n### A\n"); !a["a"] || !a["a-1"] || !a["a-2"] || a["a-3"] {
		t.Errorf("anchors of three headings A (and one in code): %v; want a, a-1, a-2", a)
	}
}
