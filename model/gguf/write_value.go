package gguf

import (
	"fmt"
	"math"
)

// typeOf maps a Go value to its GGUF type and, for arrays, element type.
func typeOf(v any) (ValueType, ValueType, error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, nil
	case int8:
		return TypeInt8, 0, nil
	case uint16:
		return TypeUint16, 0, nil
	case int16:
		return TypeInt16, 0, nil
	case uint32:
		return TypeUint32, 0, nil
	case int32:
		return TypeInt32, 0, nil
	case float32:
		return TypeFloat32, 0, nil
	case bool:
		return TypeBool, 0, nil
	case string:
		return TypeString, 0, nil
	case uint64:
		return TypeUint64, 0, nil
	case int64:
		return TypeInt64, 0, nil
	case float64:
		return TypeFloat64, 0, nil
	case []uint8:
		return TypeArray, TypeUint8, nil
	case []int8:
		return TypeArray, TypeInt8, nil
	case []uint16:
		return TypeArray, TypeUint16, nil
	case []int16:
		return TypeArray, TypeInt16, nil
	case []uint32:
		return TypeArray, TypeUint32, nil
	case []int32:
		return TypeArray, TypeInt32, nil
	case []float32:
		return TypeArray, TypeFloat32, nil
	case []bool:
		return TypeArray, TypeBool, nil
	case []string:
		return TypeArray, TypeString, nil
	case []uint64:
		return TypeArray, TypeUint64, nil
	case []int64:
		return TypeArray, TypeInt64, nil
	case []float64:
		return TypeArray, TypeFloat64, nil
	}
	return 0, 0, fmt.Errorf("%w: no GGUF type for Go type %T", ErrInvalidModel, v)
}

// checkValue reports whether kv.Value's Go type matches kv.Type and kv.Elem.
func checkValue(kv KV) error {
	if kv.Type == TypeArray {
		items, ok := kv.Value.([]any)
		if !ok {
			_, elem, err := typeOf(kv.Value)
			if err == nil && elem != kv.Elem {
				err = fmt.Errorf("%w: array of %v declared as array of %v", ErrInvalidModel, elem, kv.Elem)
			}
			return err
		}
		if kv.Elem == TypeArray || kv.Elem > TypeFloat64 {
			return fmt.Errorf("%w: cannot write arrays of %v", ErrInvalidModel, kv.Elem)
		}
		for i, it := range items {
			if t, _, err := typeOf(it); err != nil || t != kv.Elem {
				return fmt.Errorf("%w: element %d is %T, want %v", ErrInvalidModel, i, it, kv.Elem)
			}
		}
		return nil
	}
	t, _, err := typeOf(kv.Value)
	if err == nil && t != kv.Type {
		err = fmt.Errorf("%w: value of type %v declared as %v", ErrInvalidModel, t, kv.Type)
	}
	return err
}

// value writes a checked entry's value (after its type tag).
func (e *encoder) value(kv KV) {
	if kv.Type != TypeArray {
		e.scalar(kv.Value)
		return
	}
	e.u32(uint32(kv.Elem))
	switch a := kv.Value.(type) {
	case []any:
		writeArray(e, a, (*encoder).scalar)
	case []uint8:
		writeArray(e, a, (*encoder).u8)
	case []int8:
		writeArray(e, a, func(e *encoder, v int8) { e.u8(uint8(v)) })
	case []uint16:
		writeArray(e, a, (*encoder).u16)
	case []int16:
		writeArray(e, a, func(e *encoder, v int16) { e.u16(uint16(v)) })
	case []uint32:
		writeArray(e, a, (*encoder).u32)
	case []int32:
		writeArray(e, a, func(e *encoder, v int32) { e.u32(uint32(v)) })
	case []float32:
		writeArray(e, a, func(e *encoder, v float32) { e.u32(math.Float32bits(v)) })
	case []bool:
		writeArray(e, a, (*encoder).bool)
	case []string:
		writeArray(e, a, (*encoder).str)
	case []uint64:
		writeArray(e, a, (*encoder).u64)
	case []int64:
		writeArray(e, a, func(e *encoder, v int64) { e.u64(uint64(v)) })
	case []float64:
		writeArray(e, a, func(e *encoder, v float64) { e.u64(math.Float64bits(v)) })
	}
}

func writeArray[T any](e *encoder, a []T, put func(*encoder, T)) {
	e.u64(uint64(len(a)))
	for _, v := range a {
		put(e, v)
	}
}

// scalar writes one scalar of a type checked by typeOf.
func (e *encoder) scalar(v any) {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.bool(x)
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	}
}
