// Package grammar writes the GBNF grammars `synapse generate` constrains
// generation with — from a JSON schema or a list of choices — and checks
// that generated JSON is valid under the schema it came from.
//
// The JSON schema subset: "type" object, array, string, number, integer,
// boolean or null; "properties", "required" and "additionalProperties":
// false for objects (other properties are never generated); "items",
// "minItems" and "maxItems" for arrays; "minLength" and "maxLength" for
// strings; "enum" and "const". Annotations ("title", "description",
// "$schema", "$id", "$comment", "examples", "default") are ignored. Any other
// keyword is an error naming it: a schema that cannot be honoured is refused,
// never loosened.
package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrUnsupported marks a schema keyword or form the converter does not honour.
var ErrUnsupported = errors.New("grammar: unsupported")

// Schema is a parsed JSON schema of the supported subset.
type Schema struct {
	Type       string             // "" when only enum/const constrain the value
	Properties map[string]*Schema // objects
	Order      []string           // property order as written
	Required   []string
	Items      *Schema // arrays
	Enum       []any   // allowed values (const is a one-value enum)
	// MinLen and MaxLen bound a string's characters or an array's items
	// (MaxLen -1: no bound).
	MinLen, MaxLen int
}

var annotations = map[string]bool{"title": true, "description": true, "$schema": true, "$id": true,
	"$comment": true, "examples": true, "default": true}

// ParseSchema reads a JSON schema of the supported subset; path names the
// place in the schema in errors ("#/properties/name").
func ParseSchema(data []byte) (*Schema, error) {
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("grammar: schema: %w", err)
	}
	return parse(raw, "#")
}

func parse(raw json.RawMessage, path string) (*Schema, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("grammar: schema %s: not an object", path)
	}
	s := &Schema{MaxLen: -1}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := s.set(k, obj[k], path); err != nil {
			return nil, err
		}
	}
	if s.Type == "" && s.Enum == nil {
		return nil, fmt.Errorf("%w: schema %s has neither \"type\" nor \"enum\"", ErrUnsupported, path)
	}
	if s.Type == "object" {
		s.Order = propertyOrder(obj["properties"])
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				return nil, fmt.Errorf("grammar: schema %s: required property %q is not in \"properties\"", path, r)
			}
		}
	}
	if s.Type == "array" && s.Items == nil {
		return nil, fmt.Errorf("%w: schema %s: an array needs \"items\"", ErrUnsupported, path)
	}
	if err := s.checkBounds(obj, path); err != nil {
		return nil, err
	}
	return s, nil
}

// set reads one keyword of a schema object.
func (s *Schema) set(k string, v json.RawMessage, path string) error {
	switch k {
	case "type":
		if err := json.Unmarshal(v, &s.Type); err != nil {
			return fmt.Errorf("%w: %s/type: only a single type name", ErrUnsupported, path)
		}
		if !slices.Contains([]string{"object", "array", "string", "number", "integer", "boolean", "null"}, s.Type) {
			return fmt.Errorf("grammar: schema %s/type: unknown type %q", path, s.Type)
		}
	case "properties":
		var props map[string]json.RawMessage
		if err := json.Unmarshal(v, &props); err != nil {
			return fmt.Errorf("grammar: schema %s/properties: not an object", path)
		}
		s.Properties = map[string]*Schema{}
		for name, p := range props {
			ps, err := parse(p, path+"/properties/"+name)
			if err != nil {
				return err
			}
			s.Properties[name] = ps
		}
	case "required":
		if err := json.Unmarshal(v, &s.Required); err != nil {
			return fmt.Errorf("grammar: schema %s/required: not a list of names", path)
		}
	case "additionalProperties":
		if string(v) != "false" {
			return fmt.Errorf("%w: %s/additionalProperties: only false (generated objects hold the listed properties only)", ErrUnsupported, path)
		}
	case "items":
		items, err := parse(v, path+"/items")
		if err != nil {
			return err
		}
		s.Items = items
	case "enum", "const":
		var vals []any
		if k == "const" {
			var one any
			if err := json.Unmarshal(v, &one); err != nil {
				return fmt.Errorf("grammar: schema %s/const: %w", path, err)
			}
			vals = []any{one}
		} else if err := json.Unmarshal(v, &vals); err != nil || len(vals) == 0 {
			return fmt.Errorf("grammar: schema %s/enum: not a non-empty list", path)
		}
		s.Enum = vals
	case "minLength", "maxLength", "minItems", "maxItems":
		var n int
		if err := json.Unmarshal(v, &n); err != nil || n < 0 {
			return fmt.Errorf("grammar: schema %s/%s: want a count ≥ 0", path, k)
		}
		if strings.HasPrefix(k, "min") {
			s.MinLen = n
		} else {
			s.MaxLen = n
		}
	default:
		if !annotations[k] {
			return fmt.Errorf("%w: schema keyword %q at %s", ErrUnsupported, k, path)
		}
	}
	return nil
}

// propertyOrder is the order the properties are written in the schema (JSON
// objects are unordered to encoding/json; generation follows the author's).
func propertyOrder(raw json.RawMessage) []string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	var order []string
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return order
		}
		order = append(order, t.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return order
		}
	}
	return order
}

// Choices is a grammar whose only sentences are the given strings.
func Choices(choices []string) string {
	alts := make([]string, len(choices))
	for i, c := range choices {
		alts[i] = literal(c)
	}
	return "root ::= " + strings.Join(alts, " | ") + "\n"
}

// literal is s as a GBNF string literal.
func literal(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonLiteral is the GBNF literal of a JSON value's compact encoding.
func jsonLiteral(v any) string {
	b, _ := json.Marshal(v)
	return literal(string(b))
}

// ruleName is a GBNF rule name for a schema path.
func ruleName(path string) string {
	var b strings.Builder
	for _, r := range path {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// checkBounds refuses length bounds on the wrong type or out of order.
func (s *Schema) checkBounds(obj map[string]json.RawMessage, path string) error {
	for k, typ := range map[string]string{"minLength": "string", "maxLength": "string", "minItems": "array", "maxItems": "array"} {
		if _, ok := obj[k]; ok && s.Type != typ {
			return fmt.Errorf("%w: schema %s: %q on a %q (it bounds a %s)", ErrUnsupported, path, k, s.Type, typ)
		}
	}
	if s.MaxLen >= 0 && s.MinLen > s.MaxLen {
		return fmt.Errorf("grammar: schema %s: the minimum %d is above the maximum %d", path, s.MinLen, s.MaxLen)
	}
	return nil
}
