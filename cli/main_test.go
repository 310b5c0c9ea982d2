package cli

import (
	"bytes"
	"context"
	"slices"
	"testing"
)

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"version", []string{"--version"}, exitOK},
		{"unknown command", []string{"frobnicate"}, exitUsage},
		{"unknown flag", []string{"inspect", "--frob", "x.gguf"}, exitUsage},
		{"missing required flag", []string{"gen-model", "--kind", "bert-embed"}, exitUsage},
		{"missing file", []string{"inspect", "/nonexistent/model.gguf"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := Run(context.Background(), append([]string{"synapse"}, tt.args...), &out, &errOut); got != tt.want {
				t.Errorf("exit %d; want %d (stderr %q)", got, tt.want, errOut.String())
			}
		})
	}
}

func TestFlagsFirst(t *testing.T) {
	app := newApp(nil, nil)
	got := flagsFirst(app, []string{"synapse", "embed", "a.jsonl", "-m", "m.gguf", "b.jsonl", "--resume", "--dims=8", "--", "-c.jsonl"})
	want := []string{"synapse", "embed", "-m", "m.gguf", "--resume", "--dims=8", "a.jsonl", "b.jsonl", "--", "-c.jsonl"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
	got = flagsFirst(app, []string{"synapse", "models", "add", "m.gguf", "--name", "m", "--quantize=q8_0", "--json"})
	want = []string{"synapse", "models", "add", "--name", "m", "--quantize=q8_0", "--json", "m.gguf"}
	if !slices.Equal(got, want) {
		t.Errorf("subcommand: got %q; want %q", got, want)
	}
}
