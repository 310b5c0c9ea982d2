package convert

import (
	"fmt"
	"math"

	"github.com/synapse-embed/synapse/io/readlimit"
	"github.com/synapse-embed/synapse/model/onnx"
)

// MPNet is BERT's encoder with other names (attention.attn.q/k/v/o,
// attention.LayerNorm), no token type embeddings, RoBERTa's positions
// (past padding_idx 1), and a relative position bias: one table of
// relative_attention_num_buckets × heads, shared by the layers, indexed by
// the T5-style bucket of each key's position less the query's, added to
// every layer's attention scores. The converter reads it as BERT (its
// tensors found by their BERT names: mpnetName) and adds the bias to the
// mask bias the layers take.

// mpnetConfig is what config.json adds for MPNet.
type mpnetConfig struct {
	Buckets int `json:"relative_attention_num_buckets"`
}

// mpnetMaxDistance is transformers' max_distance of MPNet's buckets.
const mpnetMaxDistance = 128

// readMPNet reads MPNet's bucket count (32 when absent, as transformers'
// default); the padding id of its positions is 1, whatever pad_token_id
// says, as in transformers' MPNetEmbeddings.
func (s *Source) readMPNet(cfgPath string, b []byte) error {
	m := mpnetConfig{Buckets: 32}
	if err := readlimit.UnmarshalJSON(b, &m); err != nil {
		return fmt.Errorf("convert: %s: %w: %v", cfgPath, ErrRefused, err)
	}
	if m.Buckets < 2 || m.Buckets%2 != 0 {
		return fmt.Errorf("convert: %s: %w: relative_attention_num_buckets %d: want an even count of at least 2", cfgPath, ErrRefused, m.Buckets)
	}
	one := 1
	s.Config.PadTokenID, s.Config.TypeVocabSize, s.mpnetBuckets = &one, 2, m.Buckets
	return nil
}

// mpnetLayer maps the BERT names of a layer's attention to MPNet's.
var mpnetLayer = []layerName{
	{"attention.self.query.", "attention.attn.q."}, {"attention.self.key.", "attention.attn.k."},
	{"attention.self.value.", "attention.attn.v."}, {"attention.output.dense.", "attention.attn.o."},
	{"attention.output.LayerNorm.", "attention.LayerNorm."},
}

// mpnetName is the MPNet name of the tensor BERT calls name, or zero for
// the token type embeddings MPNet does not have.
func mpnetName(name string) (string, bool) { return renameLayer(name, "encoder.layer.", mpnetLayer) }

// mpnetBucket is transformers' MPNetEncoder.relative_position_bucket of
// one relative position (a key's position less the query's), computed as
// torch computes it in float32.
func mpnetBucket(rel, buckets int) int64 {
	n := -rel
	half := buckets / 2
	ret := 0
	if n < 0 {
		ret = half
		n = -n
	}
	exact := half / 2
	if n < exact {
		return int64(ret + n)
	}
	x := float32(n) / float32(exact)
	l := float32(math.Log(float64(x)))
	v := l / float32(math.Log(float64(mpnetMaxDistance)/float64(exact))) * float32(half-exact)
	return int64(ret + min(exact+int(v), half-1))
}

// positionBias adds MPNet's relative position bias [1, heads, seq, seq]:
// the bucket of every key position less query position, looked up in
// encoder.relative_attention_bias.
func (e *encoder) positionBias() (string, error) {
	c := e.s.Config
	heads, buckets := int64(c.Heads), e.s.mpnetBuckets
	table, err := e.w.tensor("encoder.relative_attention_bias.weight", int64(buckets), heads)
	if err != nil {
		return "", err
	}
	p := c.MaxPositionEmbeddings // no sequence is longer
	idx := make([]int64, 2*p-1)  // rel -(p-1) … p-1
	for i := range idx {
		idx[i] = mpnetBucket(i-(p-1), buckets)
	}
	at := e.node("rel.index", "Add", []string{e.relPositions(), e.constant(onnx.Tensor{Name: "c.rel_offset", Ints: []int64{int64(p - 1)}})})
	bucket := e.node("rel.bucket", "Gather", []string{e.constant(onnx.Tensor{Name: "rel.buckets", Dims: []int64{int64(len(idx))}, Ints: idx}), at},
		onnx.IntAttr("axis", 0))
	vals := e.node("rel.values", "Gather", []string{e.weight("encoder.relative_attention_bias.weight", table, int64(buckets), heads), bucket},
		onnx.IntAttr("axis", 0))
	t := e.node("rel.t", "Transpose", []string{vals}, onnx.Attr{Name: "perm", Ints: []int64{2, 0, 1}})
	return e.node("rel.bias", "Unsqueeze", []string{t, e.ints("c.axis0", 0)}), nil
}

// relPositions adds the relative positions [seq, seq] of the input: each
// key's position less each query's (int64). A graph calls it once.
func (e *encoder) relPositions() string {
	seq := e.node("rel.seq", "Squeeze", []string{e.node("rel.seq1", "Slice", []string{e.node("rel.shape", "Shape", []string{"input_ids"}),
		e.ints("c.1", 1), e.ints("c.2", 2)}), e.ints("c.axis0", 0)})
	zero := e.constant(onnx.Tensor{Name: "c.i0", Ints: []int64{0}})
	one := e.constant(onnx.Tensor{Name: "c.i1", Ints: []int64{1}})
	pos := e.node("rel.pos", "Range", []string{zero, seq, one})
	return e.node("rel.rel", "Sub", []string{e.node("rel.keys", "Unsqueeze", []string{pos, e.ints("c.axis0", 0)}),
		e.node("rel.queries", "Unsqueeze", []string{pos, e.ints("c.axis1", 1)})})
}
