package wire_test

import (
	"errors"
	"fmt"
	"net"

	"github.com/synapse-embed/synapse/wire"
)

// A module and a worker over an in-memory pipe: the handshake, one
// EMBED_BATCH answered by VECTORS, one UNLOAD answered by ERR, SHUTDOWN.
func Example() {
	moduleSide, workerSide := net.Pipe()
	defer moduleSide.Close()
	done := make(chan error, 1)
	go func() { done <- worker(wire.NewConn(workerSide)) }()

	c := wire.NewConn(moduleSide)
	m, err := c.Recv()
	hello, ok := m.(*wire.Hello)
	if err != nil || !ok || hello.V != wire.Version || hello.Nonce != "n1" {
		fmt.Println("bad HELLO:", m, err)
		return
	}
	c.Send(&wire.HelloAck{V: wire.Version, Accept: true, MaxFrame: hello.MaxFrame})
	c.SetMaxFrame(hello.MaxFrame)

	c.Send(&wire.EmbedBatch{ReqID: 1, ModelRef: "m1", Normalize: true,
		Items: []wire.Item{{ID: 7, NTokens: 2}, {ID: 8, NTokens: 1}},
		IDs:   []int32{101, 102, 103}})
	m, err = c.Recv()
	if v, ok := m.(*wire.Vectors); ok {
		fmt.Printf("VECTORS req %d: %d × %d: %v\n", v.ReqID, v.N, v.Dims, v.Data)
	} else {
		fmt.Println("unexpected:", m, err)
	}

	c.Send(&wire.Unload{ReqID: 2, ModelRef: "m9"})
	m, _ = c.Recv()
	if e, ok := m.(*wire.Err); ok {
		fmt.Println(e.AsError())
	}

	c.Send(&wire.Shutdown{})
	fmt.Println("worker:", <-done)
	// Output:
	// VECTORS req 1: 2 × 2: [2 101 1 103]
	// wire: model_not_loaded: no model m9
	// worker: <nil>
}

// worker serves a fake engine whose "embedding" of a sequence is
// [length, first id]. It answers types it does not know with
// ERR{unknown_type} and keeps serving.
func worker(c *wire.Conn) error {
	if err := c.Send(&wire.Hello{V: wire.Version, Nonce: "n1", MaxFrame: 1 << 20}); err != nil {
		return err
	}
	if m, err := c.Recv(); err != nil || !m.(*wire.HelloAck).Accept {
		return fmt.Errorf("not accepted: %v", err)
	}
	for {
		m, err := c.Recv()
		var ue *wire.UnknownTypeError
		if errors.As(err, &ue) {
			c.Send(&wire.Err{ReqID: ue.ReqID, Code: wire.CodeUnknownType, Msg: ue.Type})
			continue
		}
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *wire.EmbedBatch:
			v := &wire.Vectors{ReqID: m.ReqID, Dims: 2, N: len(m.Items)}
			ids := m.IDs
			for _, it := range m.Items {
				v.Data = append(v.Data, float32(it.NTokens), float32(ids[0]))
				ids = ids[it.NTokens:]
			}
			if err := c.Send(v); err != nil {
				return err
			}
		case *wire.Unload:
			err := wire.Errorf(wire.CodeModelNotLoaded, "no model %s", m.ModelRef)
			if err := c.Send(&wire.Err{ReqID: m.ReqID, Code: err.Code, Msg: err.Msg}); err != nil {
				return err
			}
		case *wire.Shutdown:
			return nil
		}
	}
}
