package wire

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"unsafe"
)

// littleEndian reports whether the host stores integers little-endian, in
// which case raw frames are read and written as byte views of the []int32 and
// []float32 slices themselves. Elsewhere a conversion loop runs. It is a
// variable so tests can exercise the conversion path on any host.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// maxRawElems bounds the element count of any raw frame: 4 × n must fit the
// u32 length prefix.
const maxRawElems = math.MaxUint32 / 4

// rawElem is an element type carried in raw frames.
type rawElem interface{ ~int32 | ~uint32 | ~float32 }

// byteView returns s's memory as bytes, without copying.
func byteView[T rawElem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*4)
}

// writeRaw writes s as one raw frame of little-endian 4-byte values.
func writeRaw[T rawElem](w *bufio.Writer, s []T) error {
	var hdr [frameHeaderLen]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(s)*4))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if littleEndian {
		_, err := w.Write(byteView(s))
		return err
	}
	var chunk [4096]byte
	for len(s) > 0 {
		n := min(len(s), len(chunk)/4)
		putLE(chunk[:4*n], s[:n])
		if _, err := w.Write(chunk[:4*n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// putLE stores src into dst as little-endian values (big-endian hosts).
func putLE[T rawElem](dst []byte, src []T) {
	switch s := any(src).(type) {
	case []int32:
		for i, v := range s {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(v))
		}
	case []uint32:
		for i, v := range s {
			binary.LittleEndian.PutUint32(dst[4*i:], v)
		}
	case []float32:
		for i, v := range s {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
}

// fromLE converts dst in place from little-endian bytes to host values
// (big-endian hosts); b is dst's byte view.
func fromLE[T rawElem](dst []T, b []byte) {
	switch d := any(dst).(type) {
	case []int32:
		for i := range d {
			d[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []uint32:
		for i := range d {
			d[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	case []float32:
		for i := range d {
			d[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}

// framed is a message followed by one raw frame of 4-byte values. Each
// such message type says, in its own file, how many values its control
// frame announces and which of its members holds them; the connection
// reads and writes them (a message that is not framed has no raw frame).
type framed interface {
	Message
	// rawValues is the member that holds the raw values: a *[]int32,
	// *[]float32 or *[]uint32.
	rawValues() any
	// rawCount is the count the control frame announces, -1 when any
	// count is valid; an error for a negative or overflowing count.
	rawCount() (int64, error)
}

// rawChecked is a framed message whose raw values its file checks once
// they are read and before they are sent.
type rawChecked interface{ checkRaw() error }

// rawLen is the values a framed message carries.
func rawLen(f framed) int {
	switch p := f.rawValues().(type) {
	case *[]int32:
		return len(*p)
	case *[]float32:
		return len(*p)
	case *[]uint32:
		return len(*p)
	}
	return 0
}

// sendRaw writes a framed message's values as its raw frame.
func sendRaw(w *bufio.Writer, f framed) error {
	switch p := f.rawValues().(type) {
	case *[]int32:
		return writeRaw(w, *p)
	case *[]float32:
		return writeRaw(w, *p)
	case *[]uint32:
		return writeRaw(w, *p)
	}
	return nil
}

// recvRaw reads a framed message's raw frame of want values (-1: any)
// into it, checked when it is rawChecked.
func recvRaw(r io.Reader, max uint32, hdr *[frameHeaderLen]byte, f framed, want int64) error {
	var err error
	switch p := f.rawValues().(type) {
	case *[]int32:
		*p, err = readRaw[int32](r, max, hdr, want)
	case *[]float32:
		*p, err = readRaw[float32](r, max, hdr, want)
	case *[]uint32:
		*p, err = readRaw[uint32](r, max, hdr, want)
	}
	if c, ok := f.(rawChecked); ok && err == nil {
		err = c.checkRaw()
	}
	return err
}

// readRaw reads the raw frame that follows a control frame. want is the
// number of elements the header announced, or -1 when any count is valid.
// The length is checked against max and want before the slice is allocated,
// and the payload is read straight into the returned slice (nil when empty).
func readRaw[T rawElem](r io.Reader, max uint32, hdr *[frameHeaderLen]byte, want int64) ([]T, error) {
	n, err := readFrameLen(r, max, hdr)
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF // the message is incomplete
	}
	if err != nil {
		return nil, err
	}
	if n%4 != 0 {
		return nil, protoErrorf("raw frame of %d bytes is not a multiple of 4", n)
	}
	if want >= 0 && int64(n) != 4*want {
		return nil, protoErrorf("raw frame of %d bytes; header announces %d values (%d bytes)", n, want, 4*want)
	}
	if n == 0 {
		return nil, nil
	}
	dst := make([]T, n/4)
	b := byteView(dst)
	if err := readPayload(r, b); err != nil {
		return nil, err
	}
	if !littleEndian {
		fromLE(dst, b)
	}
	return dst, nil
}
