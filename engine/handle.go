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
		resp, err = s.rerank(ctx, m)
	case *wire.Generate:
		id = m.ReqID
		var g Generation
		if g, err = s.eng.Generate(ctx, m.ModelRef, m.IDs, m.MaxTokens, m.Grammar); err == nil {
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
		return nil, fmt.Errorf("engine: serve: %w", &wire.ProtocolError{Msg: fmt.Sprintf("%s is not a request", msg.Type())})
	}
	if err != nil {
		s.opts.Log.Info("request failed", "type", msg.Type(), "req_id", id, "code", wire.CodeOf(err), "err", err)
		return errMessage(id, err), nil
	}
	return resp, nil
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
	off := 0
	for i, it := range m.Items {
		seqs[i] = m.IDs[off : off+it.NTokens : off+it.NTokens]
		off += it.NTokens
	}
	vecs, dims, err := s.eng.Embed(ctx, m.ModelRef, m.Pooling, m.Normalize, seqs)
	if err != nil {
		return nil, err
	}
	return &wire.Vectors{ReqID: m.ReqID, Dims: dims, N: len(seqs), Data: vecs}, nil
}

func (s *server) rerank(ctx context.Context, m *wire.Rerank) (wire.Message, error) {
	total := m.QueryNTokens
	for _, c := range m.Candidates {
		total += c.NTokens
	}
	if total != len(m.IDs) {
		return nil, wire.Errorf(wire.CodeBadRequest, "query and candidates announce %d ids; the raw frame holds %d", total, len(m.IDs))
	}
	query := m.IDs[:m.QueryNTokens:m.QueryNTokens]
	cands := make([][]int32, len(m.Candidates))
	off := m.QueryNTokens
	for i, c := range m.Candidates {
		cands[i] = m.IDs[off : off+c.NTokens : off+c.NTokens]
		off += c.NTokens
	}
	scores, err := s.eng.Rerank(ctx, m.ModelRef, query, cands)
	if err != nil {
		return nil, err
	}
	return &wire.Scores{ReqID: m.ReqID, N: len(scores), Data: scores}, nil
}

func (s *server) quantize(ctx context.Context, m *wire.Quantize) (wire.Message, error) {
	q, ok := s.eng.(Quantizer)
	if !ok {
		return nil, wire.Errorf(wire.CodeUnsupported, "engine %s cannot quantize models", s.eng.Info().Name)
	}
	res, err := q.Quantize(ctx, QuantizeRequest{Path: m.ArtifactPath, Digest: m.ArtifactDigest, OutPath: m.OutPath, FType: m.FType, Threads: m.Threads})
	if err != nil {
		return nil, err
	}
	s.opts.Log.Info("model quantized", "ftype", m.FType, "out_digest", res.Digest, "out_size", res.Size, "ms", res.Took.Milliseconds())
	return &wire.Quantized{ReqID: m.ReqID, OutDigest: res.Digest, OutSize: res.Size, MS: res.Took.Milliseconds()}, nil
}
