// Package modelgen writes small GGUF models with deterministic random weights
// (BERT embedders and rerankers, llama decoders) that llama.cpp loads and
// runs, for tests, benchmarks and the demo.
//
// Tensor names, shapes, types and metadata keys mirror the reference models in
// the shared fixtures (models/ref-bert-embed.gguf, ref-bert-rerank.gguf,
// llama-2-tiny-random.gguf). Matrices and embeddings are normal(0, 0.02)
// (a bounded approximation), layer-norm weights 1 and biases 0, so that
// activations stay finite. The same configuration and seed give the same bytes.
package modelgen

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/synapse-embed/synapse/model/gguf"
)

// ErrConfig reports a model configuration that cannot be generated.
var ErrConfig = errors.New("modelgen: invalid configuration")

// WeightScale is the standard deviation of generated weights.
const WeightScale = 0.02

// Pooling is llama.cpp's pooling type, stored as <arch>.pooling_type.
type Pooling uint32

// Pooling types, numbered as llama.cpp's enum llama_pooling_type.
const (
	PoolingNone Pooling = 0
	PoolingMean Pooling = 1
	PoolingCLS  Pooling = 2
	PoolingLast Pooling = 3
	PoolingRank Pooling = 4
)

func (p Pooling) String() string {
	switch p {
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	case PoolingRank:
		return "rank"
	}
	return fmt.Sprintf("pooling(%d)", uint32(p))
}

// fileType is general.file_type (llama_ftype) for the type of the weight matrices.
func fileType(t gguf.GGMLType) (uint32, error) {
	switch t {
	case gguf.GGMLTypeF32:
		return 0, nil
	case gguf.GGMLTypeF16:
		return 1, nil
	case gguf.GGMLTypeQ8_0:
		return 7, nil
	}
	return 0, fmt.Errorf("%w: weight type %v (want F32, F16 or Q8_0)", ErrConfig, t)
}

// fill says how a tensor's values are generated.
type fill int

const (
	initNormal fill = iota // normal(0, WeightScale)
	initOnes
	initZeros
)

// spec is one tensor of a model before its values exist.
type spec struct {
	name string
	typ  gguf.GGMLType
	dims []uint64
	init fill
}

// addTensors adds specs to w, each filled from its own stream seeded by seed
// and its name, so a tensor's values do not depend on the others.
func addTensors(w *gguf.Writer, seed uint64, specs []spec) error {
	return addTensorsWith(w, seed, specs, nil)
}

// addTensorsWith is addTensors with the tensors named in fill taking their
// values from it.
func addTensorsWith(w *gguf.Writer, seed uint64, specs []spec, fill map[string]func(int, []float32)) error {
	for _, s := range specs {
		t := gguf.Tensor{Name: s.name, Type: s.typ, Dims: s.dims}
		switch f, ok := fill[s.name]; {
		case ok:
			t.Fill = f
		case s.init == initNormal:
			r := newRNG(seed, s.name)
			t.Fill = func(_ int, dst []float32) { r.normals(dst, WeightScale) }
		case s.init == initOnes:
			t.Fill = func(_ int, dst []float32) {
				for i := range dst {
					dst[i] = 1
				}
			}
		case s.init == initZeros:
			t.Fill = func(_ int, dst []float32) { clear(dst) }
		}
		if err := w.AddTensor(t); err != nil {
			return fmt.Errorf("modelgen: %w", err)
		}
	}
	return nil
}

// hasSpec reports whether specs holds a tensor called name.
func hasSpec(specs []spec, name string) bool {
	for _, s := range specs {
		if s.name == name {
			return true
		}
	}
	return false
}

// rng is splitmix64: fast, tiny state, and the same stream on every platform.
type rng struct{ s uint64 }

func newRNG(seed uint64, name string) *rng {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &rng{s: seed ^ h.Sum64()}
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// irwinHallScale maps the sum of four 16-bit uniforms to unit variance.
const irwinHallScale = 1.7320508075688772 / 65536 // sqrt(3) / 2^16

// normals fills dst with approximately normal(0, sd) values: the centred sum
// of four uniforms (Irwin–Hall), bounded at ±3.46 sd, one 64-bit draw each.
func (r *rng) normals(dst []float32, sd float32) {
	k := sd * irwinHallScale
	for i := range dst {
		x := r.next()
		sum := int64(x&0xffff) + int64(x>>16&0xffff) + int64(x>>32&0xffff) + int64(x>>48)
		dst[i] = float32(sum-2*65535) * k
	}
}
