package grammar

import (
	"errors"
	"strings"
	"testing"
)

const personSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "full name"},
    "age": {"type": "integer"},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"], "additionalProperties": false},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}},
    "score": {"type": "number"},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "address"]
}`

func TestParseSchemaRefusesWhatItCannotHonour(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type": "string", "pattern": "^a"}`, `"pattern"`},
		{`{"type": "array", "items": {"type": "string"}, "uniqueItems": true}`, `"uniqueItems"`},
		{`{"type": "integer", "maxLength": 2}`, `"maxLength" on a "integer"`},
		{`{"anyOf": [{"type": "string"}]}`, `"anyOf"`},
		{`{"type": "object", "properties": {}, "additionalProperties": true}`, "additionalProperties"},
		{`{"type": ["string", "null"]}`, "single type"},
		{`{"type": "array"}`, `needs "items"`},
		{`{"description": "nothing"}`, `neither "type" nor "enum"`},
		{`{"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}`, `"format" at #/properties/a`},
	} {
		_, err := ParseSchema([]byte(tc.schema))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v; want ErrUnsupported naming %s", tc.schema, err, tc.want)
		}
	}
	if _, err := ParseSchema([]byte(`{"type": "object", "properties": {}, "required": ["x"]}`)); err == nil {
		t.Errorf("a required property missing from properties was accepted")
	}
}

func TestValidate(t *testing.T) {
	s, err := ParseSchema([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{`{"name": "Ada", "address": {"city": "London"}}`, true},
		{` {"name": "Ada", "age": 36, "address": {"city": "L", "zip": "1"}, "tags": ["a", 3], "score": -1.5e3, "ok": true} `, true},
		{`{"name": "Ada"}`, false},                                          // address required
		{`{"name": "Ada", "address": {"zip": "1"}}`, false},                 // city required
		{`{"name": "Ada", "address": {"city": "L"}, "age": 3.5}`, false},    // not an integer
		{`{"name": "Ada", "address": {"city": "L"}, "tags": ["c"]}`, false}, // not in the enum
		{`{"name": "Ada", "address": {"city": "L"}, "extra": 1}`, false},    // not in the schema
		{`{"name": 5, "address": {"city": "L"}}`, false},
		{`{"name": "Ada", "address": {"city": "L"}} trailing`, false},
		{`{"name": "Ada", `, false},
	} {
		if err := s.Validate(tc.text); (err == nil) != tc.ok {
			t.Errorf("Validate(%s) = %v; want ok=%v", tc.text, err, tc.ok)
		}
	}
}

func TestGBNF(t *testing.T) {
	s, err := ParseSchema([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	g := s.GBNF()
	// Properties in the schema's order: name and address required, the
	// others optional, each present or not.
	for _, want := range []string{
		`root ::= "{" space root-0-name-kv "," space root-2-address-kv root-rest-0 "}" space`,
		`root-0-name-kv ::= "\"name\"" space ":" space string`,
		`root-2-address ::= "{" space root-2-address-0-city-kv root-2-address-rest-0 "}" space`,
		`root-3-tags-item ::= ("\"a\"" | "\"b\"" | "3") space`,
		`root-rest-0 ::= ("," space root-1-age-kv root-rest-1)?`,
		`integer ::= ("-"? integral-part) space`,
	} {
		if !strings.Contains(g, want+"\n") {
			t.Errorf("grammar lacks the rule\n%s\nin\n%s", want, g)
		}
	}
	opt, _ := ParseSchema([]byte(`{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}}`))
	if g := opt.GBNF(); !strings.Contains(g, `root ::= "{" space (root-0-a-kv root-rest-1 | root-1-b-kv )? "}" space`) {
		t.Errorf("an object of optional properties:\n%s", g)
	}
	if got := Choices([]string{"yes", `say "no"`}); got != `root ::= "yes" | "say \"no\""`+"\n" {
		t.Errorf("Choices = %q", got)
	}
}

func TestBounds(t *testing.T) {
	s, err := ParseSchema([]byte(`{"type": "object", "properties": {
		"code": {"type": "string", "minLength": 2, "maxLength": 4},
		"list": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3},
		"any": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}}, "required": ["code", "list", "any"]}`))
	if err != nil {
		t.Fatal(err)
	}
	g := s.GBNF()
	for _, want := range []string{
		`root-0-code ::= "\"" char{2,4} "\"" space`,
		`root-1-list ::= "[" space boolean ("," space boolean){0,2} "]" space`,
		`root-2-any ::= "[" space (integer ("," space integer){0,1})? "]" space`,
	} {
		if !strings.Contains(g, want+"\n") {
			t.Errorf("grammar lacks\n%s\nin\n%s", want, g)
		}
	}
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{`{"code": "ab", "list": [true], "any": []}`, true},
		{`{"code": "abcd", "list": [true, false, true], "any": [1, 2]}`, true},
		{`{"code": "a", "list": [true], "any": []}`, false},
		{`{"code": "abcde", "list": [true], "any": []}`, false},
		{`{"code": "ab", "list": [], "any": []}`, false},
		{`{"code": "ab", "list": [true], "any": [1, 2, 3]}`, false},
	} {
		if err := s.Validate(tc.text); (err == nil) != tc.ok {
			t.Errorf("Validate(%s) = %v; want ok=%v", tc.text, err, tc.ok)
		}
	}
}
