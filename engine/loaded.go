package engine

import "sort"

// loaded is an engine's table of the models it has loaded, by ref: the
// one place the engines keep what Stats reports and Close frees.
type loaded[M interface{ free() }] map[string]M

// stats reports the process RSS and the loaded models' refs, sorted.
func (l loaded[M]) stats() Stats {
	refs := make([]string, 0, len(l))
	for ref := range l {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	return Stats{RSSMB: RSSMB(), ModelsLoaded: refs}
}

// freeAll frees every model and empties the table.
func (l loaded[M]) freeAll() {
	for ref, m := range l {
		m.free()
		delete(l, ref)
	}
}
