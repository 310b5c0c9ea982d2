package engine

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/synapse-embed/synapse/wire"
)

func (e *Static) model(ref string) (*staticModel, error) {
	m, ok := e.models[ref]
	if !ok {
		return nil, wire.Errorf(wire.CodeModelNotLoaded, "model %q is not loaded", ref)
	}
	return m, nil
}

// Embed returns each sequence's mean of token rows, normalized when asked.
func (e *Static) Embed(_ context.Context, ref, pooling string, normalize bool, seqs [][]int32) ([]float32, int, error) {
	m, err := e.model(ref)
	if err != nil {
		return nil, 0, err
	}
	if pooling != PoolingDefault && pooling != PoolingMean {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "pooling %q: a static model's vector is the mean of its tokens' rows (\"\" or mean)", pooling)
	}
	out := make([]float32, len(seqs)*m.dims)
	acc := make([]float64, m.dims)
	for i, seq := range seqs {
		if err := m.mean(seq, acc); err != nil {
			return nil, 0, wire.Errorf(wire.CodeBadRequest, "sequence %d: %w", i, err)
		}
		v := out[i*m.dims : (i+1)*m.dims]
		var norm float64
		for d, x := range acc {
			v[d] = float32(x)
			norm += x * x
		}
		if normalize && norm > 0 {
			inv := 1 / math.Sqrt(norm)
			for d, x := range acc {
				v[d] = float32(x * inv)
			}
		}
	}
	return out, m.dims, nil
}

// mean sets acc to the (weighted) mean of seq's rows; zero for no tokens.
func (m *staticModel) mean(seq []int32, acc []float64) error {
	clear(acc)
	vocab := m.rows
	if m.mapping != nil {
		vocab = len(m.mapping)
	}
	for _, id := range seq {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("token id %d outside the vocabulary [0,%d)", id, vocab)
		}
		w := 1.0
		if m.weights != nil {
			if int(id) >= len(m.weights) {
				return fmt.Errorf("token id %d has no weight (%d weights)", id, len(m.weights))
			}
			w = float64(m.weights[id])
		}
		row := int(id)
		if m.mapping != nil {
			row = int(m.mapping[id])
		}
		m.addRow(acc, row, w)
	}
	if len(seq) > 0 {
		inv := 1 / float64(len(seq))
		for d := range acc {
			acc[d] *= inv
		}
	}
	return nil
}

func (m *staticModel) addRow(acc []float64, row int, w float64) {
	off := row * m.dims
	if m.i8 != nil {
		for d, x := range m.i8[off : off+m.dims] {
			acc[d] += w * float64(x)
		}
		return
	}
	for d, x := range m.f32[off : off+m.dims] {
		acc[d] += w * float64(x)
	}
}

// Rerank is unsupported: a static model embeds.
func (e *Static) Rerank(_ context.Context, ref string, _ []RerankGroup) ([]float32, error) {
	if _, err := e.model(ref); err != nil {
		return nil, err
	}
	return nil, wire.Errorf(wire.CodeUnsupported, "model %s is a static embedding model; it does not rerank", ref)
}

// Generate is unsupported: a static model embeds.
func (e *Static) Generate(_ context.Context, ref string, _ []int32, _ GenerateOptions) (Generation, error) {
	if _, err := e.model(ref); err != nil {
		return Generation{}, err
	}
	return Generation{}, wire.Errorf(wire.CodeUnsupported, "model %s is a static embedding model; it does not generate", ref)
}

// Tokenize is unsupported: the module tokenizes static models from their
// tokenizer.json.
func (e *Static) Tokenize(_ context.Context, ref, _ string, _, _ bool) ([]int32, error) {
	if _, err := e.model(ref); err != nil {
		return nil, err
	}
	return nil, wire.Errorf(wire.CodeUnsupported, "the static engine has no tokenizer: the module tokenizes static models from tokenizer.json (model %s)", ref)
}

// Unload frees a model.
func (e *Static) Unload(_ context.Context, ref string) error {
	if _, err := e.model(ref); err != nil {
		return err
	}
	delete(e.models, ref)
	return nil
}

// Stats reports the process RSS and the loaded models.
func (e *Static) Stats() Stats {
	refs := make([]string, 0, len(e.models))
	for r := range e.models {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	return Stats{RSSMB: RSSMB(), ModelsLoaded: refs}
}

// Close frees every model.
func (e *Static) Close() error {
	clear(e.models)
	return nil
}
