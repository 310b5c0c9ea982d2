package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckTensors(t *testing.T) {
	w := NewWriter()
	if err := w.Set("general.architecture", "test"); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []Tensor{
		{Name: "a.f32", Type: GGMLTypeF32, Dims: []uint64{3, 5}, Values: sample(15, 1)},
		{Name: "c.q8", Type: GGMLTypeQ8_0, Dims: []uint64{64, 3}, Values: sample(192, 3)},
	} {
		if err := w.AddTensor(tn); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckTensors(st.Size()); err != nil {
		t.Fatalf("whole file: got %v; want nil", err)
	}
	end := f.DataOffset + int64(f.Tensors[1].Offset) + int64(TensorBytes(GGMLTypeQ8_0, []uint64{64, 3}))
	tests := []struct {
		name   string
		size   int64
		mutate func(*File)
		want   string
	}{
		{"one byte short", end - 1, nil, `tensor "c.q8" (`},
		{"no data", f.DataOffset - 1, nil, "tensor data would start"},
		{"misaligned", end, func(f *File) { f.Tensors[1].Offset++ }, "not a multiple of the alignment"},
		{"partial block", end, func(f *File) { f.Tensors[1].Dims = []uint64{48, 4} }, "whole Q8_0 blocks"},
		{"overflowing dims", end, func(f *File) { f.Tensors[1].Dims = []uint64{1 << 40, 1 << 40, 1 << 40} }, "does not fit"},
		{"starts past the end", end, func(f *File) { f.Tensors[1].Type = 99; f.Tensors[1].Offset = 1 << 20 }, "past the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if tt.mutate != nil {
				tt.mutate(g)
			}
			err = g.CheckTensors(tt.size)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestFileTypeNames(t *testing.T) {
	for _, name := range FileTypeNames() {
		ft, err := ParseFileType(strings.ToUpper(name))
		if err != nil {
			t.Fatalf("ParseFileType(%q): %v", name, err)
		}
		if got := strings.ToLower(ft.String()); got != name {
			t.Errorf("ParseFileType(%q).String() = %q; want %q", name, got, name)
		}
	}
	if ft, _ := ParseFileType("q4_k_m"); ft != FileTypeQ4_K_M || ft.LlamaName() != "MOSTLY_Q4_K_M" {
		t.Errorf("q4_k_m: got %d (%s); want 15 (MOSTLY_Q4_K_M)", ft, ft.LlamaName())
	}
	if got := FileTypeF32.LlamaName(); got != "ALL_F32" {
		t.Errorf("F32 llama name: got %q; want ALL_F32", got)
	}
	if _, err := ParseFileType("q9_9"); err == nil || !strings.Contains(err.Error(), "q8_0") {
		t.Errorf("ParseFileType(q9_9): got %v; want an error listing the names", err)
	}
	if got := FileType(99).String(); got != "file_type(99)" {
		t.Errorf("got %q; want file_type(99)", got)
	}
}
