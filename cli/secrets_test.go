package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsScrubbed: a secret from the environment (HF_TOKEN,
// PGPASSWORD) that reaches a message from any source — here the user's
// own -m argument, which no hub or database code touched, with either
// --log-format — is printed as [NAME], never as itself.
func TestSecretsScrubbed(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"id":"a","text":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range secretEnv {
		for _, format := range []string{"text", "json"} {
			t.Run(name+"/"+format, func(t *testing.T) {
				secret := "s3cr3t-" + strings.ToLower(name) + `-"value"`
				model := filepath.Join(t.TempDir(), secret+".gguf")
				r := runSynapse(t, []string{name + "=" + secret, "SYNAPSE_MODELS=" + t.TempDir()}, "embed", in, "-m", model,
					"-o", filepath.Join(t.TempDir(), "o.arrow"), "--log-format", format)
				r.wantCode(t, exitUsage)
				if strings.Contains(r.stdout+r.stderr, "s3cr3t") || !strings.Contains(r.stderr, "["+name+"]") {
					t.Errorf("stderr %q; want %s shown as [%s], never itself", r.stderr, name, name)
				}
			})
		}
	}
}

// TestJobLogScrubbed: a job's log — a note, and a JSON record whose
// message and fields hold the secret, escaped as JSON spells it — never
// writes HF_TOKEN's value.
func TestJobLogScrubbed(t *testing.T) {
	secret := `tok-"quoted"\value`
	t.Setenv("HF_TOKEN", secret)
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log := newJobLog(&buf, format)
		log.note(slog.LevelError, "the server said: Bearer "+secret)
		log.Error("failed: "+secret, "detail", secret)
		if out := buf.String(); strings.Contains(out, "tok-") || !strings.Contains(out, "[HF_TOKEN]") {
			t.Errorf("%s log: %q; want HF_TOKEN shown as [HF_TOKEN] only", format, out)
		}
	}
}
