package grammar

import (
	"fmt"
	"sort"
	"strings"
)

// Primitive rules, as llama.cpp's json-schema-to-grammar writes them: JSON
// whitespace limited so that a model cannot fill its budget with it, strings
// with JSON's escapes, numbers of at most 16 digits per part.
var primitives = map[string]string{
	"space":         `| " " | "\n" [ \t]{0,20}`,
	"char":          `[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`,
	"string":        `"\"" char* "\"" space`,
	"integral-part": `[0] | [1-9] [0-9]{0,15}`,
	"decimal-part":  `[0-9]{1,16}`,
	"number":        `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space`,
	"integer":       `("-"? integral-part) space`,
	"boolean":       `("true" | "false") space`,
	"null":          `"null" space`,
}

// primitiveUses lists the rules each primitive needs.
var primitiveUses = map[string][]string{
	"string": {"char", "space"}, "number": {"integral-part", "decimal-part", "space"},
	"integer": {"integral-part", "space"}, "boolean": {"space"}, "null": {"space"},
}

// GBNF is a grammar (rule "root") whose sentences are the JSON texts valid
// under s: objects hold their required properties, then the optional ones
// that are generated, in the schema's order.
func (s *Schema) GBNF() string {
	g := &gen{rules: map[string]string{}}
	root := g.value(s, "root")
	g.rules["root"] = root
	names := make([]string, 0, len(g.rules))
	for n := range g.rules {
		if n != "root" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "root ::= %s\n", g.rules["root"])
	for _, n := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", n, g.rules[n])
	}
	return b.String()
}

type gen struct {
	rules map[string]string
}

// use adds a primitive rule (and what it needs) and returns its name.
func (g *gen) use(name string) string {
	if _, ok := g.rules[name]; !ok {
		g.rules[name] = primitives[name]
		for _, dep := range primitiveUses[name] {
			g.use(dep)
		}
	}
	return name
}

// value is the right-hand side of a rule matching a value of s; name
// names the rules it adds.
func (g *gen) value(s *Schema, name string) string {
	if s.Enum != nil {
		alts := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			alts[i] = jsonLiteral(v)
		}
		return "(" + strings.Join(alts, " | ") + ") " + g.use("space")
	}
	switch s.Type {
	case "object":
		return g.object(s, name)
	case "array":
		item := g.rule(s.Items, name+"-item")
		return `"[" ` + g.use("space") + ` ` + repeat(item, `"," space `+item, s.MinLen, s.MaxLen) + ` "]" space`
	case "string":
		if s.MinLen > 0 || s.MaxLen >= 0 {
			g.use("string")
			return `"\"" ` + bounded("char", s.MinLen, s.MaxLen) + ` "\"" space`
		}
	}
	return g.use(s.Type)
}

// rule names the value of s as its own rule and returns the name.
func (g *gen) rule(s *Schema, name string) string {
	if s.Enum == nil && s.Type != "object" && s.Type != "array" && (s.Type != "string" || (s.MinLen == 0 && s.MaxLen < 0)) {
		return g.use(s.Type)
	}
	name = ruleName(name)
	g.rules[name] = "" // reserve
	g.rules[name] = g.value(s, name)
	return name
}

// object writes the required properties in order, then the optional ones,
// each present or not, still in order.
func (g *gen) object(s *Schema, name string) string {
	g.use("space")
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var required, optional []string
	for i, p := range s.Order {
		ps := s.Properties[p]
		if ps == nil {
			continue
		}
		base := ruleName(fmt.Sprintf("%s-%d-%s", name, i, p)) // the index keeps names apart
		kv := base + "-kv"
		g.rules[kv] = jsonLiteral(p) + ` space ":" space ` + g.rule(ps, base)
		if req[p] {
			required = append(required, kv)
		} else {
			optional = append(optional, kv)
		}
	}
	body := strings.Join(required, ` "," space `)
	if len(optional) > 0 {
		body = strings.TrimSpace(body + " " + g.optionals(optional, name, len(required) > 0))
	}
	return `"{" space ` + body + ` "}" space`
}

// optionals matches any in-order subset of the optional key-value rules;
// afterRequired says whether a comma precedes the first one written.
func (g *gen) optionals(kvs []string, name string, afterRequired bool) string {
	// tail(i): after kv i was written, any subset of kv i+1… each with a comma.
	tail := make([]string, len(kvs)+1)
	for i := len(kvs) - 1; i >= 0; i-- {
		t := ruleName(fmt.Sprintf("%s-rest-%d", name, i))
		g.rules[t] = fmt.Sprintf(`("," space %s %s)?`, kvs[i], tail[i+1])
		if tail[i+1] == "" {
			g.rules[t] = fmt.Sprintf(`("," space %s)?`, kvs[i])
		}
		tail[i] = t
	}
	if afterRequired {
		return tail[0]
	}
	alts := make([]string, len(kvs))
	for i, kv := range kvs {
		alts[i] = kv + " " + tail[i+1]
	}
	return "(" + strings.Join(alts, " | ") + ")?"
}

// bounded is x repeated min to max times (max -1: no bound).
func bounded(x string, min, max int) string {
	switch {
	case max < 0 && min == 0:
		return x + "*"
	case max < 0:
		return fmt.Sprintf("%s{%d,}", x, min)
	}
	return fmt.Sprintf("%s{%d,%d}", x, min, max)
}

// repeat is first followed by more, min to max items in all, as a
// separated list (an empty one when min is 0).
func repeat(first, more string, min, max int) string {
	if max == 0 {
		return ""
	}
	rest := bounded("("+more+")", max0(min-1), max-1)
	if max < 0 {
		rest = bounded("("+more+")", max0(min-1), -1)
	}
	list := first + " " + rest
	if min == 0 {
		return "(" + list + ")?"
	}
	return list
}

func max0(n int) int { return max(n, 0) }
