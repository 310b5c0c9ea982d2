//go:build !cgo

package engine

import "errors"

// OpenONNX fails: the ONNX engine calls ONNX Runtime through cgo, and this
// synapse was built without it (CGO_ENABLED=0 or no C compiler).
func OpenONNX(ONNXOptions) (Engine, error) {
	return nil, errors.New("engine: this synapse was built without cgo (CGO_ENABLED=0 or no C compiler), which the ONNX engine needs; rebuild with a C compiler to run ONNX models")
}
