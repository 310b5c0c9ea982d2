package corpus

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// rawDoc gives row i's requested columns as JSON values (ReadOptions.Raw).
func (s *parquetSource) rawDoc(i int, d Doc) (Doc, error) {
	d.Fields = make(map[string]json.RawMessage, len(s.raw))
	for _, c := range s.raw {
		v, err := jsonValue(c.arr, i)
		if err != nil {
			return Doc{}, d.Error(ReasonInvalidUTF8, fmt.Sprintf("column %q: %v", c.name, err))
		}
		b, err := json.Marshal(v)
		if err != nil {
			return Doc{}, d.Error(ReasonNotText, fmt.Sprintf("column %q: %v", c.name, err))
		}
		d.Fields[c.name] = b
	}
	return d, nil
}

// jsonValue is value i of arr as a Go value that encodes as its JSON form:
// strings (and binary values, which must be UTF-8) as strings, numbers,
// booleans, lists and structs, null as nil. A string that is not valid
// UTF-8 is an error: encoding/json would repair it without a word.
func jsonValue(arr arrow.Array, i int) (any, error) {
	if arr.IsNull(i) {
		return nil, nil
	}
	switch a := arr.(type) {
	case *array.Dictionary:
		return jsonValue(a.Dictionary(), a.GetValueIndex(i))
	case *array.String, *array.LargeString, *array.StringView, *array.Binary, *array.LargeBinary, *array.BinaryView:
		v, _ := textAt(a, i)
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("invalid UTF-8 at byte %d", invalidAt([]byte(v)))
		}
		return v, nil
	case *array.List:
		start, end := a.ValueOffsets(i)
		return listValue(a.ListValues(), int(start), int(end))
	case *array.LargeList:
		start, end := a.ValueOffsets(i)
		return listValue(a.ListValues(), int(start), int(end))
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		obj := make(map[string]any, st.NumFields())
		for f := range st.NumFields() {
			v, err := jsonValue(a.Field(f), i)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", st.Field(f).Name, err)
			}
			obj[st.Field(f).Name] = v
		}
		return obj, nil
	case *array.Float32:
		return json.Number(strconv.FormatFloat(float64(a.Value(i)), 'g', -1, 32)), nil
	}
	return arr.GetOneForMarshal(i), nil
}

func listValue(values arrow.Array, start, end int) ([]any, error) {
	out := make([]any, 0, end-start)
	for k := start; k < end; k++ {
		v, err := jsonValue(values, k)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", k-start, err)
		}
		out = append(out, v)
	}
	return out, nil
}
