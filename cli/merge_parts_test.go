package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
