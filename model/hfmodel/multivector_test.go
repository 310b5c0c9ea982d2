package hfmodel

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadChainPyLate: a directory as PyLate saves a ColBERT model
// (modules.json [Transformer, pylate.models.Dense.Dense], the markers and
// lengths in config_sentence_transformers.json) is a multi-vector chain
// with those settings; without them it takes PyLate's defaults; a residual
// projection is refused; a chain with Pooling is no multi-vector one.
func TestReadChainPyLate(t *testing.T) {
	pylate := func(t *testing.T, config string) string {
		root := t.TempDir()
		touch(t, filepath.Join(root, "modules.json"), "["+stTransformer+`,{"idx":1,"name":"1","path":"1_Dense","type":"pylate.models.Dense.Dense"}]`)
		writeDense(t, filepath.Join(root, "1_Dense"), 8, 4, `{"in_features": 8, "out_features": 4, "bias": false, "activation_function": "torch.nn.modules.linear.Identity", "use_residual": false}`)
		if config != "" {
			touch(t, filepath.Join(root, "config_sentence_transformers.json"), config)
		}
		return root
	}
	c, err := ReadChain(pylate(t, `{"query_prefix": "[unused0]", "document_prefix": "[unused1]", "query_length": 24, "document_length": 300,
		"attend_to_expansion_tokens": true, "skiplist_words": ["!"], "prompts": {}, "default_prompt_name": null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := MultiVector{QueryPrefix: "[unused0]", DocumentPrefix: "[unused1]", QueryLength: 24, DocumentLength: 300, QueryExpansion: true, AttendExpansion: true, Skiplist: []string{"!"}}
	if !c.MultiVector() || c.Dims(8) != 4 || c.Check(8) != nil || !strings.HasPrefix(c.String(), "Dense(8->4 identity nobias sha256:") || c.Multi.String() != want.String() {
		t.Errorf("chain %q (multi-vector %v, dims %d), settings %s; want Dense(8->4 …), %s", c.String(), c.MultiVector(), c.Dims(8), c.Multi, want)
	}
	c, err = ReadChain(pylate(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Multi; m.QueryPrefix != "[Q] " || m.DocumentPrefix != "[D] " || m.QueryLength != 32 || m.DocumentLength != 180 || !m.QueryExpansion || m.AttendExpansion || !slices.Equal(m.Skiplist, PyLatePunctuation) {
		t.Errorf("defaults %+v; want PyLate's", m)
	}
	root := pylate(t, "")
	writeDense(t, filepath.Join(root, "1_Dense"), 8, 8, `{"in_features": 8, "out_features": 8, "bias": false, "use_residual": true}`)
	if _, err := ReadChain(root); !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), "use_residual") {
		t.Errorf("residual projection: %v; want ErrModule naming use_residual", err)
	}
	root = t.TempDir()
	touch(t, filepath.Join(root, "modules.json"), "["+stTransformer+","+stPooling+"]")
	touch(t, filepath.Join(root, "1_Pooling", "config.json"), `{"pooling_mode_mean_tokens": true}`)
	if c, err := ReadChain(root); err != nil || c.MultiVector() {
		t.Errorf("a Pooling chain: multi-vector %v, %v; want a plain chain", c.MultiVector(), err)
	}
}
