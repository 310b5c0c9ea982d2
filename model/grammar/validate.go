package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Validate reports why text is not one JSON value valid under s (nil when
// it is): what a grammar from s must always produce.
func (s *Schema) Validate(text string) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("text after the JSON value")
	}
	return s.check(v, "$")
}

func (s *Schema) check(v any, path string) error {
	if s.Enum != nil {
		got, _ := json.Marshal(v)
		for _, e := range s.Enum {
			if want, _ := json.Marshal(e); bytes.Equal(canon(got), canon(want)) {
				return nil
			}
		}
		return fmt.Errorf("%s: %s is not one of the enum's values", path, got)
	}
	switch s.Type {
	case "object":
		return s.checkObject(v, path)
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array", path)
		}
		if err := s.checkLen(len(a), path, "items"); err != nil {
			return err
		}
		for i, x := range a {
			if err := s.Items.check(x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: want a string", path)
		}
		return s.checkLen(utf8.RuneCountInString(str), path, "characters")
	case "number", "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: want a %s", path, s.Type)
		}
		if s.Type == "integer" && strings.ContainsAny(string(n), ".eE") {
			return fmt.Errorf("%s: %s is not an integer", path, n)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a boolean", path)
		}
	case "null":
		if v != nil {
			return fmt.Errorf("%s: want null", path)
		}
	}
	return nil
}

func (s *Schema) checkObject(v any, path string) error {
	o, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want an object", path)
	}
	for _, r := range s.Required {
		if _, ok := o[r]; !ok {
			return fmt.Errorf("%s: the required property %q is missing", path, r)
		}
	}
	for k, x := range o {
		p := s.Properties[k]
		if p == nil {
			return fmt.Errorf("%s: property %q is not in the schema", path, k)
		}
		if err := p.check(x, path+"."+k); err != nil {
			return err
		}
	}
	return nil
}

// canon re-encodes a JSON value so that numbers compare by value.
func canon(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

func (s *Schema) checkLen(n int, path, what string) error {
	if n < s.MinLen || (s.MaxLen >= 0 && n > s.MaxLen) {
		return fmt.Errorf("%s: %d %s, outside [%d, %d]", path, n, what, s.MinLen, s.MaxLen)
	}
	return nil
}
