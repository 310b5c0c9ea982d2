package reftest

import "testing"

// TestReadCommitted reads every committed reference: its digest, shape and
// unit norms (all of them are normalised).
func TestReadCommitted(t *testing.T) {
	for _, name := range []string{"all-MiniLM-L6-v2", "all-MiniLM-L6-v2-onnx", "all-MiniLM-L6-v2-onnx-q", "e5-small-v2-onnx-q"} {
		r, err := Read(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Count != 1000 || r.Dims != 384 {
			t.Errorf("%s: %d × %d; want 1000 × 384", name, r.Count, r.Dims)
		}
		if c := Cosine(r.Vecs[0], r.Vecs[0]); c < 0.999999 {
			t.Errorf("%s: self-cosine %v; want 1", name, c)
		}
		if a := r.Compare(map[string][]float32{r.IDs[0]: r.Vecs[0]}); a.Missing != r.Count-1 || a.Min < 0.999999 {
			t.Errorf("%s: Compare of one vector = %+v; want %d missing and min 1", name, a, r.Count-1)
		}
	}
}
