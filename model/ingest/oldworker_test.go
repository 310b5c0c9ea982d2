package ingest

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/synapse-embed/synapse/engine"
	"github.com/synapse-embed/synapse/model/gguf/modelgen"
	"github.com/synapse-embed/synapse/wire"
)

// TestHelperOldWorker is not a test: re-run as a worker process (with
// INGEST_OLD_WORKER set) it speaks protocol v1 as a worker from before
// QUANTIZE does, answering every request with ERR unknown_type.
func TestHelperOldWorker(t *testing.T) {
	if os.Getenv("INGEST_OLD_WORKER") == "" {
		t.Skip("helper process body; runs only as a child")
	}
	var socket, nonce string
	for i, a := range os.Args {
		switch {
		case a == "--socket" && i+1 < len(os.Args):
			socket = os.Args[i+1]
		case a == "--nonce" && i+1 < len(os.Args):
			nonce = os.Args[i+1]
		}
	}
	nc, err := net.Dial("unix", socket)
	if err != nil {
		os.Exit(1)
	}
	conn := wire.NewConn(nc)
	if err := engine.Handshake(conn, nonce, wire.EngineInfo{Name: "old"}, nil); err != nil {
		os.Exit(1)
	}
	for {
		m, err := conn.Recv()
		if err != nil {
			os.Exit(0)
		}
		if _, ok := m.(*wire.Shutdown); ok {
			os.Exit(0)
		}
		id := uint64(0)
		if r, ok := m.(interface{ RequestID() uint64 }); ok {
			id = r.RequestID()
		}
		conn.Send(&wire.Err{ReqID: id, Code: wire.CodeUnknownType, Msg: "unknown message type " + string(m.Type())})
	}
}

// A worker without QUANTIZE makes Quantize say that quantization needs a
// newer worker, and adds nothing.
func TestQuantizeOldWorker(t *testing.T) {
	o := testOptions(t, "")
	src, _, err := Add(context.Background(), writeModel(t, "tiny", modelgen.TinyEmbedder), "", o)
	if err != nil {
		t.Fatal(err)
	}
	o.Worker = []string{os.Args[0], "-test.run=^TestHelperOldWorker$", "--"}
	o.Env = append(o.Env, "INGEST_OLD_WORKER=1")
	_, _, err = Quantize(context.Background(), src, QuantizeOptions{FType: "q8_0"}, o)
	if !errors.Is(err, ErrNeedsNewerWorker) {
		t.Fatalf("Quantize with an old worker: got %v; want ErrNeedsNewerWorker", err)
	}
	if entries, _ := o.Store.Entries(); len(entries) != 1 {
		t.Errorf("entries: got %d; want only the source", len(entries))
	}
	checkClean(t, o.Store)
}
