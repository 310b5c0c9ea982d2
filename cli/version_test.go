package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/wire"
)

// fakeLlamaLib is a directory that passes the library check (the files are
// empty: nothing loads them here).
func fakeLlamaLib(t *testing.T) string {
	dir := t.TempDir()
	files := map[string]string{"libllama.so": "", "libggml.so": "",
		"_nlcBuildMetadata.json": `{"buildOptions":{"llamaCpp":{"release":"` + engine.LlamaRelease + `"}}}`}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestVersion(t *testing.T) {
	lib := fakeLlamaLib(t)
	t.Setenv("SYNAPSE_LLAMA_LIB", lib)
	ort := t.TempDir()
	if err := os.WriteFile(filepath.Join(ort, "libonnxruntime.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SYNAPSE_ORT_LIB", ort)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		var out, errOut bytes.Buffer
		if code := Run(context.Background(), append([]string{"synapse"}, args...), &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d; want 0\n%s", args, code, errOut.String())
		}
		want := fmt.Sprintf("synapse %s\nworker protocol v%d\nllama.cpp %s in %s (SYNAPSE_LLAMA_LIB)\nONNX Runtime %s in %s (SYNAPSE_ORT_LIB)\n",
			version, wire.Version, engine.LlamaRelease, lib, engine.ORTRelease, ort)
		if out.String() != want {
			t.Errorf("%v: got %q; want %q", args, out.String(), want)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"synapse", "version", "--llama-lib", missing}, &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), missing+": does not exist") || !strings.Contains(out.String(), "make setup") {
		t.Errorf("missing libraries: exit %d, output %q; want 0 and where it looked, what is missing, how to get it", code, out.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"synapse", "frobnicate", "-m", "x.gguf", "in.jsonl"}, &out, &errOut)
	if code != exitUsage {
		t.Errorf("exit %d; want %d", code, exitUsage)
	}
	msg := errOut.String()
	for _, want := range []string{`unknown command "frobnicate"`, "embed", "inspect", "rerank", "tokenize", "version"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q; want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "No help topic") || strings.Contains(msg, "worker") {
		t.Errorf("stderr %q; want neither urfave's help-topic message nor the hidden commands", msg)
	}
}
