package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrittenPathsClash: a file a command writes that is also a file it
// reads (the model, an input, --previous) or another file it writes, by
// name, through a symbolic link, a hard link or a linked directory, is
// refused before any work with exit 2 and both flags named, and the file
// is left as it was.
func TestWrittenPathsClash(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	copyFile(t, tinyModel(t), model)
	in := filepath.Join(dir, "in.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello world"}, {"id": "b", "text": "the cell"}})
	prev := filepath.Join(dir, "prev.arrow")
	embed := func(args ...string) []string {
		return append([]string{"embed", in, "-m", model, "--workers", "1", "--threads", "1"}, args...)
	}
	runSynapse(t, nil, embed("-o", prev)...).wantCode(t, exitOK)
	link := filepath.Join(dir, "link.gguf")
	os.Symlink(model, link)
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	subLink := filepath.Join(dir, "sublink")
	os.Symlink(sub, subLink)
	dangling := filepath.Join(dir, "dangling.jsonl")
	os.Symlink(filepath.Join(sub, "out.arrow"), dangling)
	train := filepath.Join(dir, "train.jsonl") // enough for gen-model to learn word vectors from
	var docs []map[string]any
	for i := range 30 {
		docs = append(docs, map[string]any{"id": i, "text": fmt.Sprintf("the cell divides and the cell grows %d", i)})
	}
	writeJSONL(t, train, docs)
	out := filepath.Join(dir, "out.arrow")
	for _, tc := range []struct {
		name  string
		args  []string
		want  []string // in stderr
		keeps string   // a file that must not change
	}{
		{"--errors is the model", embed("-o", out, "--errors", model), []string{"--errors", "--model"}, model},
		{"--errors is a link to the model", embed("-o", out, "--errors", link), []string{"--errors", "--model"}, model},
		{"--errors is a hard link of the input", embed("-o", out, "--errors", hard), []string{"--errors", "the input"}, in},
		{"--errors is --previous", embed("-o", out, "--previous", prev, "--errors", prev), []string{"--errors", "--previous"}, prev},
		{"--errors is -o", embed("-o", out, "--errors", out), []string{"-o", "--errors"}, ""},
		{"-o through a linked directory is --errors", embed("-o", filepath.Join(sub, "x.arrow"), "--errors", filepath.Join(subLink, "x.arrow")),
			[]string{"-o", "--errors"}, ""},
		{"--errors is a dangling link to -o", embed("-o", filepath.Join(sub, "out.arrow"), "--errors", dangling), []string{"-o", "--errors"}, ""},
		{"--errors is -o's resume file", embed("-o", out, "--errors", out+".partial"), []string{"--errors", "resume file"}, ""},
		{"--deleted is --previous", embed("-o", out, "--previous", prev, "--deleted", prev), []string{"--deleted", "--previous"}, prev},
		{"gen-model --out is --train", []string{"gen-model", "--kind", "word-vectors", "--train", train, "--text-field", "text", "--dims", "8", "--out", train},
			[]string{"--out", "--train"}, train},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []byte
			if tc.keeps != "" {
				before = readFile(t, tc.keeps)
			}
			res := runSynapse(t, nil, tc.args...)
			res.wantCode(t, exitUsage)
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, res.stderr)
				}
			}
			if tc.keeps != "" && !bytes.Equal(readFile(t, tc.keeps), before) {
				t.Errorf("%s changed; want it untouched", tc.keeps)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written by a refused run", out)
			}
		})
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, readFile(t, from), 0o644); err != nil {
		t.Fatal(err)
	}
}
