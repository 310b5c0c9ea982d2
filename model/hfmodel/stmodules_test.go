package hfmodel

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/safetensors"
)

const (
	stTransformer = `{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"}`
	stPooling     = `{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}`
	stDense       = `{"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"}`
	stNormalize   = `{"idx":3,"name":"3","path":"3_Normalize","type":"sentence_transformers.models.Normalize"}`
)

// writeDense writes a Dense module of in → out features into dir.
func writeDense(t *testing.T, dir string, in, out int, config string) {
	t.Helper()
	touch(t, filepath.Join(dir, "config.json"), config)
	err := safetensors.Write(filepath.Join(dir, "model.safetensors"),
		map[string][]float32{"linear.weight": make([]float32, in*out), "linear.bias": make([]float32, out)},
		map[string][]int64{"linear.weight": {int64(out), int64(in)}, "linear.bias": {int64(out)}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadPoolingModes: pooling configs read as sentence-transformers'
// Pooling(**config) reads them.
func TestReadPoolingModes(t *testing.T) {
	tests := []struct {
		json string
		want []string
		err  string
	}{
		{`{"word_embedding_dimension": 384, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}`, []string{"mean"}, ""},
		{`{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}`, []string{"cls"}, ""},
		{`{"pooling_mode_lasttoken": true}`, []string{"mean", "lasttoken"}, ""}, // mean's default is true
		{`{"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true, "pooling_mode_cls_token": true}`, []string{"cls", "max", "mean"}, ""},
		{`{"pooling_mode_mean_sqrt_len_tokens": true, "pooling_mode_mean_tokens": false}`, []string{"mean_sqrt_len_tokens"}, ""},
		{`{"pooling_mode_weightedmean_tokens": true, "pooling_mode_mean_tokens": false}`, []string{"weightedmean"}, ""},
		{`{"pooling_mode": "LastToken", "pooling_mode_mean_tokens": true}`, []string{"lasttoken"}, ""},
		{`{"pooling_mode": "sum"}`, nil, "pooling_mode \"sum\""},
		{`{"pooling_mode_mean_tokens": false}`, nil, "no pooling mode is on"},
		{`{"pooling_mode_median_tokens": true}`, nil, "unknown pooling key pooling_mode_median_tokens"},
		{`{`, nil, "unexpected end"},
	}
	for i, tt := range tests {
		dir := t.TempDir()
		touch(t, filepath.Join(dir, "config.json"), tt.json)
		m, err := readPoolingModule(dir)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("case %d: got %v, %v; want an error mentioning %q", i, m.Modes, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(m.Modes, tt.want) {
			t.Errorf("case %d: got %v, %v; want %v", i, m.Modes, err, tt.want)
		}
	}
}

// TestReadChain: a whole chain is read; every module, activation, weights
// format or config synapse cannot apply is refused naming it.
func TestReadChain(t *testing.T) {
	full := func(t *testing.T) string {
		root := t.TempDir()
		touch(t, filepath.Join(root, "modules.json"), "["+stTransformer+","+stPooling+","+stDense+","+stNormalize+"]")
		touch(t, filepath.Join(root, "1_Pooling", "config.json"), `{"word_embedding_dimension": 8, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false, "include_prompt": false}`)
		writeDense(t, filepath.Join(root, "2_Dense"), 8, 4, `{"in_features": 8, "out_features": 4, "bias": true, "activation_function": "torch.nn.modules.linear.Identity"}`)
		touch(t, filepath.Join(root, "sentence_bert_config.json"), `{"max_seq_length": 256, "do_lower_case": false}`)
		touch(t, filepath.Join(root, "config_sentence_transformers.json"), `{"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "document"}`)
		return root
	}
	root := full(t)
	c, err := ReadChain(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.String(); !strings.HasPrefix(got, "Pooling(cls exclude_prompt) + Dense(8->4 identity bias sha256:") || !strings.HasSuffix(got, ") + Normalize") {
		t.Errorf("chain %q; want Pooling(cls exclude_prompt) + Dense(8->4 identity bias sha256:…) + Normalize", got)
	}
	if c.MaxSeqLength != 256 || c.DefaultPrompt != "document" || c.Prompts["query"] != "query: " || c.Dims(8) != 4 || c.Check(8) != nil {
		t.Errorf("got max_seq_length %d, default prompt %q, prompts %v, dims %d, check %v", c.MaxSeqLength, c.DefaultPrompt, c.Prompts, c.Dims(8), c.Check(8))
	}
	if err := c.Check(16); err == nil || !strings.Contains(err.Error(), "word_embedding_dimension 8") {
		t.Errorf("Check(16): %v; want the width mismatch", err)
	}
	tests := []struct {
		name string
		edit func(root string)
		want string
	}{
		{"unknown module", func(r string) {
			touch(t, filepath.Join(r, "modules.json"), "["+stTransformer+","+stPooling+`,{"idx":2,"path":"2_LayerNorm","type":"sentence_transformers.models.LayerNorm"}]`)
		}, "module 2 is sentence_transformers.models.LayerNorm"},
		{"custom module", func(r string) {
			touch(t, filepath.Join(r, "modules.json"), "["+stTransformer+`,{"idx":1,"path":"x","type":"custom_st.Pooler"}]`)
		}, "module 1 is custom_st.Pooler"},
		{"no Transformer first", func(r string) {
			touch(t, filepath.Join(r, "modules.json"), "["+stPooling+"]")
		}, "first module must be sentence_transformers.models.Transformer"},
		{"Dense before Pooling", func(r string) {
			touch(t, filepath.Join(r, "modules.json"), "["+stTransformer+","+stDense+","+stPooling+"]")
		}, "in that order"},
		{"module path outside", func(r string) {
			touch(t, filepath.Join(r, "modules.json"), "["+stTransformer+`,{"idx":1,"path":"../elsewhere","type":"sentence_transformers.models.Pooling"}]`)
		}, "outside the model directory"},
		{"unknown activation", func(r string) {
			touch(t, filepath.Join(r, "2_Dense", "config.json"), `{"in_features": 8, "out_features": 4, "activation_function": "torch.nn.modules.activation.Softplus"}`)
		}, "activation_function torch.nn.modules.activation.Softplus"},
		{"pytorch weights", func(r string) {
			os.Remove(filepath.Join(r, "2_Dense", "model.safetensors"))
			touch(t, filepath.Join(r, "2_Dense", "pytorch_model.bin"), "pickle")
		}, "2_Dense/pytorch_model.bin: " + ErrModule.Error() + ": Dense: weights in a PyTorch pickle"},
		{"weights of another shape", func(r string) {
			writeDense(t, filepath.Join(r, "2_Dense"), 8, 3, `{"in_features": 8, "out_features": 4}`)
		}, "linear.weight has shape [3 8]; config.json asks for [4 8]"},
		{"no bias tensor", func(r string) {
			safetensors.Write(filepath.Join(r, "2_Dense", "model.safetensors"), map[string][]float32{"linear.weight": make([]float32, 32)},
				map[string][]int64{"linear.weight": {4, 8}})
		}, "no tensor linear.bias"},
		{"do_lower_case", func(r string) {
			touch(t, filepath.Join(r, "sentence_bert_config.json"), `{"max_seq_length": 128, "do_lower_case": true}`)
		}, "do_lower_case true"},
		{"unknown default prompt", func(r string) {
			touch(t, filepath.Join(r, "config_sentence_transformers.json"), `{"prompts": {"query": "q: "}, "default_prompt_name": "passage"}`)
		}, `default_prompt_name "passage"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := full(t)
			tt.edit(root)
			_, err := ReadChain(root)
			if !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want ErrModule mentioning %q", err, tt.want)
			}
		})
	}
}

// TestReadChainBounded: a modules.json or a module's config.json that is
// larger than any configuration (a sparse file in a hostile model
// directory) is refused with readlimit.ErrTooLarge instead of filling
// memory, and one that is a link to a device (/dev/zero) with
// readlimit.ErrNotRegular before it is read.
func TestReadChainBounded(t *testing.T) {
	for _, file := range []string{"modules.json", filepath.Join("1_Pooling", "config.json")} {
		for _, tc := range []struct {
			name string
			want error
			make func(p string) error
		}{
			{"sparse", readlimit.ErrTooLarge, func(p string) error {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					return err
				}
				return os.Truncate(p, readlimit.Config+1)
			}},
			{"device", readlimit.ErrNotRegular, func(p string) error { return os.Symlink("/dev/zero", p) }},
		} {
			t.Run(file+"/"+tc.name, func(t *testing.T) {
				root := t.TempDir()
				touch(t, filepath.Join(root, "modules.json"), "["+stTransformer+","+stPooling+"]")
				touch(t, filepath.Join(root, "1_Pooling", "config.json"), `{"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true}`)
				p := filepath.Join(root, file)
				os.Remove(p)
				if err := tc.make(p); err != nil {
					t.Fatal(err)
				}
				if _, err := ReadChain(root); !errors.Is(err, tc.want) {
					t.Errorf("ReadChain: got %v; want %v", err, tc.want)
				}
				if file == "modules.json" {
					if _, err := (Files{Root: root}).Sidecars(); !errors.Is(err, tc.want) {
						t.Errorf("Sidecars: got %v; want %v", err, tc.want)
					}
				}
			})
		}
	}
}

// TestReadChainSplade: a SparseEncoder directory (MLMTransformer, then
// SpladePooling, as sentence-transformers 5 and 6 name them) reads as a
// chain with Splade set and no modules; its config's strategy and
// activation are read, defaults max and relu; an unknown one, or any
// other module after MLMTransformer, is refused by name.
func TestReadChainSplade(t *testing.T) {
	const (
		mlm5    = `{"idx":0,"name":"0","path":"","type":"sentence_transformers.sparse_encoder.models.MLMTransformer"}`
		splade5 = `{"idx":1,"name":"1","path":"1_SpladePooling","type":"sentence_transformers.sparse_encoder.models.SpladePooling"}`
		mlm6    = `{"idx":0,"name":"0","path":"","type":"sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer"}`
		splade6 = `{"idx":1,"name":"1","path":"1_SpladePooling","type":"sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"}`
	)
	tests := []struct {
		name, modules, config string
		strategy, activation  string
		err                   string
	}{
		{"v5 defaults", "[" + mlm5 + "," + splade5 + "]", "", "max", "relu", ""},
		{"v6 fill-mask Transformer", `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.base.modules.transformer.Transformer"},` + splade6 + "]", "", "max", "relu", ""},
		{"v6 config", "[" + mlm6 + "," + splade6 + "]", `{"pooling_strategy": "max", "activation_function": "relu", "word_embedding_dimension": 30522}`, "max", "relu", ""},
		{"sum", "[" + mlm5 + "," + splade5 + "]", `{"pooling_strategy": "sum"}`, "sum", "relu", ""},
		{"log1p_relu", "[" + mlm5 + "," + splade5 + "]", `{"activation_function": "log1p_relu"}`, "max", "log1p_relu", ""},
		{"unknown strategy", "[" + mlm5 + "," + splade5 + "]", `{"pooling_strategy": "mean"}`, "", "", `pooling_strategy "mean"`},
		{"pooling after MLM", "[" + mlm5 + "," + stPooling + "]", "", "", "", "MLMTransformer then SpladePooling"},
		{"MLM alone", "[" + mlm5 + "]", "", "", "", "MLMTransformer then SpladePooling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			touch(t, filepath.Join(dir, "modules.json"), tt.modules)
			if tt.config != "" {
				touch(t, filepath.Join(dir, "1_SpladePooling", "config.json"), tt.config)
			}
			c, err := ReadChain(dir)
			if tt.err != "" {
				if !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v; want ErrModule saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Splade == nil || c.Splade.Strategy != tt.strategy || c.Splade.Activation != tt.activation || len(c.Modules) != 0 {
				t.Errorf("got Splade %+v, modules %v; want %s/%s and no modules", c.Splade, c.Modules, tt.strategy, tt.activation)
			}
		})
	}
}

// TestReadChainST6: sentence-transformers 6's module names (by file) read
// as the older ones; a Dense after Pooling that reads token_embeddings,
// or writes other features than it reads, is refused; without a
// max_seq_length in sentence_bert_config.json the length is the
// tokenizer's model_max_length (its no-limit sentinel is no length).
func TestReadChainST6(t *testing.T) {
	const (
		tr6   = `{"idx":0,"name":"0","path":"","type":"sentence_transformers.base.modules.transformer.Transformer"}`
		pool6 = `{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.sentence_transformer.modules.pooling.Pooling"}`
		den6  = `{"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.base.modules.dense.Dense"}`
		norm6 = `{"idx":3,"name":"3","path":"3_Normalize","type":"sentence_transformers.base.modules.normalize.Normalize"}`
	)
	write := func(t *testing.T, dense, tokCfg string) string {
		dir := t.TempDir()
		touch(t, filepath.Join(dir, "modules.json"), "["+tr6+","+pool6+","+den6+","+norm6+"]")
		touch(t, filepath.Join(dir, "1_Pooling", "config.json"), `{"embedding_dimension": 4, "pooling_mode": "mean", "include_prompt": true}`)
		writeDense(t, filepath.Join(dir, "2_Dense"), 4, 2, dense)
		touch(t, filepath.Join(dir, "sentence_bert_config.json"), `{"transformer_task": "feature-extraction", "module_output_name": "token_embeddings"}`)
		touch(t, filepath.Join(dir, "tokenizer_config.json"), tokCfg)
		return dir
	}
	c, err := ReadChain(write(t, `{"in_features": 4, "out_features": 2, "bias": true, "activation_function": "torch.nn.modules.linear.Identity",
		"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}`, `{"model_max_length": 128}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.String(); !strings.HasPrefix(got, "Pooling(mean) + Dense(4->2 identity bias") || !strings.HasSuffix(got, " + Normalize") || c.MaxSeqLength != 128 {
		t.Errorf("chain %q, max_seq_length %d; want Pooling(mean) + Dense(4->2 identity …) + Normalize and 128", got, c.MaxSeqLength)
	}
	if c, err = ReadChain(write(t, `{"in_features": 4, "out_features": 2}`, `{"model_max_length": 1000000000000000019884624838656}`)); err != nil || c.MaxSeqLength != 0 {
		t.Errorf("the no-limit sentinel: max_seq_length %d, %v; want 0", c.MaxSeqLength, err)
	}
	for _, cfg := range []string{
		`{"in_features": 4, "out_features": 2, "module_input_name": "token_embeddings", "module_output_name": "token_embeddings"}`,
		`{"in_features": 4, "out_features": 2, "module_input_name": "sentence_embedding", "module_output_name": "dense_embedding"}`,
	} {
		if _, err := ReadChain(write(t, cfg, `{}`)); !errors.Is(err, ErrModule) {
			t.Errorf("Dense %s: got %v; want ErrModule", cfg, err)
		}
	}
}
