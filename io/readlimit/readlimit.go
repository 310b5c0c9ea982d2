// Package readlimit reads the files a user names (grammars, schemas, model
// files and configuration, resume files) as regular files only, so that a
// FIFO without a writer cannot hang the process (Open), and the small ones
// with a bound, so that a huge or endless file is refused instead of
// filling memory. The module and workers both use it.
package readlimit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrNotRegular: a file synapse reads is a FIFO, a device, a socket or a
// directory. Reading a FIFO without a writer would block forever (and a
// blocked open cannot be interrupted), a device may never end.
var ErrNotRegular = errors.New("not a regular file")

// The bounds of the files synapse reads whole; docs/security.md lists them.
const (
	Grammar   = 1 << 20   // --grammar, --json-schema
	Tokenizer = 256 << 20 // an ONNX model's tokenizer.json
	Config    = 16 << 20  // config.json, modules.json and the like, cache entries
	State     = 64 << 20  // resume checkpoints and shard manifests
	Line      = 16 << 20  // one line of a text file read line by line (models add --sample, tokenize)
)

// ErrTooLarge: the file is larger than its bound.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the whole of path if it is a regular file (see Open) of
// at most limit bytes, and otherwise fails with ErrNotRegular or
// ErrTooLarge without reading more than limit+1 bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path, limit)
}

// Read is ReadFile for an open reader named name.
func Read(r io.Reader, name string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes (the limit for this file)", name, ErrTooLarge, limit)
	}
	return b, nil
}

// ReadLine reads the next line of r, its newline included, if it has at
// most limit bytes, and otherwise fails with ErrTooLarge having read no
// more than about limit bytes of it (an endless line, /dev/zero, is not
// held in memory). At the end of the stream it returns what is left and
// io.EOF.
func ReadLine(r *bufio.Reader, name string, limit int) ([]byte, error) {
	var line []byte
	for {
		b, err := r.ReadSlice('\n')
		if len(line)+len(b) > limit {
			return nil, fmt.Errorf("%s: %w: a line of more than %d bytes (the limit for this file)", name, ErrTooLarge, limit)
		}
		line = append(line, b...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.Clone(line), err
		}
	}
}

// UnmarshalJSON is json.Unmarshal for a file synapse did not write: its
// syntax error says where the file stops being JSON (the byte offset) but
// quotes none of its content, since the file may be a link to one the user
// may read and should not see echoed (a tokenizer.json that is /etc/shadow's
// link, for example).
func UnmarshalJSON(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if se.Offset >= int64(len(data)) {
			return fmt.Errorf("not valid JSON (unexpected end at byte %d)", len(data))
		}
		return fmt.Errorf("not valid JSON (at byte %d of %d)", se.Offset, len(data))
	}
	return err
}
