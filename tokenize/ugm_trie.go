package tokenize

import (
	"slices"
	"strings"
)

// ugmTrie is a byte trie over token texts, built once and stored flat: node
// i's children are reached over the edges [lo[i], hi[i]) of labels (sorted)
// and target. The root's children are also kept in a 256-entry table. It
// gives the same answers as llama.cpp's naive_trie (a std::map per node).
type ugmTrie struct {
	lo, hi []int32
	value  []int32 // token id ending at the node, or NoToken
	labels []byte
	target []int32
	root   [256]int32 // the root's child per byte, or -1
}

type ugmTrieKey struct {
	text string
	id   int32
}

// newUGMTrie builds a trie of keys. A later key with the same text replaces
// an earlier one, as naive_trie.insert does; empty keys are ignored.
func newUGMTrie(keys []ugmTrieKey) *ugmTrie {
	sorted := make([]ugmTrieKey, 0, len(keys))
	for _, k := range keys {
		if k.text != "" {
			sorted = append(sorted, k)
		}
	}
	// A stable sort keeps insertion order among equal texts; the last wins.
	slices.SortStableFunc(sorted, func(a, b ugmTrieKey) int { return strings.Compare(a.text, b.text) })
	t := &ugmTrie{}
	t.addNode()
	t.build(0, sorted, 0)
	for i := range t.root {
		t.root[i] = -1
	}
	for e := t.lo[0]; e < t.hi[0]; e++ {
		t.root[t.labels[e]] = t.target[e]
	}
	return t
}

func (t *ugmTrie) addNode() int32 {
	t.lo = append(t.lo, 0)
	t.hi = append(t.hi, 0)
	t.value = append(t.value, NoToken)
	return int32(len(t.value) - 1)
}

// build fills node from keys, all of which share their first depth bytes.
func (t *ugmTrie) build(node int32, keys []ugmTrieKey, depth int) {
	for len(keys) > 0 && len(keys[0].text) == depth { // keys ending here sort first
		t.value[node] = keys[0].id
		keys = keys[1:]
	}
	type group struct {
		child int32
		keys  []ugmTrieKey
	}
	var groups []group
	t.lo[node] = int32(len(t.labels))
	for i := 0; i < len(keys); {
		c := keys[i].text[depth]
		j := i + 1
		for j < len(keys) && keys[j].text[depth] == c {
			j++
		}
		child := t.addNode()
		t.labels = append(t.labels, c)
		t.target = append(t.target, child)
		groups = append(groups, group{child, keys[i:j]})
		i = j
	}
	t.hi[node] = int32(len(t.labels))
	for _, g := range groups {
		t.build(g.child, g.keys, depth+1)
	}
}

// child returns node's child over byte c, or -1.
func (t *ugmTrie) child(node int32, c byte) int32 {
	if node == 0 {
		return t.root[c]
	}
	lo, hi := t.lo[node], t.hi[node]
	if hi-lo <= 8 {
		for e := lo; e < hi; e++ {
			if t.labels[e] == c {
				return t.target[e]
			}
		}
		return -1
	}
	for lo < hi {
		m := int32(uint32(lo+hi) >> 1)
		switch l := t.labels[m]; {
		case l == c:
			return t.target[m]
		case l < c:
			lo = m + 1
		default:
			hi = m
		}
	}
	return -1
}

// walk follows the bytes of b from node; -1 when the path leaves the trie.
func (t *ugmTrie) walk(node int32, b []byte) int32 {
	for _, c := range b {
		if node = t.child(node, c); node < 0 {
			return -1
		}
	}
	return node
}

// valueAt is the token id ending at node, or NoToken (also for node -1).
func (t *ugmTrie) valueAt(node int32) int32 {
	if node < 0 {
		return NoToken
	}
	return t.value[node]
}

// empty reports whether the trie holds no keys.
func (t *ugmTrie) empty() bool { return t.lo[0] == t.hi[0] }

// longestPath is naive_trie.get_longest_prefix: the length of the longest
// prefix of s that is a path from the root, whether or not a key ends there.
func (t *ugmTrie) longestPath(s string) int {
	node := int32(0)
	for i := 0; i < len(s); i++ {
		node = t.child(node, s[i])
		if node < 0 {
			return i
		}
	}
	return len(s)
}
