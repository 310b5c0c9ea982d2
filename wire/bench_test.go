package wire

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// Run with: go test -run '^$' -bench . -benchmem ./wire/
//
// BenchmarkRecvVectors64MiB decodes a 64 MiB VECTORS raw frame; compare its
// MB/s with BenchmarkCopy64MiB (copy into a reused buffer) and
// BenchmarkAllocCopy64MiB (allocate, then copy: what any decoder returning
// caller-owned memory must do at least).

// readWriter is an in-memory stream whose reads replay a fixed byte string.
type readWriter struct {
	*bytes.Reader
	io.Writer
}

func replay(b []byte) readWriter { return readWriter{bytes.NewReader(b), io.Discard} }

var frameSizes = []int{64, 4 << 10, 1 << 20}

func BenchmarkWriteFrame(b *testing.B) {
	for _, n := range frameSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := make([]byte, n)
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := WriteFrame(io.Discard, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadFrame(b *testing.B) {
	for _, n := range frameSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			stream := frame(make([]byte, n))
			r := bytes.NewReader(stream)
			b.SetBytes(int64(n))
			for b.Loop() {
				r.Reset(stream)
				if _, err := ReadFrame(r, DefaultMaxFrame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// embedBatch is a typical request: 64 sequences of 128 tokens.
func embedBatch() *EmbedBatch {
	m := &EmbedBatch{ReqID: 1, ModelRef: "m1", Pooling: "mean", Normalize: true}
	for i := range 64 {
		m.Items = append(m.Items, Item{ID: uint64(i), NTokens: 128})
	}
	m.IDs = make([]int32, 64*128)
	for i := range m.IDs {
		m.IDs[i] = int32(i)
	}
	return m
}

func BenchmarkSendEmbedBatch(b *testing.B) {
	m := embedBatch()
	c := NewConn(readWriter{nil, io.Discard})
	b.SetBytes(int64(4 * len(m.IDs)))
	for b.Loop() {
		if err := c.Send(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecvEmbedBatch(b *testing.B) {
	var buf bytes.Buffer
	m := embedBatch()
	if err := NewConn(&buf).Send(m); err != nil {
		b.Fatal(err)
	}
	stream := buf.Bytes()
	// Many copies of the message, so the Conn (and its buffers) is reused.
	const copies = 64
	many := bytes.Repeat(stream, copies)
	b.SetBytes(int64(4 * len(m.IDs)))
	var c *Conn
	i := 0
	for b.Loop() {
		if i%copies == 0 {
			c = NewConn(replay(many))
		}
		i++
		if _, err := c.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}

const size64MiB = 64 << 20

// vectors64MiB is a VECTORS message whose raw frame is 64 MiB.
func vectors64MiB() *Vectors {
	const dims = 1024
	m := &Vectors{ReqID: 1, Dims: dims, N: size64MiB / 4 / dims, Data: make([]float32, size64MiB/4)}
	for i := range m.Data {
		m.Data[i] = float32(i)
	}
	return m
}

func BenchmarkSendVectors64MiB(b *testing.B) {
	m := vectors64MiB()
	c := NewConn(readWriter{nil, io.Discard})
	b.SetBytes(size64MiB)
	for b.Loop() {
		if err := c.Send(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecvVectors64MiB(b *testing.B) {
	var buf bytes.Buffer
	if err := NewConn(&buf).Send(vectors64MiB()); err != nil {
		b.Fatal(err)
	}
	stream := bytes.Clone(buf.Bytes()) // exact size; drop the encoder's slack
	buf = bytes.Buffer{}
	runtime.GC()
	b.SetBytes(size64MiB)
	for b.Loop() {
		m, err := NewConn(replay(stream)).Recv()
		if err != nil {
			b.Fatal(err)
		}
		if v := m.(*Vectors); len(v.Data) != size64MiB/4 {
			b.Fatalf("got %d values", len(v.Data))
		}
	}
}

var sink []byte

func BenchmarkCopy64MiB(b *testing.B) {
	src := make([]byte, size64MiB)
	dst := make([]byte, size64MiB)
	b.SetBytes(size64MiB)
	for b.Loop() {
		copy(dst, src)
	}
	sink = dst
}

func BenchmarkAllocCopy64MiB(b *testing.B) {
	src := make([]byte, size64MiB)
	b.SetBytes(size64MiB)
	for b.Loop() {
		dst := make([]byte, size64MiB)
		copy(dst, src)
		sink = dst
	}
}
