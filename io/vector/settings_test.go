package vector

import (
	"strings"
	"testing"
)

// TestVectorSettings: the digest covers every setting, the metadata reads
// back, a record that does not match its digest is refused, and Diff names
// the first setting that differs.
func TestVectorSettings(t *testing.T) {
	s := Settings{ModelDigest: "sha256:aa", TextFields: []string{"title", "text"}, Prefix: "p: ", ChunkTokens: 64,
		Overlap: 8, Pooling: "mean", Normalize: true, Dims: 32}
	meta := s.Metadata()
	get := func(k string) (string, bool) { v, ok := meta[k]; return v, ok }
	back, err := SettingsFromMetadata(get)
	if err != nil || back.Digest() != s.Digest() || back.Diff(s) != "" {
		t.Fatalf("read back %+v, %v; want %+v", back, err, s)
	}
	for _, tc := range []struct {
		change func(*Settings)
		diff   string
	}{
		{func(v *Settings) { v.ModelDigest = "sha256:bb" }, `model_digest: previous "sha256:aa", this run "sha256:bb"`},
		{func(v *Settings) { v.TextFields = []string{"text"} }, `text_fields: previous ["title","text"], this run ["text"]`},
		{func(v *Settings) { v.Prefix = "" }, `prefix: previous "p: ", this run ""`},
		{func(v *Settings) { v.ChunkTokens = 32 }, "chunk_tokens: previous 64, this run 32"},
		{func(v *Settings) { v.Overlap = 0 }, "chunk_overlap: previous 8, this run 0"},
		{func(v *Settings) { v.Pooling = "cls" }, `pooling: previous "mean", this run "cls"`},
		{func(v *Settings) { v.Normalize = false }, "normalize: previous true, this run false"},
		{func(v *Settings) { v.Dims = 16 }, "dims: previous 32, this run 16"},
		// The output kind is named first, though dims differ too.
		{func(v *Settings) { v.Output, v.Dims, v.Pooling = "sparse", 120, "splade" }, `output: previous "", this run "sparse"`},
		{func(v *Settings) { v.SparseTopK = 64 }, "sparse_top_k: previous 0, this run 64"},
	} {
		v := s
		v.TextFields = append([]string(nil), s.TextFields...)
		tc.change(&v)
		if got := v.Diff(s); got != tc.diff {
			t.Errorf("Diff = %q; want %q", got, tc.diff)
		}
		if v.Digest() == s.Digest() {
			t.Errorf("%s: the digest did not change", tc.diff)
		}
	}
	meta[MetaSettings] = strings.Replace(meta[MetaSettings], "64", "65", 1)
	if _, err := SettingsFromMetadata(get); err == nil {
		t.Error("a settings record that does not match its digest was accepted")
	}
	delete(meta, MetaSettingsDigest)
	if _, err := SettingsFromMetadata(get); err == nil || !strings.Contains(err.Error(), "no synapse.settings_digest") {
		t.Errorf("an output without settings: %v", err)
	}
}
