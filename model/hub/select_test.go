package hub

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
)

func repoOf(names ...string) Repo {
	r := Repo{ID: "org/m", SHA: strings.Repeat("c", 40)}
	for _, n := range names {
		r.Siblings = append(r.Siblings, File{Name: n, Size: 1})
	}
	return r
}

func TestSelect(t *testing.T) {
	st := []string{"config.json", "tokenizer.json", "modules.json", "README.md", ".gitattributes"}
	tests := []struct {
		name    string
		files   []string
		modules []string
		onnx    bool
		want    []string // sorted; nil with wantErr
		wantErr string
	}{
		{"safetensors", append(st, "model.safetensors", "pytorch_model.bin", "onnx/model.onnx", "tf_model.h5"), nil, false,
			[]string{"config.json", "model.safetensors", "modules.json", "tokenizer.json"}, ""},
		{"onnx export", append(st, "model.safetensors", "onnx/model.onnx", "onnx/model_quantized.onnx"), nil, true,
			[]string{"config.json", "modules.json", "onnx/model.onnx", "tokenizer.json"}, ""},
		{"onnx at the root with external data", append(st, "model.onnx", "model.onnx_data"), nil, true,
			[]string{"config.json", "model.onnx", "model.onnx_data", "modules.json", "tokenizer.json"}, ""},
		{"modules: safetensors over the pickle", append(st, "model.safetensors", "1_Pooling/config.json", "2_Dense/config.json",
			"2_Dense/model.safetensors", "2_Dense/pytorch_model.bin", "3_Other/x.json"), []string{"1_Pooling", "2_Dense"}, false,
			[]string{"1_Pooling/config.json", "2_Dense/config.json", "2_Dense/model.safetensors", "config.json", "model.safetensors", "modules.json", "tokenizer.json"}, ""},
		{"shards", append(st, "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "pytorch_model-00001-of-00002.bin"), nil, false,
			[]string{"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json", "modules.json", "tokenizer.json"}, ""},
		{"a module's pickle only", append(st, "model.safetensors", "2_Dense/config.json", "2_Dense/pytorch_model.bin"), []string{"2_Dense"}, false,
			nil, "module 2_Dense has its weights only as 2_Dense/pytorch_model.bin"},
		{"pickle only, with an ONNX export", append(st, "pytorch_model.bin", "onnx/model.onnx"), nil, false,
			nil, "pull its ONNX export with --onnx"},
		{"pickle only", append(st, "pytorch_model.bin"), nil, false, nil, "only pytorch_model.bin, a pickle"},
		{"no ONNX export", append(st, "model.safetensors"), nil, true, nil, "pull it without --onnx"},
		{"GGUF files", []string{"README.md", "m-Q4_1.gguf", "m-Q8_0.gguf"}, nil, false, nil, "its GGUF files (m-Q4_1.gguf, m-Q8_0.gguf)"},
		{"nothing", []string{"README.md"}, nil, false, nil, "no model.safetensors, onnx/model.onnx nor pytorch_model.bin among its 1 files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(repoOf(tt.files...), tt.modules, tt.onnx)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrNothingToLoad) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v, %v; want ErrNothingToLoad saying %q", got, err, tt.wantErr)
				}
				return
			}
			var names []string
			for _, f := range got {
				names = append(names, f.Name)
			}
			sort.Strings(names)
			if err != nil || !slices.Equal(names, tt.want) {
				t.Errorf("got %v, %v; want %v", names, err, tt.want)
			}
		})
	}
}

func TestModules(t *testing.T) {
	dirs, err := Modules([]byte(`[{"idx":0,"path":""},{"idx":1,"path":"1_Pooling"},{"idx":2,"path":"2_Normalize/"}]`))
	if err != nil || !slices.Equal(dirs, []string{"1_Pooling", "2_Normalize"}) {
		t.Errorf("got %v, %v; want [1_Pooling 2_Normalize]", dirs, err)
	}
	for _, bad := range []string{`[{"path":"../x"}]`, `[{"path":"a/../../b"}]`, `{"not": "a list"}`} {
		if _, err := Modules([]byte(bad)); err == nil {
			t.Errorf("Modules(%s): got no error; want it refused", bad)
		}
	}
}

// TestCheckRepo: an API answer whose file names leave the repository, or
// that gives nothing to check a file by, is refused before any download.
func TestCheckRepo(t *testing.T) {
	sha := strings.Repeat("c", 40)
	ok := File{Name: "config.json", Size: 2, BlobID: strings.Repeat("b", 40)}
	tests := []struct {
		name string
		repo Repo
		want string
	}{
		{"good", Repo{SHA: sha, Siblings: []File{ok, {Name: "onnx/model.onnx", Size: 5, LFS: &LFS{SHA256: strings.Repeat("a", 64), Size: 5}}}}, ""},
		{"not a commit", Repo{SHA: "main", Siblings: []File{ok}}, "not a commit id"},
		{"dotdot", Repo{SHA: sha, Siblings: []File{{Name: "../../etc/passwd", Size: 1, BlobID: ok.BlobID}}}, "not a path inside"},
		{"absolute", Repo{SHA: sha, Siblings: []File{{Name: "/etc/passwd", Size: 1, BlobID: ok.BlobID}}}, "not a path inside"},
		{"unclean", Repo{SHA: sha, Siblings: []File{{Name: "a//b", Size: 1, BlobID: ok.BlobID}}}, "not a path inside"},
		{"no digest", Repo{SHA: sha, Siblings: []File{{Name: "config.json", Size: 2}}}, "neither an LFS sha256 nor a blob id"},
		{"LFS size", Repo{SHA: sha, Siblings: []File{{Name: "m.onnx", Size: 5, LFS: &LFS{SHA256: strings.Repeat("a", 64), Size: 6}}}}, "LFS pointer"},
	}
	for _, tt := range tests {
		err := checkRepo(tt.repo, "model org/m")
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: got %v; want no error", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want ErrProtocol saying %q", tt.name, err, tt.want)
		}
	}
}
