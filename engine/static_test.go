package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/wire"
)

// rawTensor is one tensor of a test safetensors file, its bytes as stored.
type rawTensor struct {
	dtype string
	shape []int64
	data  []byte
}

// writeRawSafetensors writes tensors of any dtype (the package's Write
// writes F32 only).
func writeRawSafetensors(t *testing.T, path string, tensors map[string]rawTensor) {
	t.Helper()
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	var data []byte
	for _, n := range names {
		tt := tensors[n]
		hdr[n] = map[string]any{"dtype": tt.dtype, "shape": tt.shape, "data_offsets": []int{len(data), len(data) + len(tt.data)}}
		data = append(data, tt.data...)
	}
	h, _ := json.Marshal(hdr)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func f32Bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func i64Bytes(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func loadStatic(t *testing.T, tensors map[string]rawTensor) (*Static, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeRawSafetensors(t, path, tensors)
	_, digest, err := hfmodel.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	e := NewStatic()
	info, err := e.Load(context.Background(), LoadRequest{Path: path, Digest: digest, Format: FormatStatic, Config: wire.RuntimeConfig{Embeddings: true}})
	return e, info.Ref, err
}

// TestStaticEmbed: the mean of rows, each weighed by its token's weight
// and found through the mapping; int8 rows as stored; an empty sequence
// gives zeros; normalize scales to length 1.
func TestStaticEmbed(t *testing.T) {
	// rows: r0 = (1,0), r1 = (0,2); tokens 0,1,2 map to rows 1,0,1 with weights 1, 0.5, 2.
	e, ref, err := loadStatic(t, map[string]rawTensor{
		hfmodel.TensorModel2Vec: {"F32", []int64{2, 2}, f32Bytes(1, 0, 0, 2)},
		hfmodel.TensorMapping:   {"I64", []int64{3}, i64Bytes(1, 0, 1)},
		hfmodel.TensorWeights:   {"F32", []int64{3}, f32Bytes(1, 0.5, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	vecs, dims, err := e.Embed(context.Background(), ref, "", false, [][]int32{{0, 1}, {2}, {}})
	if err != nil || dims != 2 {
		t.Fatalf("Embed: %v, dims %d", err, dims)
	}
	// {0,1}: (1·(0,2) + 0.5·(1,0)) / 2 = (0.25, 1); {2}: 2·(0,2) = (0,4); {}: zeros.
	want := []float32{0.25, 1, 0, 4, 0, 0}
	for i := range want {
		if math.Abs(float64(vecs[i]-want[i])) > 1e-6 {
			t.Fatalf("Embed: %v; want %v", vecs, want)
		}
	}
	vecs, _, _ = e.Embed(context.Background(), ref, PoolingMean, true, [][]int32{{2}})
	if vecs[0] != 0 || vecs[1] != 1 {
		t.Errorf("normalized: %v; want (0, 1)", vecs)
	}

	e8, ref8, err := loadStatic(t, map[string]rawTensor{hfmodel.TensorStatic: {"I8", []int64{2, 2}, []byte{1, 0xfe, 3, 4}}})
	if err != nil {
		t.Fatal(err)
	}
	vecs, _, _ = e8.Embed(context.Background(), ref8, "", false, [][]int32{{0, 1}})
	if vecs[0] != 2 || vecs[1] != 1 {
		t.Errorf("int8 rows (1,-2), (3,4): mean %v; want (2, 1)", vecs)
	}
}

// TestStaticRefuses: a mapping outside the table and a bad digest fail
// LOAD (artifact_invalid); an id outside the vocabulary and another
// pooling fail EMBED (bad_request); rerank and generate are unsupported.
func TestStaticRefuses(t *testing.T) {
	_, _, err := loadStatic(t, map[string]rawTensor{
		hfmodel.TensorModel2Vec: {"F32", []int64{2, 2}, f32Bytes(1, 0, 0, 2)},
		hfmodel.TensorMapping:   {"I64", []int64{2}, i64Bytes(0, 2)},
	})
	if wire.CodeOf(err) != wire.CodeArtifactInvalid {
		t.Errorf("mapping to row 2 of 2: %v; want artifact_invalid", err)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeRawSafetensors(t, path, map[string]rawTensor{hfmodel.TensorStatic: {"F32", []int64{1, 1}, f32Bytes(1)}})
	_, err = NewStatic().Load(context.Background(), LoadRequest{Path: path, Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000",
		Format: FormatStatic, Config: wire.RuntimeConfig{Embeddings: true}})
	if wire.CodeOf(err) != wire.CodeArtifactInvalid {
		t.Errorf("wrong digest: %v; want artifact_invalid", err)
	}
	e, ref, err := loadStatic(t, map[string]rawTensor{hfmodel.TensorStatic: {"F32", []int64{2, 1}, f32Bytes(1, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Embed(context.Background(), ref, "", true, [][]int32{{0, 2}}); wire.CodeOf(err) != wire.CodeBadRequest {
		t.Errorf("token id 2 of 2 rows: %v; want bad_request", err)
	}
	if _, _, err := e.Embed(context.Background(), ref, PoolingCLS, true, [][]int32{{0}}); wire.CodeOf(err) != wire.CodeBadRequest {
		t.Errorf("pooling cls: %v; want bad_request", err)
	}
	if _, err := e.Rerank(context.Background(), ref, nil); wire.CodeOf(err) != wire.CodeUnsupported {
		t.Errorf("rerank: %v; want unsupported", err)
	}
	if _, err := e.Generate(context.Background(), ref, nil, GenerateOptions{}); wire.CodeOf(err) != wire.CodeUnsupported {
		t.Errorf("generate: %v; want unsupported", err)
	}
}
