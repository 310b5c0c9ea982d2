package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/safetensors"
	"github.com/synapse-embed/synapse/wire"
)

// FormatStatic is a static model's format (package wire).
const FormatStatic = wire.FormatStatic

// StaticVersion names the static engine in HELLO.
const StaticVersion = "synapse-static 1"

// Static is the engine of static models (Model2Vec, sentence-transformers'
// StaticEmbedding): a table of token embeddings, in Go, no library. A
// text's vector is the mean of its tokens' rows (Model2Vec: each row
// weighed by weights[id], its row found through mapping[id] when the file
// has them), normalized when EMBED asks. The module tokenizes without
// special tokens and leaves out what the model leaves out (Model2Vec's
// unknown token); an empty sequence's vector is zero, as both libraries
// give.
type Static struct {
	models map[string]*staticModel
}

type staticModel struct {
	dims, rows int
	f32        []float32 // rows×dims, row-major; nil when i8 holds them
	i8         []int8    // int8 embeddings (Model2Vec's quantized models), unscaled as model2vec reads them
	weights    []float32 // by token id; nil for none
	mapping    []int32   // token id → row; nil: the id is the row
}

// NewStatic returns the static engine.
func NewStatic() *Static { return &Static{models: map[string]*staticModel{}} }

// Info names the engine.
func (e *Static) Info() wire.EngineInfo {
	return wire.EngineInfo{Name: "synapse-static", Version: StaticVersion, BuildFlags: "go"}
}

// Load verifies the embeddings file's digest and reads its tensors.
func (e *Static) Load(_ context.Context, req LoadRequest) (ModelInfo, error) {
	rc := req.Config
	switch {
	case req.Format != FormatStatic:
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "format %q: the static engine loads %s", req.Format, FormatStatic)
	case rc.VocabOnly:
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "vocab_only: the static engine has no tokenizer (the module tokenizes static models)")
	case !rc.Embeddings:
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "embeddings: false asks for generation; a static model only embeds")
	case rc.Pooling != PoolingDefault && rc.Pooling != PoolingMean:
		return ModelInfo{}, wire.Errorf(wire.CodeConfigInvalid, "pooling %q: a static model's vector is the mean of its tokens' rows", rc.Pooling)
	case rc.STModules != "":
		return ModelInfo{}, wire.Errorf(wire.CodeUnsupported, "st_modules %q: the static engine applies no sentence-transformers modules", rc.STModules)
	}
	if err := checkDigestSyntax(req.Digest); err != nil {
		return ModelInfo{}, err
	}
	ref := fmt.Sprintf("%s-%08x", strings.TrimPrefix(req.Digest, "sha256:")[:16], crc32.ChecksumIEEE([]byte(FormatStatic)))
	if m, ok := e.models[ref]; ok {
		return ModelInfo{Ref: ref, Dims: m.dims}, nil
	}
	start := time.Now()
	_, got, err := hfmodel.Digest(req.Path)
	if err != nil {
		return ModelInfo{}, wire.Errorf(wire.CodeArtifactInvalid, "artifact: %w", err)
	}
	if got != req.Digest {
		return ModelInfo{}, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: digest %s; want %s", req.Path, got, req.Digest)
	}
	m, err := readStatic(req.Path)
	if err != nil {
		return ModelInfo{}, wire.Errorf(wire.CodeArtifactInvalid, "artifact %s: %w", req.Path, err)
	}
	e.models[ref] = m
	return ModelInfo{Ref: ref, Dims: m.dims, ColdLoad: time.Since(start)}, nil
}

// readStatic reads the embeddings (embedding.weight, else model2vec's
// embeddings with its weights and mapping, when there are).
func readStatic(path string) (*staticModel, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	name := hfmodel.TensorStatic
	if _, ok := f.Tensors[name]; !ok {
		name = hfmodel.TensorModel2Vec
	}
	b, t, err := f.Raw(name)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) != 2 || t.Shape[0] <= 0 || t.Shape[1] <= 0 {
		return nil, fmt.Errorf("tensor %s has shape %v; want [rows, dims]", name, t.Shape)
	}
	m := &staticModel{rows: int(t.Shape[0]), dims: int(t.Shape[1])}
	if t.DType == "I8" {
		m.i8 = make([]int8, len(b))
		for i, v := range b {
			m.i8[i] = int8(v)
		}
	} else if m.f32, err = floats(b, t.DType, name); err != nil {
		return nil, err
	}
	if name == hfmodel.TensorModel2Vec {
		if err := m.readModel2Vec(f); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readModel2Vec reads model2vec's optional weights and mapping tensors.
func (m *staticModel) readModel2Vec(f *safetensors.File) error {
	if _, ok := f.Tensors[hfmodel.TensorWeights]; ok {
		b, t, err := f.Raw(hfmodel.TensorWeights)
		if err != nil {
			return err
		}
		if m.weights, err = floats(b, t.DType, hfmodel.TensorWeights); err != nil {
			return err
		}
	}
	if _, ok := f.Tensors[hfmodel.TensorMapping]; !ok {
		return nil
	}
	b, t, err := f.Raw(hfmodel.TensorMapping)
	if err != nil {
		return err
	}
	if m.mapping, err = rowIndex(b, t.DType, m.rows); err != nil {
		return err
	}
	if m.weights != nil && len(m.weights) != len(m.mapping) {
		return fmt.Errorf("%d weights for %d mapped tokens", len(m.weights), len(m.mapping))
	}
	return nil
}

// floats converts a float tensor's bytes (F64, F32, F16, BF16) to float32.
func floats(b []byte, dtype, name string) ([]float32, error) {
	var size int
	switch dtype {
	case "F64":
		size = 8
	case "F32":
		size = 4
	case "F16", "BF16":
		size = 2
	default:
		return nil, fmt.Errorf("tensor %s is %s; the static engine reads F64, F32, F16, BF16 (and I8 embeddings)", name, dtype)
	}
	out := make([]float32, len(b)/size)
	for i := range out {
		switch dtype {
		case "F64":
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "F16":
			out[i] = halfFloat(binary.LittleEndian.Uint16(b[2*i:]))
		case "BF16":
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	}
	return out, nil
}

// rowIndex converts a mapping tensor (I64 or I32) and checks every row it
// names.
func rowIndex(b []byte, dtype string, rows int) ([]int32, error) {
	var out []int32
	switch dtype {
	case "I64":
		out = make([]int32, len(b)/8)
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(b[8*i:]))
			if v < 0 || v >= int64(rows) {
				return nil, fmt.Errorf("mapping[%d] = %d outside the %d embedding rows", i, v, rows)
			}
			out[i] = int32(v)
		}
	case "I32":
		out = make([]int32, len(b)/4)
		for i := range out {
			v := int32(binary.LittleEndian.Uint32(b[4*i:]))
			if v < 0 || int(v) >= rows {
				return nil, fmt.Errorf("mapping[%d] = %d outside the %d embedding rows", i, v, rows)
			}
			out[i] = v
		}
	default:
		return nil, fmt.Errorf("tensor %s is %s; want I64 or I32", hfmodel.TensorMapping, dtype)
	}
	return out, nil
}

// halfFloat converts an IEEE 754 half to float32.
func halfFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int32(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		for frac&0x400 == 0 {
			frac <<= 1
			exp--
		}
		exp++
		frac &= 0x3ff
	}
	return math.Float32frombits(sign | uint32(exp+127-15)<<23 | frac<<13)
}
