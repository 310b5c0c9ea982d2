package wire

import (
	"bufio"
	"fmt"
)

// The raw frames of protocol v1's messages (framed): token ids after
// EMBED_BATCH, RERANK, RERANK_GROUPS, GENERATE and TOKENS, floats after
// VECTORS and SCORES. An extension's are in its own file (tokens.go,
// sparse.go, multi.go).

func (m *EmbedBatch) rawCount() (int64, error)      { return itemsCount(m.Items) }
func (m *EmbedBatch) rawLen() int                   { return len(m.IDs) }
func (m *EmbedBatch) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.IDs) }
func (m *EmbedBatch) recvRaw(src rawSource, want int64) (err error) {
	m.IDs, err = readRawFrom[int32](src, want)
	return err
}

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
func (m *Rerank) rawLen() int                   { return len(m.IDs) }
func (m *Rerank) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.IDs) }
func (m *Rerank) recvRaw(src rawSource, want int64) (err error) {
	m.IDs, err = readRawFrom[int32](src, want)
	return err
}

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
func (m *RerankGroups) rawLen() int                   { return len(m.IDs) }
func (m *RerankGroups) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.IDs) }
func (m *RerankGroups) recvRaw(src rawSource, want int64) (err error) {
	m.IDs, err = readRawFrom[int32](src, want)
	return err
}

func (m *Generate) rawCount() (int64, error)      { return -1, nil }
func (m *Generate) rawLen() int                   { return len(m.IDs) }
func (m *Generate) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.IDs) }
func (m *Generate) recvRaw(src rawSource, want int64) (err error) {
	m.IDs, err = readRawFrom[int32](src, want)
	return err
}

func (m *Tokens) rawCount() (int64, error)      { return addCount(0, m.N) }
func (m *Tokens) rawLen() int                   { return len(m.IDs) }
func (m *Tokens) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.IDs) }
func (m *Tokens) recvRaw(src rawSource, want int64) (err error) {
	m.IDs, err = readRawFrom[int32](src, want)
	return err
}

func (m *Vectors) rawCount() (int64, error)      { return mulCount(m.N, m.Dims) }
func (m *Vectors) rawLen() int                   { return len(m.Data) }
func (m *Vectors) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.Data) }
func (m *Vectors) recvRaw(src rawSource, want int64) (err error) {
	m.Data, err = readRawFrom[float32](src, want)
	return err
}

func (m *Scores) rawCount() (int64, error)      { return addCount(0, m.N) }
func (m *Scores) rawLen() int                   { return len(m.Data) }
func (m *Scores) sendRaw(w *bufio.Writer) error { return writeRaw(w, m.Data) }
func (m *Scores) recvRaw(src rawSource, want int64) (err error) {
	m.Data, err = readRawFrom[float32](src, want)
	return err
}
