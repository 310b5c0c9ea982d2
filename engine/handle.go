package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/synapse-embed/synapse/wire"
)

// handle runs one request on the engine and returns its answer: the
// response message, or ERR carrying the engine's error code. Only a message
// that is not a request at all returns an error.
func (s *server) handle(ctx context.Context, msg wire.Message) (wire.Message, error) {
	var (
		resp wire.Message
		err  error
		id   uint64
	)
	switch m := msg.(type) {
	case *wire.Load:
		id = m.ReqID
		resp, err = s.load(ctx, m)
	case *wire.EmbedBatch:
		id = m.ReqID
		resp, err = s.embed(ctx, m)
	case *wire.Rerank:
		id = m.ReqID
		g := wire.RerankGroup{QueryNTokens: m.QueryNTokens, Candidates: m.Candidates}
		resp, err = s.rerank(ctx, id, m.ModelRef, []wire.RerankGroup{g}, m.IDs)
	case *wire.RerankGroups:
		id = m.ReqID
		if s.opts.Chaos.OldWorker {
			return oldWorker(id, msg.Type()), nil
		}
		resp, err = s.rerank(ctx, id, m.ModelRef, m.Groups, m.IDs)
	case *wire.Generate:
		id = m.ReqID
		var g Generation
		opt := GenerateOptions{MaxTokens: m.MaxTokens, Grammar: m.Grammar, Temperature: m.Temperature, Seed: m.Seed}
		if g, err = s.eng.Generate(ctx, m.ModelRef, m.IDs, opt); err == nil {
			resp = &wire.Text{ReqID: id, Text: g.Text, NPrompt: g.NPrompt, NGen: g.NGen, FinishReason: g.FinishReason}
		}
	case *wire.Tokenize:
		id = m.ReqID
		var ids []int32
		if ids, err = s.eng.Tokenize(ctx, m.ModelRef, m.Text, m.AddSpecial, m.ParseSpecial); err == nil {
			resp = &wire.Tokens{ReqID: id, N: len(ids), IDs: ids}
		}
	case *wire.Unload:
		id = m.ReqID
		if err = s.eng.Unload(ctx, m.ModelRef); err == nil {
			resp = &wire.Unloaded{ReqID: id}
		}
	case *wire.Quantize:
		id = m.ReqID
		resp, err = s.quantize(ctx, m)
	case *wire.Ping:
		st := s.eng.Stats()
		resp = &wire.Pong{ReqID: m.ReqID, RSSMB: st.RSSMB, ModelsLoaded: st.ModelsLoaded}
	default:
		h, ok := extensions[msg.Type()]
		r, isReq := msg.(wire.Request)
		if !ok || !isReq {
			return nil, fmt.Errorf("engine: serve: %w", &wire.ProtocolError{Msg: fmt.Sprintf("%s is not a request", msg.Type())})
		}
		if id = r.RequestID(); s.opts.Chaos.OldWorker {
			return oldWorker(id, msg.Type()), nil
		}
		resp, err = h(s, ctx, msg)
	}
	if err != nil {
		s.opts.Log.Info("request failed", "type", msg.Type(), "req_id", id, "code", wire.CodeOf(err), "err", err)
		return errMessage(id, err), nil
	}
	return resp, nil
}

// extension answers an extension's request (its file registers it with
// handleExtension).
type extension func(s *server, ctx context.Context, m wire.Message) (wire.Message, error)

// extensions are the requests of extensions, by type.
var extensions = map[wire.MsgType]extension{}

// handleExtension registers the handler of an extension's request type,
// from its file's init.
func handleExtension(t wire.MsgType, h extension) {
	if _, dup := extensions[t]; dup {
		panic("engine: request type " + string(t) + " handled twice")
	}
	extensions[t] = h
}

// oldWorker is the old-worker drill's answer to an extension's request:
// the type is unknown, as to a worker built before it.
func oldWorker(id uint64, t wire.MsgType) *wire.Err {
	return &wire.Err{ReqID: id, Code: wire.CodeUnknownType, Msg: fmt.Sprintf("unknown message type %q (old-worker drill)", t)}
}

// errMessage turns an engine error into ERR.
func errMessage(id uint64, err error) *wire.Err {
	msg := err.Error()
	var we *wire.Error
	if errors.As(err, &we) {
		msg = we.Msg
	}
	return &wire.Err{ReqID: id, Code: wire.CodeOf(err), Msg: msg}
}

