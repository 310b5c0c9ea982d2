package convert

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/synapse-embed/synapse/model/safetensors"
)

// weights are a source's safetensors files open, each tensor found in the
// file that holds it, names with the architecture's prefix stripped.
type weights struct {
	files  []*safetensors.File
	where  map[string]int // tensor name, prefix stripped → index in files
	full   map[string]string
	names  []string // the files' base names, for messages
	prefix string
	// rename maps a BERT tensor name to the checkpoint's (DistilBERT's
	// distilName); zero: a tensor it does not have, read as zeros. nil for
	// BERT's own names.
	rename func(name string) (string, bool)
}

// openWeights opens the source's safetensors files (a damaged one is
// ErrRefused) and picks the weight prefix under which the word embeddings
// are found.
func (s *Source) openWeights() (*weights, error) {
	w := &weights{where: map[string]int{}, full: map[string]string{}}
	if s.arch.distil {
		w.rename = distilName
	}
	if s.arch.mpnet {
		w.rename = mpnetName
	}
	for _, p := range s.Weights {
		f, err := safetensors.Open(p)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("convert: %w: %w", ErrRefused, err)
		}
		w.files = append(w.files, f)
		w.names = append(w.names, p)
	}
	all := map[string]int{}
	for i, f := range w.files {
		for n := range f.Tensors {
			all[n] = i
		}
	}
	probe := cmp.Or(s.arch.probe, "embeddings.word_embeddings.weight")
	found := false
	for _, pre := range s.arch.prefixes {
		if _, ok := all[pre+probe]; ok {
			w.prefix, found = pre, true
			break
		}
	}
	if !found {
		w.close()
		return nil, fmt.Errorf("convert: %s: %w: no tensor %s (with prefix %q) for %s; the file has %d tensors",
			w.fileNames(), ErrRefused, probe, s.arch.prefixes, s.Arch, len(all))
	}
	for n, i := range all {
		if rest, ok := cutPrefix(n, w.prefix); ok {
			w.where[rest], w.full[rest] = i, n
		}
	}
	for n, i := range all { // a head outside the encoder's prefix (classifier.weight)
		if _, ok := w.where[n]; !ok {
			w.where[n], w.full[n] = i, n
		}
	}
	return w, nil
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix):], true
}

func (w *weights) close() {
	for _, f := range w.files {
		f.Close()
	}
}

// fileNames names the weight files in messages.
func (w *weights) fileNames() string {
	if len(w.names) == 1 {
		return w.names[0]
	}
	return fmt.Sprint(w.names)
}

// has reports whether the tensor is present.
func (w *weights) has(name string) bool {
	if w.rename != nil {
		n, zero := w.rename(name)
		if zero {
			return false
		}
		name = n
	}
	_, ok := w.where[name]
	return ok
}

// tensor returns the float32 values of the tensor name (prefix stripped),
// which must have shape; alt names an older checkpoint's spelling of it
// (LayerNorm gamma and beta).
func (w *weights) tensor(name string, shape ...int64) ([]float32, error) {
	if w.rename != nil {
		n, zero := w.rename(name)
		if zero {
			size := int64(1)
			for _, d := range shape {
				size *= d
			}
			return make([]float32, size), nil
		}
		name = n
	}
	i, ok := w.where[name]
	if !ok {
		if alt, ok2 := legacyName(name); ok2 {
			if j, ok3 := w.where[alt]; ok3 {
				i, ok, name = j, true, alt
			}
		}
	}
	if !ok {
		return nil, fmt.Errorf("convert: %s: %w: no tensor %s%s", w.fileNames(), ErrRefused, w.prefix, name)
	}
	full, file := w.full[name], w.names[i]
	t := w.files[i].Tensors[full]
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("convert: %s: %w: tensor %s has shape %v; config.json makes it %v", file, ErrRefused, full, t.Shape, shape)
	}
	v, _, err := w.files[i].Float32(full)
	if err != nil {
		return nil, fmt.Errorf("convert: %w: %w", ErrRefused, err)
	}
	return v, nil
}

// legacyName is the name older BERT checkpoints give a LayerNorm's weight
// (gamma) or bias (beta).
func legacyName(name string) (string, bool) {
	for _, s := range []struct{ now, old string }{{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}} {
		if n := len(name) - len(s.now); n >= 0 && name[n:] == s.now {
			return name[:n] + s.old, true
		}
	}
	return "", false
}
