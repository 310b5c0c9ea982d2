package tokenize

import (
	"slices"
	"strings"
)

// spTrie is a byte trie over token texts stored as a double array: the
// child of node s over byte c is n = base[s] + c when check[n] == s, so one
// step is two array reads. Node 0 is the root. It gives the same answers as
// llama.cpp's naive_trie (a std::map per node), which SPM and UGM use.
type spTrie struct {
	base, check []int32
	value       []int32 // token id ending at the node, or NoToken
}

type spTrieKey struct {
	text string
	id   int32
}

// spTrieFree marks an unused slot of check; the root's slot holds
// spTrieRoot, which no node's index equals either.
const (
	spTrieFree = -1
	spTrieRoot = -2
)

// newSPTrie builds a trie of keys. A later key with the same text replaces
// an earlier one, as naive_trie.insert does; empty keys are ignored.
func newSPTrie(keys []spTrieKey) *spTrie {
	sorted := make([]spTrieKey, 0, len(keys))
	for _, k := range keys {
		if k.text != "" {
			sorted = append(sorted, k)
		}
	}
	// A stable sort keeps insertion order among equal texts; the last wins.
	slices.SortStableFunc(sorted, func(a, b spTrieKey) int { return strings.Compare(a.text, b.text) })
	var lt spListTrie
	lt.addNode()
	lt.build(0, sorted, 0)
	return lt.doubleArray()
}

// spListTrie is the trie as built from sorted keys: node i's children are the
// edges [lo[i], hi[i]) of labels (ascending) and target.
type spListTrie struct {
	lo, hi []int32
	value  []int32
	labels []byte
	target []int32
}

func (t *spListTrie) addNode() int32 {
	t.lo = append(t.lo, 0)
	t.hi = append(t.hi, 0)
	t.value = append(t.value, NoToken)
	return int32(len(t.value) - 1)
}

// build fills node from keys, all of which share their first depth bytes.
func (t *spListTrie) build(node int32, keys []spTrieKey, depth int) {
	for len(keys) > 0 && len(keys[0].text) == depth { // keys ending here sort first
		t.value[node] = keys[0].id
		keys = keys[1:]
	}
	type group struct {
		child int32
		keys  []spTrieKey
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

// doubleArray lays the trie out as a double array, placing nodes breadth
// first, each node's children at the first base where all their slots are
// free. Free slots are kept in a linked list so the search skips used ones.
func (t *spListTrie) doubleArray() *spTrie {
	b := &spDABuilder{d: &spTrie{}}
	b.grow(512)
	b.use(0)
	d := b.d
	d.check[0] = spTrieRoot
	d.value[0] = t.value[0]
	slot := make([]int32, len(t.value)) // list node -> slot
	queue := []int32{0}
	for len(queue) > 0 {
		node := queue[0]
		queue = queue[1:]
		s := slot[node]
		labels := t.labels[t.lo[node]:t.hi[node]]
		if len(labels) == 0 {
			continue
		}
		base := b.findBase(labels)
		d.base[s] = base
		for e := t.lo[node]; e < t.hi[node]; e++ {
			n := base + int32(t.labels[e])
			child := t.target[e]
			b.use(n)
			d.check[n] = s
			d.value[n] = t.value[child]
			slot[child] = n
			queue = append(queue, child)
		}
	}
	// Trim the unused tail; child checks bounds.
	n := len(d.check)
	for n > 1 && d.check[n-1] == spTrieFree {
		n--
	}
	d.base, d.check, d.value = d.base[:n:n], d.check[:n:n], d.value[:n:n]
	return d
}

// spDABuilder places nodes in a growing double array, with the free slots in
// a doubly linked list (next/prev; -1 ends it) in index order.
type spDABuilder struct {
	d          *spTrie
	next, prev []int32
	head, tail int32
}

// findBase returns the first base >= 1 whose slots base+c, for the labels
// c, are all free.
func (b *spDABuilder) findBase(labels []byte) int32 {
	for p := b.head; ; p = b.next[p] {
		if p < 0 { // no free slot left: grow, then continue from the new ones
			n := len(b.d.check)
			b.grow(2 * n)
			p = int32(n)
		}
		base := p - int32(labels[0])
		if base < 1 {
			continue
		}
		b.grow(int(base) + 256)
		ok := true
		for _, c := range labels[1:] {
			if b.d.check[base+int32(c)] != spTrieFree {
				ok = false
				break
			}
		}
		if ok {
			return base
		}
	}
}

// use takes slot n off the free list.
func (b *spDABuilder) use(n int32) {
	p, q := b.prev[n], b.next[n]
	if p >= 0 {
		b.next[p] = q
	} else {
		b.head = q
	}
	if q >= 0 {
		b.prev[q] = p
	} else {
		b.tail = p
	}
	b.prev[n], b.next[n] = -1, -1
}

// grow makes the arrays at least n long, appending the new slots to the
// free list.
func (b *spDABuilder) grow(n int) {
	d := b.d
	old := len(d.check)
	if old >= n {
		return
	}
	m := max(2*old, n)
	d.base = append(d.base, make([]int32, m-old)...)
	d.value = append(d.value, make([]int32, m-old)...)
	d.check = append(d.check, make([]int32, m-old)...)
	b.next = append(b.next, make([]int32, m-old)...)
	b.prev = append(b.prev, make([]int32, m-old)...)
	if old == 0 {
		b.head, b.tail = -1, -1
	}
	for i := int32(old); i < int32(m); i++ {
		d.check[i] = spTrieFree
		d.value[i] = NoToken
		b.prev[i], b.next[i] = b.tail, -1
		if b.tail >= 0 {
			b.next[b.tail] = i
		} else {
			b.head = i
		}
		b.tail = i
	}
}

// child returns node's child over byte c, or -1.
func (t *spTrie) child(node int32, c byte) int32 {
	n := t.base[node] + int32(c)
	if uint(n) < uint(len(t.check)) && t.check[n] == node {
		return n
	}
	return -1
}

// walk follows the bytes of b from node; -1 when the path leaves the trie.
func (t *spTrie) walk(node int32, b []byte) int32 {
	for _, c := range b {
		if node = t.child(node, c); node < 0 {
			return -1
		}
	}
	return node
}

// valueAt is the token id ending at node, or NoToken (also for node -1).
func (t *spTrie) valueAt(node int32) int32 {
	if node < 0 {
		return NoToken
	}
	return t.value[node]
}

// longestPath is naive_trie.get_longest_prefix: the length of the longest
// prefix of s that is a path from the root, whether or not a key ends there.
func (t *spTrie) longestPath(s string) int {
	node := int32(0)
	for i := 0; i < len(s); i++ {
		node = t.child(node, s[i])
		if node < 0 {
			return i
		}
	}
	return len(s)
}
