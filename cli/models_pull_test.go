package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/model/hub/hubtest"
)

// servedModel writes a small sentence-transformers repository (configs, a
// Pooling module, model.safetensors, a pickle, an ONNX export) to serve.
func servedModel(t *testing.T, pickleOnly bool) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"config.json":           `{"model_type": "bert"}`,
		"tokenizer.json":        `{"version": "1.0"}`,
		"modules.json":          `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]`,
		"1_Pooling/config.json": `{"pooling_mode_mean_tokens": true}`,
		"pytorch_model.bin":     strings.Repeat("p", 5000),
	}
	if !pickleOnly {
		files["model.safetensors"] = strings.Repeat("w", 50_000)
		files["onnx/model.onnx"] = strings.Repeat("g", 20_000)
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestModelsPullExitCodes: refusals are exit 2 naming the reason, a
// network that fails on every attempt exit 1, and options are checked
// before the network is asked anything.
func TestModelsPullExitCodes(t *testing.T) {
	srv := hubtest.New(t)
	srv.Add(t, "org/ok", servedModel(t, false), "main")
	srv.Add(t, "org/bad-sum", servedModel(t, false), "main")
	srv.WrongChecksum("org/bad-sum", "model.safetensors")
	srv.Add(t, "org/gated", servedModel(t, false), "main")
	srv.Gate("org/gated", "hf_letmein")
	srv.Add(t, "org/pickle", servedModel(t, true), "main")
	srv.Add(t, "org/echo-403", servedModel(t, false), "main")
	srv.Echo("org/echo-403", 403)
	srv.Add(t, "org/echo-502", servedModel(t, false), "main")
	srv.Echo("org/echo-502", 502)
	outside := servedModel(t, false)
	os.WriteFile(filepath.Join(outside, "modules.json"), []byte(`[{"idx":0,"path":""},{"idx":1,"path":"../1_Pooling"}]`), 0o644)
	srv.Add(t, "org/outside", outside, "main")
	garbled := servedModel(t, false)
	os.WriteFile(filepath.Join(garbled, "modules.json"), []byte(`[{"idx":0,`), 0o644)
	srv.Add(t, "org/garbled", garbled, "main")
	flaky := hubtest.New(t)
	flaky.Add(t, "org/flaky", servedModel(t, false), "main")
	flaky.DropFile("model.safetensors", hubtest.Drop{After: 1000, Times: -1})
	tests := []struct {
		name      string
		endpoint  string
		token     string
		args      []string
		code      int
		wantInErr []string
		noNetwork bool
	}{
		{"pulled", srv.URL, "", []string{"org/ok"}, exitOK, nil, false},
		{"bad id", srv.URL, "", []string{"org/a/b"}, exitUsage, []string{"ORG/NAME"}, true},
		{"two ids", srv.URL, "", []string{"org/ok", "org/ok"}, exitUsage, []string{"want one"}, true},
		{"attempts", srv.URL, "", []string{"--attempts", "0", "org/ok"}, exitUsage, []string{"--attempts"}, true},
		{"endpoint", "ftp://" + strings.TrimPrefix(srv.URL, "http://"), "", []string{"org/ok"}, exitUsage, []string{"HF_ENDPOINT"}, true},
		{"checksum", srv.URL, "", []string{"org/bad-sum"}, exitUsage, []string{"model.safetensors", "checksum mismatch"}, false},
		{"gated", srv.URL, "", []string{"org/gated"}, exitUsage, []string{"set HF_TOKEN"}, false},
		{"gated with HF_TOKEN", srv.URL, "hf_letmein", []string{"org/gated"}, exitOK, nil, false},
		{"no such model", srv.URL, "", []string{"org/none"}, exitUsage, []string{"404", "Repository not found"}, false},
		{"no such revision", srv.URL, "", []string{"org/ok@v9"}, exitUsage, []string{"404", "v9"}, false},
		{"pickle only", srv.URL, "", []string{"org/pickle"}, exitUsage, []string{"pytorch_model.bin, a pickle"}, false},
		{"unwritable cache", srv.URL, "", []string{"--models-dir", "/dev/null/models", "org/ok"}, exitUsage, []string{"the model cache"}, true},
		{"token echoed, 403", srv.URL, "hf_letmein", []string{"org/echo-403"}, exitUsage, []string{"you sent Authorization: Bearer [HF_TOKEN]"}, false},
		{"token echoed, 502", srv.URL, "hf_letmein", []string{"--attempts", "2", "org/echo-502"}, exitFatal, []string{"you sent Authorization: Bearer [HF_TOKEN]"}, false},
		{"module outside the repository", srv.URL, "", []string{"org/outside"}, exitUsage, []string{`module path "../1_Pooling"`}, false},
		{"modules.json garbled", srv.URL, "", []string{"org/garbled"}, exitUsage, []string{"modules.json"}, false},
		{"dropped every time", flaky.URL, "", []string{"--attempts", "1", "org/flaky"}, exitFatal, []string{"connection dropped", "run again to resume"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SYNAPSE_MODELS", filepath.Join(t.TempDir(), "models"))
			t.Setenv("HF_ENDPOINT", tt.endpoint)
			t.Setenv("HF_TOKEN", tt.token)
			before := len(srv.Requests())
			code, stdout, stderr := runCLI(t, append([]string{"models", "pull"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("got exit %d; want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.wantInErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q; want it to say %q", stderr, w)
				}
			}
			if strings.Contains(stderr+stdout, "hf_letmein") {
				t.Errorf("the token is in the output: %s%s", stdout, stderr)
			}
			if n := len(srv.Requests()) - before; tt.noNetwork && n != 0 {
				t.Errorf("%d requests before the options were refused; want none", n)
			}
			if tt.code == exitOK && !strings.HasPrefix(stdout, "pulled") {
				t.Errorf("stdout %q; want it to start with pulled", stdout)
			}
		})
	}
}

// TestModelsPullUnresolvedHost: a host that cannot be resolved (here a
// .invalid name, which no resolver answers) is said once, with the ways out,
// not tried five times over 15 s; exit 1, since the same pull may work once
// the network is back.
func TestModelsPullUnresolvedHost(t *testing.T) {
	t.Setenv("SYNAPSE_MODELS", filepath.Join(t.TempDir(), "models"))
	t.Setenv("HF_ENDPOINT", "http://no-such-hub.invalid")
	start := time.Now()
	code, stdout, stderr := runCLI(t, "models", "pull", "org/ok")
	if code != exitFatal {
		t.Fatalf("exit %d; want %d\nstdout: %s\nstderr: %s", code, exitFatal, stdout, stderr)
	}
	for _, w := range []string{"cannot resolve the host no-such-hub.invalid", "HF_ENDPOINT", "-m DIR", "Hugging Face cache"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q; want it to say %q", stderr, w)
		}
	}
	if strings.Contains(stderr, "trying again") || strings.Count(stderr, "cannot resolve") != 1 {
		t.Errorf("stderr %q; want the failure said once, not retried", stderr)
	}
	t.Logf("refused in %v", time.Since(start).Round(time.Millisecond))
}

// TestModelsLsAndRmPulled: ls lists a pulled model by its id with the refs
// naming its commit; rm ORG/NAME removes it, and a second rm is refused.
func TestModelsLsAndRmPulled(t *testing.T) {
	srv := hubtest.New(t)
	commit := srv.Add(t, "org/listed", servedModel(t, false), "main")
	models := filepath.Join(t.TempDir(), "models")
	t.Setenv("SYNAPSE_MODELS", models)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	if code, _, stderr := runCLI(t, "models", "pull", "org/listed"); code != exitOK {
		t.Fatalf("pull: exit %d\n%s", code, stderr)
	}
	code, stdout, _ := runCLI(t, "models", "ls")
	row := regexp.MustCompile(`(?m)^org/listed\s+` + commit[:12] + `\s+main\s+5\s+`)
	if code != exitOK || !row.MatchString(stdout) {
		t.Errorf("ls: exit %d, stdout %q; want a row org/listed %s main 5 files", code, stdout, commit[:12])
	}
	if code, stdout, stderr := runCLI(t, "models", "rm", "org/listed"); code != exitOK || !strings.HasPrefix(stdout, "removed org/listed") {
		t.Errorf("rm: exit %d, stdout %q, stderr %q; want removed", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(models, "hub", "models--org--listed")); err == nil {
		t.Errorf("the pulled folder is still there after rm")
	}
	if _, stdout, _ := runCLI(t, "models", "ls"); strings.Contains(stdout, "org/listed") {
		t.Errorf("ls after rm: %q; want org/listed gone", stdout)
	}
	if code, _, stderr := runCLI(t, "models", "rm", "org/listed"); code != exitUsage || !strings.Contains(stderr, "not pulled") {
		t.Errorf("second rm: exit %d, stderr %q; want exit 2 saying it is not pulled", code, stderr)
	}
}
