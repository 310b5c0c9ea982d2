package cli

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runInProcess runs the CLI in this process, for commands that start no
// worker; it returns the exit code, stdout and stderr.
func runInProcess(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), append([]string{"synapse"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// visibleCommands lists the paths of the commands help shows ("embed",
// "models add"), as the man page must.
func visibleCommands(prefix string, cmds []*cli.Command) []string {
	var paths []string
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		paths = append(paths, prefix+c.Name)
		paths = append(paths, visibleCommands(prefix+c.Name+" ", c.Subcommands)...)
	}
	return paths
}

// TestManPage: `synapse man` writes a section-1 roff page, made from the
// commands themselves, that has a section for every command help shows and
// that groff (when installed) renders without a warning.
func TestManPage(t *testing.T) {
	code, page, stderr := runInProcess("man")
	if code != exitOK {
		t.Fatalf("synapse man: exit %d; want 0\nstderr: %s", code, stderr)
	}
	lines := strings.Split(page, "\n")
	first := 0
	for first < len(lines) && lines[first] == ".nh" { // no hyphenation: a request that may come first
		first++
	}
	if first == len(lines) || !strings.HasPrefix(lines[first], ".TH synapse 1") {
		t.Fatalf("the man page opens with %q; want a .TH synapse 1 line (after .nh)", strings.Join(lines[:min(3, len(lines))], `\n`))
	}
	headings := map[string]bool{}
	for _, l := range lines {
		if h, ok := strings.CutPrefix(l, ".SH "); ok {
			headings[h] = true
		} else if h, ok := strings.CutPrefix(l, ".SS "); ok {
			headings[h] = true
		}
	}
	cmds := visibleCommands("", newApp(io.Discard, io.Discard).Commands)
	if len(cmds) < 15 {
		t.Fatalf("%d visible commands; want synapse's", len(cmds))
	}
	for _, path := range cmds {
		name := path[strings.LastIndex(path, " ")+1:]
		if !headings[name] {
			t.Errorf("the man page has no section for %q (.SH or .SS %s)", path, name)
		}
	}
	for _, flag := range []string{`\fB--chunk-tokens\fP`, `\fB--qrels\fP`, `\fB--rescore-with\fP`} {
		if !strings.Contains(page, flag) {
			t.Errorf("the man page does not describe %s", flag)
		}
	}
	if strings.Contains(page, "--chaos") {
		t.Error("the man page describes the hidden --chaos flag")
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("no groff: the page is not rendered")
		return
	}
	cmd := exec.Command(groff, "-k", "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff -man -ww: %v\n%s", err, out)
	}
}

// TestCompletion: each shell's script is printed and names synapse; bash's
// and zsh's ask the binary with the completion flag, which urfave/cli must
// see last (flagsFirst leaves it there); an unknown or missing shell is a
// usage error.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		shell, want string
	}{
		{"bash", "complete -o bashdefault -o default -F _synapse synapse"},
		{"zsh", "#compdef synapse"},
		{"fish", "complete -c synapse"},
	} {
		t.Run(tc.shell, func(t *testing.T) {
			code, script, stderr := runInProcess("completion", tc.shell)
			if code != exitOK {
				t.Fatalf("exit %d; want 0\nstderr: %s", code, stderr)
			}
			if !strings.Contains(script, tc.want) {
				t.Errorf("the %s script does not hold %q:\n%s", tc.shell, tc.want, script)
			}
			if tc.shell != "fish" && !strings.Contains(script, completionFlag) {
				t.Errorf("the %s script never asks synapse %s", tc.shell, completionFlag)
			}
		})
	}
	t.Run("asked", func(t *testing.T) {
		// what the bash script runs for `synapse embed corpus.jsonl --dt<TAB>`, in a
		// process of its own: urfave/cli reads the word being completed from os.Args
		res := runSynapse(t, nil, "embed", "corpus.jsonl", "--dt", completionFlag)
		res.wantCode(t, exitOK)
		if res.stdout != "--dtype\n" {
			t.Errorf("synapse embed corpus.jsonl --dt %s: stdout %q; want \"--dtype\\n\"", completionFlag, res.stdout)
		}
		res = runSynapse(t, nil, "models", completionFlag)
		res.wantCode(t, exitOK)
		for _, sub := range []string{"add", "ls", "pull", "rm", "verify"} {
			if !strings.Contains(res.stdout, sub+"\n") {
				t.Errorf("synapse models %s: stdout %q; want the subcommand %s", completionFlag, res.stdout, sub)
			}
		}
	})
	for _, args := range [][]string{{"completion", "sh"}, {"completion"}, {"completion", "bash", "zsh"}} {
		code, out, stderr := runInProcess(args...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, "bash, zsh or fish") {
			t.Errorf("synapse %s: exit %d, stdout %q, stderr %q; want exit %d naming the shells", strings.Join(args, " "), code, out, stderr, exitUsage)
		}
	}
}
