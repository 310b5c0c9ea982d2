package gguf

import (
	"fmt"
	"sort"
	"strings"
)

// FileType is general.file_type, llama.cpp's llama_ftype: the type most of a
// model's weight matrices are stored in, and what llama.cpp's quantizer is
// asked to produce.
type FileType int64

// File types, numbered as llama.h's enum llama_ftype.
const (
	FileTypeF32    FileType = 0
	FileTypeF16    FileType = 1
	FileTypeQ4_0   FileType = 2
	FileTypeQ4_1   FileType = 3
	FileTypeQ8_0   FileType = 7
	FileTypeQ5_0   FileType = 8
	FileTypeQ5_1   FileType = 9
	FileTypeQ2_K   FileType = 10
	FileTypeQ3_K_S FileType = 11
	FileTypeQ3_K_M FileType = 12
	FileTypeQ3_K_L FileType = 13
	FileTypeQ4_K_S FileType = 14
	FileTypeQ4_K_M FileType = 15
	FileTypeQ5_K_S FileType = 16
	FileTypeQ5_K_M FileType = 17
	FileTypeQ6_K   FileType = 18
	FileTypeBF16   FileType = 32
)

var fileTypeNames = map[FileType]string{
	FileTypeF32: "F32", FileTypeF16: "F16", FileTypeBF16: "BF16",
	FileTypeQ4_0: "Q4_0", FileTypeQ4_1: "Q4_1", FileTypeQ5_0: "Q5_0", FileTypeQ5_1: "Q5_1", FileTypeQ8_0: "Q8_0",
	FileTypeQ2_K: "Q2_K", FileTypeQ3_K_S: "Q3_K_S", FileTypeQ3_K_M: "Q3_K_M", FileTypeQ3_K_L: "Q3_K_L",
	FileTypeQ4_K_S: "Q4_K_S", FileTypeQ4_K_M: "Q4_K_M", FileTypeQ5_K_S: "Q5_K_S", FileTypeQ5_K_M: "Q5_K_M",
	FileTypeQ6_K: "Q6_K",
}

// String names t as llama.cpp's quantize tool does ("Q8_0", "Q4_K_M", "F16"),
// or "file_type(N)" for a type this package does not name.
func (t FileType) String() string {
	if n, ok := fileTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("file_type(%d)", int64(t))
}

// LlamaName is the llama_ftype constant's name without its LLAMA_FTYPE_
// prefix ("MOSTLY_Q8_0", "ALL_F32"), "" for a type this package does not name.
func (t FileType) LlamaName() string {
	n, ok := fileTypeNames[t]
	switch {
	case !ok:
		return ""
	case t == FileTypeF32:
		return "ALL_F32"
	}
	return "MOSTLY_" + n
}

// ParseFileType reads a file type name, in any case: "q8_0", "Q4_K_M", "f16".
func ParseFileType(s string) (FileType, error) {
	for t, n := range fileTypeNames {
		if strings.EqualFold(s, n) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("gguf: file type %q: want one of %s", s, strings.Join(FileTypeNames(), ", "))
}

// FileTypeNames lists the names ParseFileType accepts, in lower case and
// llama_ftype order.
func FileTypeNames() []string {
	types := make([]FileType, 0, len(fileTypeNames))
	for t := range fileTypeNames {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = strings.ToLower(fileTypeNames[t])
	}
	return names
}

// FileType returns general.file_type, if the file sets it.
func (f *File) FileType() (FileType, bool) {
	n, ok := f.Int("general.file_type")
	return FileType(n), ok
}
