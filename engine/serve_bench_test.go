package engine

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/synapse-embed/synapse/wire"
)

// echoEngine answers Embed with zero vectors of a fixed width and no
// compute, to isolate what the protocol itself costs per batch.
type echoEngine struct{ dims int }

func (e echoEngine) Load(context.Context, LoadRequest) (ModelInfo, error) { return ModelInfo{}, nil }
func (e echoEngine) Embed(_ context.Context, _, _ string, _ bool, seqs [][]int32) ([]float32, int, error) {
	return make([]float32, len(seqs)*e.dims), e.dims, nil
}
func (e echoEngine) Rerank(context.Context, string, []RerankGroup) ([]float32, error) {
	return nil, nil
}
func (e echoEngine) Generate(context.Context, string, []int32, GenerateOptions) (Generation, error) {
	return Generation{}, nil
}
func (e echoEngine) Tokenize(context.Context, string, string, bool, bool) ([]int32, error) {
	return nil, nil
}
func (e echoEngine) Unload(context.Context, string) error { return nil }
func (e echoEngine) Stats() Stats                         { return Stats{} }
func (e echoEngine) Info() wire.EngineInfo                { return wire.EngineInfo{Name: "echo"} }
func (e echoEngine) Close() error                         { return nil }

// BenchmarkServeRoundTrip measures one EMBED_BATCH → VECTORS round trip
// through Serve over a Unix socket pair with an engine that computes
// nothing: the protocol's own cost per batch (framing, copies, syscalls),
// to set against a batch's compute time from BenchmarkEmbedProtocol.
//
//	go test ./engine -run '^$' -bench ServeRoundTrip
func BenchmarkServeRoundTrip(b *testing.B) {
	for _, bb := range benchBatches {
		b.Run(fmt.Sprintf("batch=%dx%d", bb.seqs, bb.tokens), func(b *testing.B) {
			a, c := socketPair(b)
			done := make(chan error, 1)
			go func() { done <- Serve(context.Background(), wire.NewConn(c), echoEngine{dims: 384}, ServeOptions{}) }()
			conn := wire.NewConn(a)
			req := &wire.EmbedBatch{ModelRef: "m", Normalize: true}
			for i, s := range benchSeqs(bb.seqs, bb.tokens) {
				req.Items = append(req.Items, wire.Item{ID: uint64(i), NTokens: len(s)})
				req.IDs = append(req.IDs, s...)
			}
			b.SetBytes(int64(4 * (len(req.IDs) + bb.seqs*384)))
			for b.Loop() {
				req.ReqID++
				if err := conn.Send(req); err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Recv(); err != nil {
					b.Fatal(err)
				}
			}
			conn.Send(&wire.Shutdown{})
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// socketPair returns the two ends of a connected Unix stream socket.
func socketPair(b testing.TB) (net.Conn, net.Conn) {
	dir := b.TempDir()
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("unix", dir+"/s")
	if err != nil {
		b.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(); c.Close() })
	return a, c
}
