package job

import (
	"fmt"

	"github.com/synapse-embed/synapse/model/tokenize"
)

// Chunking cuts a document's tokens into windows and wraps each window in the
// model's special tokens.
type Chunking struct {
	// Window is the number of content tokens per chunk (special tokens excluded).
	Window int
	// Overlap is how many tokens consecutive windows share; 0 ≤ Overlap < Window.
	Overlap int
	// Prefix and Suffix are the special tokens added around every chunk
	// ([CLS] … [SEP] for BERT, BOS … EOS for models that add them).
	Prefix, Suffix []int32
	// PoolFrom is how many leading tokens of a document's first chunk its
	// pooling leaves out (the prompt, for a sentence-transformers Pooling
	// module with include_prompt false); 0 for none.
	PoolFrom int
	// Truncate keeps a document's first window only, as sentence-transformers
	// and TEI truncate at max_seq_length: one chunk a document.
	Truncate bool
}

// Validate reports a chunking that cannot make progress.
func (c Chunking) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("chunk window %d must be positive", c.Window)
	case c.Overlap < 0 || c.Overlap >= c.Window:
		return fmt.Errorf("overlap %d must be at least 0 and below the chunk window %d", c.Overlap, c.Window)
	}
	return nil
}

// Chunk is one window of a document, ready to embed.
type Chunk struct {
	Index int32 // chunk number within the document, 0-based
	// TokenStart and TokenEnd delimit the window in the document's token list
	// (special tokens excluded); ByteStart and ByteEnd are byte offsets into
	// the document's text.
	TokenStart, TokenEnd int32
	ByteStart, ByteEnd   int32
	IDs                  []int32 // prefix + window + suffix
	PoolFrom             int     // leading IDs the pooling leaves out (Chunking.PoolFrom, first chunk only)
	// Cut: with Chunking.Truncate, the document has tokens past this chunk,
	// not embedded (set by the embedding kind, for its summary).
	Cut bool
}

// Cut splits a document's tokens into chunks (with Truncate, the first
// only). A document with no tokens yields one chunk holding only the
// special tokens, so that every document has a vector (callers that skip
// empty documents do so before cutting).
func (c Chunking) Cut(toks []tokenize.Token) []Chunk {
	step := c.Window - c.Overlap
	var out []Chunk
	for start := 0; ; start += step {
		end := min(start+c.Window, len(toks))
		ch := Chunk{Index: int32(len(out)), TokenStart: int32(start), TokenEnd: int32(end)}
		if end > start {
			ch.ByteStart, ch.ByteEnd = toks[start].Start, toks[end-1].End
		}
		ch.IDs = make([]int32, 0, len(c.Prefix)+end-start+len(c.Suffix))
		ch.IDs = append(ch.IDs, c.Prefix...)
		for _, t := range toks[start:end] {
			ch.IDs = append(ch.IDs, t.ID)
		}
		ch.IDs = append(ch.IDs, c.Suffix...)
		if start == 0 {
			ch.PoolFrom = min(c.PoolFrom, len(ch.IDs))
		}
		out = append(out, ch)
		if end >= len(toks) || c.Truncate {
			return out
		}
	}
}
