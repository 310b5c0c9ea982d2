package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsScrubbed: a secret from the environment (HF_TOKEN,
// PGPASSWORD) that reaches a message from any source — here the user's
// own -m argument, which no hub or database code touched — is printed as
// [NAME], never as itself.
func TestSecretsScrubbed(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"id":"a","text":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range secretEnv {
		t.Run(name, func(t *testing.T) {
			secret := "s3cr3t-" + strings.ToLower(name) + "-value"
			model := filepath.Join(t.TempDir(), secret+".gguf")
			r := runSynapse(t, []string{name + "=" + secret, "SYNAPSE_MODELS=" + t.TempDir()}, "embed", in, "-m", model, "-o", filepath.Join(t.TempDir(), "o.arrow"))
			r.wantCode(t, exitUsage)
			if strings.Contains(r.stdout+r.stderr, secret) || !strings.Contains(r.stderr, "["+name+"]") {
				t.Errorf("stderr %q; want %s shown as [%s], never itself", r.stderr, name, name)
			}
		})
	}
}