func (s *server) load(ctx context.Context, m *wire.Load) (wire.Message, error) {
	info, err := s.eng.Load(ctx, LoadRequest{Path: m.ArtifactPath, Digest: m.ArtifactDigest, Format: m.Format, Config: m.RuntimeConfig})
	if err != nil {
		return nil, err
	}
	s.opts.Log.Info("model loaded", "model_ref", info.Ref, "dims", info.Dims, "cold_load_ms", info.ColdLoad.Milliseconds())
	return &wire.Loaded{ReqID: m.ReqID, ModelRef: info.Ref, Dims: info.Dims, ColdLoadMS: info.ColdLoad.Milliseconds()}, nil
}

func (s *server) embed(ctx context.Context, m *wire.EmbedBatch) (wire.Message, error) {
	total := 0
	for _, it := range m.Items {
		total += it.NTokens
	}
	if total != len(m.IDs) {
		return nil, wire.Errorf(wire.CodeBadRequest, "items announce %d ids; the raw frame holds %d", total, len(m.IDs))
	}
	seqs := make([][]int32, len(m.Items))
	var from []int
	off := 0
	for i, it := range m.Items {
		seqs[i] = m.IDs[off : off+it.NTokens : off+it.NTokens]
		off += it.NTokens
		if it.PoolFrom != 0 {
			if it.PoolFrom < 0 || it.PoolFrom > it.NTokens {
				return nil, wire.Errorf(wire.CodeBadRequest, "item %d: pool_from %d outside its %d tokens", i, it.PoolFrom, it.NTokens)
			}
			if from == nil {
				from = make([]int, len(m.Items))
			}
			from[i] = it.PoolFrom
		}
	}
	vecs, dims, err := s.embedFrom(ctx, m, seqs, from)
	if err != nil {
		return nil, err
	}
	return &wire.Vectors{ReqID: m.ReqID, Dims: dims, N: len(seqs), Data: vecs}, nil
}

// embedFrom embeds seqs, leaving out the from[i] first tokens of each
// from its pooling when from is not nil.
func (s *server) embedFrom(ctx context.Context, m *wire.EmbedBatch, seqs [][]int32, from []int) ([]float32, int, error) {
	if from == nil {
		return s.eng.Embed(ctx, m.ModelRef, m.Pooling, m.Normalize, seqs)
	}
	pe, ok := s.eng.(PromptEmbedder)
	if !ok {
		return nil, 0, wire.Errorf(wire.CodeUnsupported, "pool_from: this engine pools every token")
	}
	return pe.EmbedPoolFrom(ctx, m.ModelRef, m.Pooling, m.Normalize, seqs, from)
}

// rerank splits ids into the groups' queries and candidates and scores them.
func (s *server) rerank(ctx context.Context, id uint64, ref string, groups []wire.RerankGroup, ids []int32) (wire.Message, error) {
	total := 0
	for _, g := range groups {
		total += g.QueryNTokens
		for _, c := range g.Candidates {
			total += c.NTokens
		}
	}
	if total != len(ids) {
		return nil, wire.Errorf(wire.CodeBadRequest, "queries and candidates announce %d ids; the raw frame holds %d", total, len(ids))
	}
	take := func(n int) []int32 {
		part := ids[:n:n]
		ids = ids[n:]
		return part
	}
	gs := make([]RerankGroup, len(groups))
	for i, g := range groups {
		gs[i].Query = take(g.QueryNTokens)
		gs[i].Candidates = make([][]int32, len(g.Candidates))
		for j, c := range g.Candidates {
			gs[i].Candidates[j] = take(c.NTokens)
		}
	}
	scores, err := s.eng.Rerank(ctx, ref, gs)
	if err != nil {
		return nil, err
	}
	return &wire.Scores{ReqID: id, N: len(scores), Data: scores}, nil
}

func (s *server) quantize(ctx context.Context, m *wire.Quantize) (wire.Message, error) {
	q, ok := s.eng.(Quantizer)
	if !ok {
		return nil, wire.Errorf(wire.CodeUnsupported, "engine %s cannot quantize models", s.eng.Info().Name)
	}
	res, err := q.Quantize(ctx, QuantizeRequest{Path: m.ArtifactPath, Digest: m.ArtifactDigest, OutPath: m.OutPath, FType: m.FType, Threads: m.Threads, Format: m.Format})
	if err != nil {
		return nil, err
	}
	s.opts.Log.Info("model quantized", "ftype", m.FType, "out_digest", res.Digest, "out_size", res.Size, "ms", res.Took.Milliseconds())
	return &wire.Quantized{ReqID: m.ReqID, OutDigest: res.Digest, OutSize: res.Size, MS: res.Took.Milliseconds()}, nil
}
