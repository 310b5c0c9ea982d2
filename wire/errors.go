package wire

import (
	"errors"
	"fmt"
)

// Code is a stable error code carried by ERR. Codes are append-only: a peer
// may receive a code it does not know and must treat it as opaque.
type Code string

// Error codes defined by protocol v1.
const (
	CodeArtifactInvalid Code = "artifact_invalid" // LOAD: file missing, digest mismatch, not a usable model
	CodeOOM             Code = "oom"              // the engine could not allocate memory
	CodeConfigInvalid   Code = "config_invalid"   // LOAD: runtime_config rejected
	CodeUnknownType     Code = "unknown_type"     // the worker does not know the request's type
	CodeBadRequest      Code = "bad_request"      // the request is well-formed but not acceptable
	CodeUnsupported     Code = "unsupported"      // a known feature this engine does not provide (e.g. grammar)
	CodeModelNotLoaded  Code = "model_not_loaded" // model_ref names no loaded model
	CodeInternal        Code = "internal"         // anything else
)

// Error is an error a peer reported with ERR, or one engine code returns to be
// reported as ERR. It is distinct from *ProtocolError, which means the peer
// broke the protocol.
type Error struct {
	Code  Code
	Msg   string
	ReqID uint64

	err error // wrapped cause, if built by Errorf with %w
}

func (e *Error) Error() string { return "wire: " + string(e.Code) + ": " + e.Msg }

// Unwrap returns the cause wrapped by Errorf's %w, if any.
func (e *Error) Unwrap() error { return e.err }

// Errorf returns an *Error with the given code and a message formatted as by
// fmt.Errorf; an error formatted with %w is kept for errors.Is/As.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Msg: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		e.err = err // keep the %w chain
	}
	return e
}

// CodeOf returns the code an error should travel with in ERR: the Code of an
// *Error in its chain, CodeUnknownType for an *UnknownTypeError, "" for nil,
// and CodeInternal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var we *Error
	if errors.As(err, &we) {
		return we.Code
	}
	var ue *UnknownTypeError
	if errors.As(err, &ue) {
		return CodeUnknownType
	}
	return CodeInternal
}

// ProtocolError reports a violation of the protocol: a frame that is not a
// JSON object, a missing or invalid type, a raw frame whose length disagrees
// with its header, a count that is negative or overflows. Send returns it for
// an inconsistent message before writing anything.
type ProtocolError struct {
	Msg string
	Err error // underlying cause, may be nil
}

func (e *ProtocolError) Error() string {
	if e.Err != nil {
		return "wire: protocol violation: " + e.Msg + ": " + e.Err.Error()
	}
	return "wire: protocol violation: " + e.Msg
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// protoErrorf builds a *ProtocolError without a cause.
func protoErrorf(format string, args ...any) *ProtocolError {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// UnknownTypeError is returned by Recv for a well-formed control frame whose
// type this package does not know. The frame has been consumed and the Conn
// stays usable; a worker answers ERR{req_id, code: unknown_type}.
type UnknownTypeError struct {
	Type  string
	ReqID uint64 // the frame's req_id, 0 if absent or not a number
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("wire: unknown message type %q", e.Type)
}
