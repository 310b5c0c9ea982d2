package cli

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// proseFlags are flags documented in prose rather than in their command's
// flag table; keep this short.
var proseFlags = map[string]string{
	"chaos": "hidden (job commands, models add): docs/chaos.md describes the drills",
}

// flagTable is one `| flag | meaning |` table of the docs and the commands
// its heading gives it to.
type flagTable struct {
	file, heading string
	commands      []string
	flags         []string // names without dashes: "m", "model"
}

// flagNameRE finds a flag's name in a code span of a table's first cell:
// `-m, --model MODEL`, `--log-format text\|json`.
var flagNameRE = regexp.MustCompile(`(?:^|[\s,])--?([A-Za-z][A-Za-z0-9-]*)`)

// docFlagTables reads every flag table of README.md and docs/*.md. A
// table belongs to the commands its nearest heading names: "Flags: embed,
// rerank, generate" or "Flags: models add"; a parenthesis after the names
// is a comment ("Flags: embed (incremental runs)").
func docFlagTables(t *testing.T) []flagTable {
	t.Helper()
	files, _ := filepath.Glob(repoPath("docs", "*.md"))
	var tables []flagTable
	for _, f := range append([]string{repoPath("README.md")}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoPath(), f)
		heading, fence := "", false
		var cur *flagTable
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			if h, ok := headingText(line); ok {
				heading = h
			}
			if !strings.HasPrefix(line, "|") {
				cur = nil
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			first := strings.TrimSpace(cells[0])
			switch {
			case cur == nil && first == "flag":
				tables = append(tables, flagTable{file: rel, heading: heading, commands: headingCommands(heading)})
				cur = &tables[len(tables)-1]
			case cur != nil && !strings.HasPrefix(first, "---"):
				for _, span := range regexp.MustCompile("`[^`]+`").FindAllString(first, -1) {
					for _, m := range flagNameRE.FindAllStringSubmatch(strings.Trim(span, "`"), -1) {
						cur.flags = append(cur.flags, m[1])
					}
				}
			}
		}
	}
	return tables
}

// headingCommands returns the command paths of a "Flags: …" heading.
func headingCommands(heading string) []string {
	rest, ok := strings.CutPrefix(heading, "Flags: ")
	if !ok {
		return nil
	}
	rest, _, _ = strings.Cut(rest, " (")
	var cmds []string
	for _, c := range strings.Split(rest, ",") {
		cmds = append(cmds, strings.TrimSpace(c))
	}
	return cmds
}

// commandPaths maps every command's path ("embed", "models add") to it.
func commandPaths(prefix string, cmds []*cli.Command, into map[string]*cli.Command) map[string]*cli.Command {
	for _, c := range cmds {
		into[prefix+c.Name] = c
		commandPaths(prefix+c.Name+" ", c.Subcommands, into)
	}
	return into
}

// TestDocsFlagTablesMatchCommands: the flag tables of the docs and the
// commands agree. Every table stands under a "Flags: COMMAND[, …]"
// heading naming real commands; each flag it lists (names and aliases)
// exists on each of them; and every flag of every command help shows
// (every name and alias) is in one of that command's tables, or in
// proseFlags. So `synapse help embed` and docs/embed.md name the same flags.
func TestDocsFlagTablesMatchCommands(t *testing.T) {
	cmds := commandPaths("", newApp(io.Discard, io.Discard).Commands, map[string]*cli.Command{})
	documented := map[string]map[string]bool{} // command path → flag names in its tables
	pages := map[string][]string{}             // command path → the files of its tables
	tables := docFlagTables(t)
	if len(tables) < 10 {
		t.Fatalf("found %d flag tables; want the docs' (is the table pattern right?)", len(tables))
	}
	for _, tb := range tables {
		if len(tb.commands) == 0 {
			t.Errorf("%s: a flag table under %q; put it under a heading \"Flags: COMMAND\" naming its commands", tb.file, tb.heading)
			continue
		}
		if len(tb.flags) == 0 {
			t.Errorf("%s: the flag table under %q lists no flag", tb.file, tb.heading)
		}
		for _, path := range tb.commands {
			cmd, ok := cmds[path]
			if !ok {
				t.Errorf("%s: heading %q names %q, which is no synapse command", tb.file, tb.heading, path)
				continue
			}
			has := map[string]bool{}
			for _, f := range cmd.Flags {
				for _, n := range f.Names() {
					has[n] = true
				}
			}
			if documented[path] == nil {
				documented[path] = map[string]bool{}
			}
			pages[path] = append(pages[path], tb.file)
			for _, n := range tb.flags {
				documented[path][n] = true
				if !has[n] {
					t.Errorf("%s: the table under %q lists %s, which synapse %s does not have", tb.file, tb.heading, dashed(n), path)
				}
			}
		}
	}
	for _, path := range slices.Sorted(maps.Keys(cmds)) {
		cmd := cmds[path]
		if documented[path] == nil && (cmd.Hidden || len(cmd.Flags) == 0) {
			continue // internal commands need no table, nor do commands without flags
		}
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				if !documented[path][n] && proseFlags[n] == "" {
					t.Errorf("synapse %s has %s, which no flag table of it lists (tables: %v)", path, dashed(n), pages[path])
				}
			}
		}
	}
}

// TestCommandsNameTheirDocs: the help of every command help shows names
// the docs page of its full reference (docs/NAME.md), the page exists, and
// it holds the command's flag table when the command has flags.
func TestCommandsNameTheirDocs(t *testing.T) {
	cmds := commandPaths("", newApp(io.Discard, io.Discard).Commands, map[string]*cli.Command{})
	tablePages := map[string][]string{}
	for _, tb := range docFlagTables(t) {
		for _, c := range tb.commands {
			tablePages[c] = append(tablePages[c], tb.file)
		}
	}
	pageRE := regexp.MustCompile(`docs/[a-z0-9-]+\.md`)
	for _, path := range slices.Sorted(maps.Keys(cmds)) {
		cmd := cmds[path]
		if cmd.Hidden || cmd.Name == "help" {
			continue
		}
		named := pageRE.FindAllString(cmd.Usage+"\n"+cmd.Description, -1)
		if len(named) == 0 {
			t.Errorf("synapse %s: its Usage and Description name no docs/ page", path)
			continue
		}
		for _, p := range named {
			if _, err := os.Stat(repoPath(p)); err != nil {
				t.Errorf("synapse %s names %s: %v", path, p, err)
			}
		}
		if len(cmd.Flags) > 0 && !slices.ContainsFunc(named, func(p string) bool { return slices.Contains(tablePages[path], p) }) {
			t.Errorf("synapse %s names %v; its flag table is in %v", path, named, tablePages[path])
		}
	}
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
