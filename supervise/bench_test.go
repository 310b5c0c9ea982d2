package supervise

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/synapse-embed/synapse/wire"
)

// benchRestart measures kill → worker ready again with its model loaded:
// each iteration SIGKILLs the worker and waits for a PING to succeed,
// which happens only after the restart replayed the LOAD.
func benchRestart(b *testing.B, cfg Config, load wire.Load) {
	cfg.QuarantineCrashes, cfg.DegradedCrashes = 1<<30, 1<<30
	p := startPool(b, cfg)
	ctx := context.Background()
	if _, err := p.Load(ctx, load); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p.mu.Lock()
		w := p.slots[0].w
		p.mu.Unlock()
		w.proc.Kill()
		// The first PING finds the dead worker (a crash), the second waits
		// for the restarted one.
		if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err == nil {
			b.Fatal("ping to a killed worker succeeded")
		}
		if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRestartHelper(b *testing.B) {
	benchRestart(b, helperConfig(b, "worker", ""), testLoad("bench"))
}

func BenchmarkRestartRealWorker(b *testing.B) {
	cfg, load := realConfig(b, "")
	benchRestart(b, cfg, load)
}

// BenchmarkPingPool is a PING round trip through the pool (acquire, req_id
// rewrite, deadline watch, release).
func BenchmarkPingPool(b *testing.B) {
	p := startPool(b, helperConfig(b, "worker", ""))
	ctx := context.Background()
	for b.Loop() {
		if _, err := p.Do(ctx, &wire.Ping{}, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPingRawConn is the same PING on the worker's wire.Conn directly:
// the difference to BenchmarkPingPool is the supervisor's overhead.
func BenchmarkPingRawConn(b *testing.B) {
	p := startPool(b, helperConfig(b, "worker", ""))
	p.mu.Lock()
	w := p.slots[0].w
	p.slots[0].state = StateBusy // keep the pool off this worker
	p.mu.Unlock()
	defer p.release(p.slots[0], w)
	for b.Loop() {
		id := w.nextID()
		if err := w.conn.Send(&wire.Ping{ReqID: id}); err != nil {
			b.Fatal(err)
		}
		if m, err := w.conn.Recv(); err != nil || requestID(m) != id {
			b.Fatal(m, err)
		}
	}
}

// BenchmarkPingBareSocket is the floor: the same frames on a Unix socket
// pair inside this process, no worker process at all.
func BenchmarkPingBareSocket(b *testing.B) {
	a, c, err := socketPair(b)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn := wire.NewConn(c)
		for {
			m, err := conn.Recv()
			if err != nil {
				return
			}
			conn.Send(&wire.Pong{ReqID: requestID(m)})
		}
	}()
	conn := wire.NewConn(a)
	for i := uint64(1); b.Loop(); i++ {
		conn.Send(&wire.Ping{ReqID: i})
		if _, err := conn.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	a.Close()
	<-done
}

func socketPair(b *testing.B) (net.Conn, net.Conn, error) {
	dir := shortDir(b)
	ln, err := net.Listen("unix", dir+"/p.sock")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	a, err := net.Dial("unix", dir+"/p.sock")
	if err != nil {
		return nil, nil, err
	}
	c, err := ln.Accept()
	return a, c, err
}
