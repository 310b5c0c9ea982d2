package pipeline

import (
	"slices"
)

// Batch is a set of chunks sent to one worker in one request.
type Batch struct {
	Chunks []Chunk
	Tokens int // total ids over all chunks
}

// Packer groups chunks of similar length into batches of at most Budget
// tokens. It holds up to Window chunks at a time (the grouping window and
// the memory bound); a chunk longer than Budget travels alone.
type Packer struct {
	Budget int
	Window int
	held   []Chunk
	tokens int
}

// Add takes a chunk and returns the batches that became ready.
func (p *Packer) Add(c Chunk) []Batch {
	p.held = append(p.held, c)
	p.tokens += len(c.IDs)
	// Hold at most Window chunks and at most eight batches' worth of tokens.
	if len(p.held) < max(p.Window, 1) && p.tokens < 8*p.Budget {
		return nil
	}
	return p.Flush()
}

// Held is how many chunks the packer holds.
func (p *Packer) Held() int { return len(p.held) }

// Flush packs every held chunk into batches.
func (p *Packer) Flush() []Batch {
	if len(p.held) == 0 {
		return nil
	}
	held := p.held
	p.held, p.tokens = nil, 0
	// Similar lengths together: fewer wasted positions in the engine's
	// ubatches. Stable on (length, doc, chunk) so output is deterministic.
	slices.SortStableFunc(held, func(a, b Chunk) int { return len(a.IDs) - len(b.IDs) })
	var out []Batch
	var cur Batch
	for _, c := range held {
		if cur.Tokens > 0 && cur.Tokens+len(c.IDs) > p.Budget {
			out = append(out, cur)
			cur = Batch{}
		}
		cur.Chunks = append(cur.Chunks, c)
		cur.Tokens += len(c.IDs)
	}
	return append(out, cur)
}
