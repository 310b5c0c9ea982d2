package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/onnx/onnxtest"
)

// cleanEnv is the test's environment without the variables that would tell
// synapse where its libraries are, with HOME and XDG_DATA_HOME in dir.
func cleanEnv(dir string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SYNAPSE_LLAMA_LIB", "SYNAPSE_ORT_LIB", "HOME", "XDG_DATA_HOME", "SYNAPSE_CHAOS":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "HOME="+filepath.Join(dir, "home")), extra...)
}

// runIn runs the binary bin in dir with env and returns its result.
func runIn(t *testing.T, bin, dir string, env []string, args ...string) embedResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return embedResult{out.String(), errb.String(), code}
}

// TestEmbedLlamaLibMissing: a wrong or missing library directory is named,
// with what is missing and how to get it, before any worker is spawned.
func TestEmbedLlamaLibMissing(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello world"}})
	model := tinyModel(t)
	bin := testenv.Binary(t)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"flag", nil, []string{"--llama-lib", filepath.Join(dir, "nowhere")}, []string{"--llama-lib", filepath.Join(dir, "nowhere"), "does not exist"}},
		{"env", []string{"SYNAPSE_LLAMA_LIB=" + empty}, nil, []string{"SYNAPSE_LLAMA_LIB", empty, "no libllama.so"}},
		{"nothing installed", nil, nil, []string{"not found", "beside the binary", filepath.Join(dir, "home", ".local", "share", "synapse", "llama", engine.LlamaRelease)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"embed", in, "-m", model, "-o", filepath.Join(dir, "out.arrow")}, tt.args...)
			res := runIn(t, bin, dir, cleanEnv(dir, tt.env...), args...)
			if res.code == 0 {
				t.Fatalf("exit 0; want a failure\n%s", res.stderr)
			}
			for _, w := range append(tt.want, "make setup", "make install", engine.LlamaNPMPackage) {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "worker exited") || strings.Contains(res.stdout, "rows read") {
				t.Errorf("a worker was started:\nstdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			}
		})
	}
}

// TestInstalledLayout: `make install PREFIX=… DESTDIR=…` installs, under
// DESTDIR, the binary and both engines' libraries (PREFIX/bin/synapse,
// PREFIX/lib/synapse/llama/RELEASE, PREFIX/lib/synapse/onnxruntime/RELEASE),
// the man page (PREFIX/share/man/man1/synapse.1) and the bash, zsh and fish
// completions, and the installed binary, run from an empty directory with
// no flag or variable naming a library, finds them and embeds with a GGUF
// and with an ONNX model.
func TestInstalledLayout(t *testing.T) {
	testenv.LlamaLib(t) // make install copies the libraries `make setup` fetched
	testenv.ORTLib(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	stage := filepath.Join(dir, "stage") // DESTDIR, as a package build stages files
	prefix := filepath.Join(stage, "opt", "synapse")
	install := exec.Command("make", "--no-print-directory", "-C", repoPath(), "install", "DESTDIR="+stage, "PREFIX=/opt/synapse")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "bin", "synapse")
	for _, lib := range []string{filepath.Join("llama", engine.LlamaRelease), filepath.Join("onnxruntime", engine.ORTRelease)} {
		if _, err := os.Stat(filepath.Join(prefix, "lib", "synapse", lib)); err != nil {
			t.Errorf("make install did not install %s: %v", lib, err)
		}
	}
	// the man page and completions, each what the installed binary prints
	for path, args := range map[string][]string{
		"share/man/man1/synapse.1":                     {"man"},
		"share/bash-completion/completions/synapse":    {"completion", "bash"},
		"share/zsh/site-functions/_synapse":            {"completion", "zsh"},
		"share/fish/vendor_completions.d/synapse.fish": {"completion", "fish"},
	} {
		got, err := os.ReadFile(filepath.Join(prefix, path))
		if err != nil {
			t.Errorf("make install did not install %s: %v", path, err)
			continue
		}
		_, want, _ := runInProcess(args...)
		if len(got) == 0 || string(got) != want {
			t.Errorf("PREFIX/%s holds %d bytes; want the %d of synapse %s", path, len(got), len(want), strings.Join(args, " "))
		}
	}
	onnxModel := filepath.Join(dir, "onnx-model")
	if _, err := onnxtest.WriteDir(onnxModel, onnxtest.Dir{Encoder: onnxtest.Tiny()}); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "c.jsonl")
	writeJSONL(t, in, []map[string]any{{"id": "a", "text": "hello world"}})
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for format, model := range map[string]string{"gguf": tinyModel(t), "onnx": onnxModel} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(dir, format+".arrow")
			res := runIn(t, bin, empty, cleanEnv(dir), "embed", in, "-m", model, "-o", out, "--workers", "1", "--threads", "1", "-q")
			res.wantCode(t, exitOK)
			if _, rows := readOutput(t, out); len(rows) != 1 {
				t.Errorf("%d rows; want 1", len(rows))
			}
		})
	}
	if names := dirNames(t, empty); len(names) > 0 {
		t.Errorf("the runs left %q in the working directory", names)
	}
}
