package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/synapse-embed/synapse/model/hfmodel"
)

// Sidecars are the files the converted model directory carries besides its
// graph, as hfmodel.Files.Sidecars lists them for an ONNX directory
// (tokenizer.json, config.json, modules.json, sentence_bert_config.json,
// 1_Pooling/, 2_Dense/, …), so that it tokenizes, truncates, pools and
// normalizes as the source directory says; the shard index is left out.
func (s *Source) Sidecars() (map[string]string, error) {
	f := hfmodel.Files{Root: s.Dir, Config: filepath.Join(s.Dir, "config.json")}
	if p := filepath.Join(s.Dir, "tokenizer.json"); isFile(p) {
		f.Tokenizer = p
	}
	out, err := f.Sidecars()
	if err != nil {
		return nil, fmt.Errorf("convert: %w: %w", ErrRefused, err)
	}
	if f.Tokenizer == "" {
		return nil, fmt.Errorf("convert: %s: %w: no tokenizer.json (synapse tokenizes with the model's own tokenizer.json)", s.Dir, ErrRefused)
	}
	delete(out, indexFile)
	return out, nil
}

// WriteONNX converts the source and writes its graph to path.
func (s *Source) WriteONNX(path string) error {
	if s.arch.decoder != "" {
		return fmt.Errorf("convert: %s: %w: %s (a %s decoder) converts to GGUF, for llama.cpp (the default for it; not --format onnx)", s.Dir, ErrRefused, s.Arch, s.arch.decoder)
	}
	m, err := s.Graph()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, m.Marshal(), 0o644); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}

// Key is the source's cache key, "sha256:<hex>" over the converter's
// version, the format, and the digests of the weight files and of every
// file the converted directory carries (digest gives a file's; the model
// cache's Store.Digest remembers a big file's). A changed weight, config
// or tokenizer file, or a new converter, is a new key.
func (s *Source) Key(format string, digest func(string) (int64, string, error)) (string, error) {
	side, err := s.Sidecars()
	if err != nil {
		return "", err
	}
	files := map[string]string{}
	for _, p := range s.Weights {
		files[filepath.Base(p)] = p
	}
	for rel, p := range side {
		files[rel] = p
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "synapse-convert %d %s\n", Version, format)
	for _, n := range names {
		_, d, err := digest(files[n])
		if err != nil {
			return "", fmt.Errorf("convert: %w", err)
		}
		fmt.Fprintf(h, "%s %s\n", n, d)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
