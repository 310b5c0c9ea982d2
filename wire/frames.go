package wire

import "fmt"

// The raw frames of protocol v1's messages (framed): token ids after
// EMBED_BATCH, RERANK, RERANK_GROUPS, GENERATE and TOKENS, floats after
// VECTORS and SCORES. An extension's are in its own file (tokens.go,
// sparse.go, multi.go).

func (m *EmbedBatch) rawValues() any           { return &m.IDs }
func (m *EmbedBatch) rawCount() (int64, error) { return itemsCount(m.Items) }

func (m *Rerank) rawValues() any { return &m.IDs }
func (m *Rerank) rawCount() (int64, error) {
	sum, err := addCount(0, m.QueryNTokens)
	if err != nil {
		return 0, fmt.Errorf("query_n_tokens: %w", err)
	}
	for i, c := range m.Candidates {
		if sum, err = addCount(sum, c.NTokens); err != nil {
			return 0, fmt.Errorf("candidates[%d].n_tokens: %w", i, err)
		}
	}
	return sum, nil
}

func (m *RerankGroups) rawValues() any { return &m.IDs }
func (m *RerankGroups) rawCount() (int64, error) {
	var sum int64
	var err error
	for g, grp := range m.Groups {
		if sum, err = addCount(sum, grp.QueryNTokens); err != nil {
			return 0, fmt.Errorf("groups[%d].query_n_tokens: %w", g, err)
		}
		for i, c := range grp.Candidates {
			if sum, err = addCount(sum, c.NTokens); err != nil {
				return 0, fmt.Errorf("groups[%d].candidates[%d].n_tokens: %w", g, i, err)
			}
		}
	}
	return sum, nil
}

// GENERATE's prompt is any number of ids; TOKENS' n; VECTORS' n × dims;
// SCORES' n.
func (m *Generate) rawValues() any           { return &m.IDs }
func (m *Generate) rawCount() (int64, error) { return -1, nil }
func (m *Tokens) rawValues() any             { return &m.IDs }
func (m *Tokens) rawCount() (int64, error)   { return addCount(0, m.N) }
func (m *Vectors) rawValues() any            { return &m.Data }
func (m *Vectors) rawCount() (int64, error)  { return mulCount(m.N, m.Dims) }
func (m *Scores) rawValues() any             { return &m.Data }
func (m *Scores) rawCount() (int64, error)   { return addCount(0, m.N) }
