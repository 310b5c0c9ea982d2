// Package reftest reads the reference vectors that `make reference`
// computes with sentence-transformers (examples/models/reference.py) and
// commits under model/convert/testdata/reference, so that tests of real
// models compare against them without torch. Tests run it.
package reftest

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
)

// Format is the format string the reference files carry.
const Format = "synapse reference vectors 1"

// Reference is one model's reference: the texts' ids in corpus order and
// their vectors.
type Reference struct {
	Name     string `json:"name"`
	Format   string `json:"format"`
	Count    int    `json:"count"`
	Dims     int    `json:"dims"`
	Pipeline struct {
		Pooling      string `json:"pooling"`
		Normalized   bool   `json:"normalized"`
		MaxSeqLength int    `json:"max_seq_length"`
		Prefix       string `json:"prefix"`
	} `json:"pipeline"`
	Corpus struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
	} `json:"corpus"`
	IDs         []string `json:"ids"`
	TokenCounts []int    `json:"token_counts"`
	Vectors     struct {
		File   string `json:"file"`
		SHA256 string `json:"sha256_uncompressed"`
	} `json:"vectors"`

	// Vecs are the vectors, Vecs[i] that of IDs[i].
	Vecs [][]float32 `json:"-"`
}

// Dir is the directory of the committed reference files.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "reference")
}

// Read reads the reference of the model name (NAME.json and its vectors),
// checking the format, the shape and the vectors' digest.
func Read(name string) (*Reference, error) {
	b, err := os.ReadFile(filepath.Join(Dir(), name+".json"))
	if err != nil {
		return nil, err
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s.json: %w", name, err)
	}
	if r.Format != Format || r.Count != len(r.IDs) || r.Dims <= 0 {
		return nil, fmt.Errorf("%s.json: format %q, %d ids for count %d, dims %d: not a reference this reader knows", name, r.Format, len(r.IDs), r.Count, r.Dims)
	}
	raw, err := gunzip(filepath.Join(Dir(), r.Vectors.File))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Vectors.File, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != r.Vectors.SHA256 {
		return nil, fmt.Errorf("%s: sha256 %x; want %s", r.Vectors.File, sum, r.Vectors.SHA256)
	}
	if len(raw) != 4*r.Count*r.Dims {
		return nil, fmt.Errorf("%s: %d bytes; want %d × %d float32", r.Vectors.File, len(raw), r.Count, r.Dims)
	}
	r.Vecs = make([][]float32, r.Count)
	for i := range r.Vecs {
		v := make([]float32, r.Dims)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(i*r.Dims+j):]))
		}
		r.Vecs[i] = v
	}
	return &r, nil
}

func gunzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
}

// Cosine is the cosine similarity of two vectors of one length, in float64.
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// Agreement is how a run's vectors agree with a reference: the least and
// the mean cosine over the reference's ids, and how many it lacked.
type Agreement struct {
	Min, Mean float64
	Missing   int
	Worst     string // the id of the least cosine
}

// Compare scores got (vectors by id) against r.
func (r *Reference) Compare(got map[string][]float32) Agreement {
	a := Agreement{Min: math.Inf(1)}
	n := 0
	for i, id := range r.IDs {
		v, ok := got[id]
		if !ok || len(v) != r.Dims {
			a.Missing++
			continue
		}
		c := Cosine(v, r.Vecs[i])
		if c < a.Min {
			a.Min, a.Worst = c, id
		}
		a.Mean += c
		n++
	}
	if n > 0 {
		a.Mean /= float64(n)
	}
	return a
}
