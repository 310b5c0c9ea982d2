package hfmodel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// MaxSidecarBytes bounds what Sidecars returns: a model directory's files
// besides its graphs are configs, vocabularies and small module weights.
const MaxSidecarBytes = 1 << 30

// Sidecars returns the files a copy of the model needs besides its graph,
// keyed by their path in the copy (relative, slash-separated; the graph
// goes at its top as model.onnx) with the path each is read from:
// tokenizer.json and config.json; the model directory's other top-level
// .json, .txt and .model files (tokenizer_config.json, vocab.txt,
// modules.json, sentence_bert_config.json, …); and every file, .onnx ones
// excepted, of the sentence-transformers module directories modules.json
// names (1_Pooling/, 2_Dense/, …). Symbolic links are followed (a Hub cache
// snapshot is made of them); a module path leaving the directory is an
// error, as is more than MaxSidecarBytes in all.
func (f Files) Sidecars() (map[string]string, error) {
	out := map[string]string{}
	if f.Tokenizer != "" {
		out["tokenizer.json"] = f.Tokenizer
	}
	if f.Config != "" {
		out["config.json"] = f.Config
	}
	des, err := os.ReadDir(f.Root)
	if err != nil {
		return nil, fmt.Errorf("hfmodel: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		switch strings.ToLower(filepath.Ext(name)) {
		case ".json", ".txt", ".model":
			if _, ok := out[name]; !ok && regular(filepath.Join(f.Root, name)) {
				out[name] = filepath.Join(f.Root, name)
			}
		}
	}
	if err := f.moduleFiles(out); err != nil {
		return nil, err
	}
	var total int64
	for _, p := range out {
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	if total > MaxSidecarBytes {
		return nil, fmt.Errorf("hfmodel: %s: %w: %d bytes of files besides the graph; want at most %d", f.Root, ErrLayout, total, int64(MaxSidecarBytes))
	}
	return out, nil
}

// moduleFiles adds the files of the module directories modules.json names.
func (f Files) moduleFiles(out map[string]string) error {
	path := filepath.Join(f.Root, "modules.json")
	b, err := readlimit.ReadFile(path, readlimit.Config)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no modules.json: nothing more
	}
	if err != nil {
		return fmt.Errorf("hfmodel: %w", err)
	}
	var mods []struct{ Path string }
	if err := readlimit.UnmarshalJSON(b, &mods); err != nil {
		return fmt.Errorf("hfmodel: %s: %w", path, err)
	}
	var dirs []string
	for _, m := range mods {
		p := filepath.Clean(filepath.FromSlash(m.Path))
		if m.Path == "" || p == "." {
			continue
		}
		if !filepath.IsLocal(p) {
			return fmt.Errorf("hfmodel: %s: %w: module path %q leaves the model directory", path, ErrLayout, m.Path)
		}
		dirs = append(dirs, p)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		root := filepath.Join(f.Root, d)
		err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.EqualFold(filepath.Ext(p), ".onnx") || !regular(p) {
				return nil
			}
			rel, err := filepath.Rel(f.Root, p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = p
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("hfmodel: module %s: %w", d, err)
		}
	}
	return nil
}

// regular reports a regular file, following symbolic links.
func regular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
