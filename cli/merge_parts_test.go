package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/model/testmodels"
)

// TestMergeRefusesForeignPart: two shards embedded with one generated model,
// then part 1 replaced by a shard-1 part embedded with another model (the
// same but for its seed) or with another dtype, its manifest untouched:
// merge exits 2 naming the part and the field its metadata differs in, and
// publishes nothing. Arrow and Parquet parts alike.
func TestMergeRefusesForeignPart(t *testing.T) {
	model := tinyModel(t)
	other := testmodels.Model(t, "tiny-seed-8", func(modelgen.Vocab) modelgen.BERT {
		b := tinyBERT()
		b.Seed = 8
		return b
	})
	tests := []struct {
		name, ext string
		extra     []string // how the planted part was embedded
		field     string
	}{
		{"another model", ".arrow", []string{"-m", other}, "synapse.model_digest"},
		{"another model, parquet", ".parquet", []string{"-m", other}, "synapse.model_digest"},
		{"another dtype", ".arrow", []string{"-m", model, "--dtype", "float16"}, "synapse.dtype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			inputs := idCorpus(t, dir, false)
			embed := func(extra ...string) embedResult {
				args := append([]string{"embed"}, inputs...)
				return runSynapse(t, nil, append(append(args, "--workers", "1", "--threads", "1", "--chunk-tokens", "32", "-q"), extra...)...)
			}
			out := filepath.Join(dir, "out"+tt.ext)
			embed("-m", model, "-o", out, "--shard", "0/2").wantCode(t, exitPartial)
			embed("-m", model, "-o", out, "--shard", "1/2").wantCode(t, exitOK)
			planted := filepath.Join(t.TempDir(), "out"+tt.ext)
			embed(append(tt.extra, "-o", planted, "--shard", "1/2")...).wantCode(t, exitOK)
			part1 := filepath.Join(dir, "out.shard-1-of-2"+tt.ext)
			b, err := os.ReadFile(filepath.Join(filepath.Dir(planted), "out.shard-1-of-2"+tt.ext))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(part1, b, 0o644); err != nil {
				t.Fatal(err)
			}
			merged := filepath.Join(dir, "merged"+tt.ext)
			res := runSynapse(t, nil, "merge", out, "-o", merged)
			res.wantCode(t, exitUsage)
			for _, want := range []string{fmt.Sprintf("part %s", part1), tt.field} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("merge: got\n%s\nwant it to name %q", res.stderr, want)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "merged*")); len(left) > 0 {
				t.Errorf("merge refused yet left %v", left)
			}
		})
	}
}

// TestMergeRefusesChangedInput: an input rewritten between shard 0 and
// shard 1 with the same size and other text makes merge exit 2 naming the
// input and both manifests; each manifest records every input's version
// and the digest of what its shard read of it.
func TestMergeRefusesChangedInput(t *testing.T) {
	model := tinyModel(t)
	dir := t.TempDir()
	inputs := idCorpus(t, dir, false)
	embed := func(extra ...string) embedResult {
		args := append([]string{"embed"}, inputs...)
		return runSynapse(t, nil, append(append(args, "-m", model, "--workers", "1", "--threads", "1", "--chunk-tokens", "32", "-q"), extra...)...)
	}
	out := filepath.Join(dir, "out.arrow")
	embed("-o", out, "--shard", "0/2").wantCode(t, exitPartial)
	b, err := os.ReadFile(inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	rewritten := bytes.ReplaceAll(b, []byte("a"), []byte("e"))
	if err := os.WriteFile(inputs[0], rewritten, 0o644); err != nil {
		t.Fatal(err)
	}
	embed("-o", out, "--shard", "1/2").wantCode(t, exitOK)
	m0, err := output.ReadManifest(filepath.Join(dir, "out.shard-0-of-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	in := m0.Inputs[0]
	if sum := sha256.Sum256(b[in.Start:in.End]); in.Version == nil || in.Version.Size != int64(len(b)) || in.ReadSHA256 != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("shard 0's manifest records %s as version %v, read digest %s; want %d bytes and the digest of bytes [%d, %d) before the rewrite",
			in.File, in.Version, in.ReadSHA256, len(b), in.Start, in.End)
	}
	res := runSynapse(t, nil, "merge", out, "-o", filepath.Join(dir, "merged.arrow"))
	res.wantCode(t, exitUsage)
	for _, want := range []string{inputs[0], "out.shard-0-of-2.json", "out.shard-1-of-2.json", "changed between shards"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("merge: got\n%s\nwant it to name %q", res.stderr, want)
		}
	}
}
