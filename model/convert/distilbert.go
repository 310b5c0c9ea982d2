package convert

import (
	"fmt"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// DistilBERT is BERT's encoder with other names: config.json's dim,
// n_layers, n_heads, hidden_dim and activation, no token type embeddings,
// and per layer q_lin/k_lin/v_lin/out_lin, sa_layer_norm, ffn.lin1/lin2
// and output_layer_norm. The converter reads it as BERT: its config is
// translated, its tensors found by their BERT names (distilName), and the
// token type table it lacks is zeros, which add nothing.

// distilConfig is what config.json says of a DistilBERT encoder.
type distilConfig struct {
	Dim        int    `json:"dim"`
	Layers     int    `json:"n_layers"`
	Heads      int    `json:"n_heads"`
	HiddenDim  int    `json:"hidden_dim"`
	Activation string `json:"activation"`
	Sinusoidal bool   `json:"sinusoidal_pos_embds"`
}

// readDistil fills the BERT settings from a DistilBERT config.json (its
// bytes b); sinusoidal position embeddings are refused (the checkpoints
// hold learned ones, as every sentence-transformers DistilBERT does).
func (s *Source) readDistil(cfgPath string, b []byte) error {
	var d distilConfig
	if err := readlimit.UnmarshalJSON(b, &d); err != nil {
		return fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	if d.Sinusoidal {
		return fmt.Errorf("convert: %s: %w: sinusoidal_pos_embds true; synapse converts learned position embeddings", cfgPath, ErrRefused)
	}
	c := &s.Config
	c.HiddenSize, c.Layers, c.Heads, c.Intermediate, c.HiddenAct = d.Dim, d.Layers, d.Heads, d.HiddenDim, d.Activation
	c.TypeVocabSize = 2 // zeros: DistilBERT has none
	return nil
}

// distilLayer maps the BERT names of a layer's modules to DistilBERT's.
var distilLayer = []layerName{
	{"attention.self.query.", "attention.q_lin."}, {"attention.self.key.", "attention.k_lin."},
	{"attention.self.value.", "attention.v_lin."}, {"attention.output.dense.", "attention.out_lin."},
	{"attention.output.LayerNorm.", "sa_layer_norm."}, {"intermediate.dense.", "ffn.lin1."},
	{"output.dense.", "ffn.lin2."}, {"output.LayerNorm.", "output_layer_norm."},
}

// distilName is the DistilBERT name of the tensor BERT calls name, or zero
// for the token type embeddings DistilBERT does not have.
func distilName(name string) (string, bool) {
	return renameLayer(name, "transformer.layer.", distilLayer)
}

// layerName is a layer module's BERT name prefix and another architecture's.
type layerName struct{ bert, other string }

// renameLayer maps the BERT name of a tensor to an architecture that
// spells its layers' modules by names (under layers, not encoder.layer.)
// and has no token type embeddings (zero: read as zeros).
func renameLayer(name, layers string, names []layerName) (string, bool) {
	if name == "embeddings.token_type_embeddings.weight" {
		return "", true
	}
	rest, ok := strings.CutPrefix(name, "encoder.layer.")
	if !ok {
		return name, false
	}
	n, tail, _ := strings.Cut(rest, ".")
	for _, m := range names {
		if t, ok := strings.CutPrefix(tail, m.bert); ok {
			return layers + n + "." + m.other + t, false
		}
	}
	return name, false
}
