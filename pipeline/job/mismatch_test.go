package job

import (
	"errors"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// TestResumeMismatch: a refused resume names each option that differs,
// once, from the metadata keys and the settings record alike.
func TestResumeMismatch(t *testing.T) {
	was := vector.Settings{ChunkTokens: 510, Truncate: true, Dtype: "int8", Ranges: "sha256:aa", Normalize: true}
	now := vector.Settings{ChunkTokens: 256, Dtype: "binary", Normalize: false}
	err := resumeMismatch(&output.MismatchError{Diffs: []output.Mismatch{
		{Key: "--buffer-mb", Was: "64", Now: "128", InWas: true, InNow: true},
		{Key: "synapse.batch_tokens", Was: "160", Now: "200", InWas: true, InNow: true},
		{Key: "synapse.dtype", Was: "int8", Now: "binary", InWas: true, InNow: true},
		{Key: "synapse.normalize", Was: "true", Now: "false", InWas: true, InNow: true},
		{Key: vector.MetaSettings, Was: was.JSON(), Now: now.JSON(), InWas: true, InNow: true},
		{Key: vector.MetaSettingsDigest, Was: was.Digest(), Now: now.Digest(), InWas: true, InNow: true},
	}})
	if !errors.Is(err, output.ErrResumeMismatch) {
		t.Fatalf("%v: not ErrResumeMismatch", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`--buffer-mb was "64" in the interrupted run; it is "128" now`,
		"--batch-tokens was 160 in the interrupted run and is 200 now",
		"--dtype was int8 in the interrupted run and is binary now",
		"--no-normalize was not set in the interrupted run and is now",
		"--chunk-tokens was 510 in the interrupted run and is 256 now",
		"--truncate was set in the interrupted run and is not now",
		"the int8/uint8 ranges (--calibration) was sha256:aa in the interrupted run and is not set now",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "--dtype") != 1 || strings.Contains(msg, "{") || strings.Contains(msg, "settings_digest") {
		t.Errorf("message repeats --dtype or shows a record or digest:\n%s", msg)
	}
}
