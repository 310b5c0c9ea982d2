package tokenize

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPairTemplate: each post-processor's pair layout, read from a whole
// tokenizer.json (NewHF) and from its post-processor alone
// (ReadPairTemplate), as the Rust library lays out encode(a, b).
func TestPairTemplate(t *testing.T) {
	base := `{"version":"1.0","model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"a":1}},"post_processor":%s}`
	a, b := []int32{10, 11}, []int32{20}
	tests := []struct {
		name, post string
		ids, types []int32
		overhead   int
		maxType    int32
	}{
		{"template bert", `{"type":"TemplateProcessing","single":["[CLS]","$A","[SEP]"],"pair":["[CLS]","$A","[SEP]","$B:1","[SEP]:1"],
			"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[101],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[102],"tokens":["[SEP]"]}}}`,
			[]int32{101, 10, 11, 102, 20, 102}, []int32{0, 0, 0, 0, 1, 1}, 3, 1},
		{"template type 0", `{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
			"pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],
			"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[101],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[102],"tokens":["[SEP]"]}}}`,
			[]int32{101, 10, 11, 102, 20, 102}, []int32{0, 0, 0, 0, 0, 0}, 3, 0},
		{"bert", `{"type":"BertProcessing","sep":["[SEP]",102],"cls":["[CLS]",101]}`,
			[]int32{101, 10, 11, 102, 20, 102}, []int32{0, 0, 0, 0, 1, 1}, 3, 1},
		{"roberta", `{"type":"RobertaProcessing","sep":["</s>",2],"cls":["<s>",0],"trim_offsets":true,"add_prefix_space":true}`,
			[]int32{0, 10, 11, 2, 2, 20, 2}, []int32{0, 0, 0, 0, 0, 0, 0}, 4, 0},
		{"none", `null`, []int32{10, 11, 20}, []int32{0, 0, 1}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(base, "%s", tt.post, 1)
			tok, err := NewHF([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			read, err := ReadPairTemplate(path)
			if err != nil {
				t.Fatal(err)
			}
			for src, p := range map[string]PairTemplate{"NewHF": tok.(PairLayout).PairTemplate(), "ReadPairTemplate": read} {
				ids, types := p.Apply(a, b)
				if !slices.Equal(ids, tt.ids) || !slices.Equal(types, tt.types) {
					t.Errorf("%s: ids %v types %v; want %v %v", src, ids, types, tt.ids, tt.types)
				}
				if p.Overhead() != tt.overhead || p.MaxType() != tt.maxType || !p.HasB() {
					t.Errorf("%s: overhead %d, max type %d, has B %t; want %d, %d, true", src, p.Overhead(), p.MaxType(), p.HasB(), tt.overhead, tt.maxType)
				}
			}
		})
	}
	if _, err := ReadPairTemplate(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("ReadPairTemplate of a missing file: no error")
	}
}
