package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// ErrNothingToLoad marks a repository without weights synapse loads: a
// pickle only (pytorch_model.bin), no ONNX export when one was asked for,
// or no weights at all.
var ErrNothingToLoad = errors.New("nothing synapse can load")

// ModulesFile lists a sentence-transformers model's modules.
const ModulesFile = "modules.json"

// loadFiles are the top-level files a load reads, taken when the
// repository has them.
var loadFiles = []string{
	"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
	ModulesFile, "sentence_bert_config.json", "config_sentence_transformers.json",
}

const pickle = "pytorch_model.bin"

// Modules reads modules.json and returns its modules' directories (a
// Pooling, Dense or Normalize module's "path"); the Transformer at the
// repository's root ("") is left out.
func Modules(b []byte) ([]string, error) {
	var mods []struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(b, &mods); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", ModulesFile, ErrBadRepo, err)
	}
	var dirs []string
	for _, m := range mods {
		p := strings.Trim(m.Path, "/")
		if p == "" {
			continue
		}
		if path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." {
			return nil, fmt.Errorf("%s: %w: module path %q is not a directory inside the repository", ModulesFile, ErrBadRepo, m.Path)
		}
		dirs = append(dirs, p)
	}
	return dirs, nil
}

// Select chooses the files of repo a load needs: the top-level configs
// and tokenizer files it has (loadFiles), the files of the module
// directories modules names (their model.safetensors rather than a
// pytorch_model.bin), and the weights: model.safetensors (or its shards and
// index), or with onnx the ONNX export (onnx/model.onnx, else model.onnx,
// with its external data). A pickle is never chosen; a repository whose
// weights are only a pickle, or that lacks what was asked for, is
// ErrNothingToLoad saying what it has.
func Select(repo Repo, modules []string, onnx bool) ([]File, error) {
	byName := map[string]File{}
	for _, f := range repo.Siblings {
		byName[f.Name] = f
	}
	var out []File
	for _, n := range loadFiles {
		if f, ok := byName[n]; ok {
			out = append(out, f)
		}
	}
	for _, m := range modules {
		files, err := moduleFiles(repo, m, byName)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	weights, err := chooseWeights(repo, byName, onnx)
	if err != nil {
		return nil, err
	}
	return append(out, weights...), nil
}

// moduleFiles are the files under a module's directory, its weights as
// safetensors.
func moduleFiles(repo Repo, dir string, byName map[string]File) ([]File, error) {
	var out []File
	for _, f := range repo.Siblings {
		if !strings.HasPrefix(f.Name, dir+"/") || path.Base(f.Name) == pickle {
			continue
		}
		out = append(out, f)
	}
	if _, bin := byName[dir+"/"+pickle]; bin {
		if _, st := byName[dir+"/model.safetensors"]; !st {
			return nil, fmt.Errorf("%s@%s: %w: module %s has its weights only as %s/%s, a pickle, which synapse does not load",
				repo.ID, repo.SHA, ErrNothingToLoad, dir, dir, pickle)
		}
	}
	return out, nil
}

// chooseWeights picks the weight files, or says why there are none.
func chooseWeights(repo Repo, byName map[string]File, onnx bool) ([]File, error) {
	has := func(n string) bool { _, ok := byName[n]; return ok }
	graph := ""
	for _, g := range []string{"onnx/model.onnx", "model.onnx"} {
		if has(g) {
			graph = g
			break
		}
	}
	at := repo.ID + "@" + repo.SHA
	if onnx {
		if graph == "" {
			hint := ""
			if has("model.safetensors") {
				hint = "; pull it without --onnx for its model.safetensors"
			}
			return nil, fmt.Errorf("%s: %w: no ONNX export (onnx/model.onnx nor model.onnx)%s", at, ErrNothingToLoad, hint)
		}
		out := []File{byName[graph]}
		for _, data := range []string{graph + "_data", graph + ".data"} {
			if has(data) {
				out = append(out, byName[data])
			}
		}
		return out, nil
	}
	if has("model.safetensors") {
		return []File{byName["model.safetensors"]}, nil
	}
	if has("model.safetensors.index.json") {
		out := []File{byName["model.safetensors.index.json"]}
		for _, f := range repo.Siblings {
			if !strings.Contains(f.Name, "/") && strings.HasPrefix(f.Name, "model-") && strings.HasSuffix(f.Name, ".safetensors") {
				out = append(out, f)
			}
		}
		return out, nil
	}
	return nil, noWeights(repo, at, graph, has)
}

// noWeights says what a repository without model.safetensors has instead.
func noWeights(repo Repo, at, graph string, has func(string) bool) error {
	hint := "; it has no ONNX export either"
	if graph != "" {
		hint = "; pull its ONNX export with --onnx"
	}
	if has(pickle) || has(pickle+".index.json") {
		return fmt.Errorf("%s: %w: its weights are only %s, a pickle, which synapse does not load (unpickling runs code)%s",
			at, ErrNothingToLoad, pickle, hint)
	}
	var ggufs []string
	for _, f := range repo.Siblings {
		if strings.HasSuffix(strings.ToLower(f.Name), ".gguf") {
			ggufs = append(ggufs, f.Name)
		}
	}
	if len(ggufs) > 0 {
		sort.Strings(ggufs)
		return fmt.Errorf("%s: %w: no model.safetensors; its GGUF files (%s) are run as they are: download one and pass -m FILE.gguf",
			at, ErrNothingToLoad, strings.Join(ggufs[:min(len(ggufs), 5)], ", "))
	}
	if graph != "" {
		return fmt.Errorf("%s: %w: no model.safetensors%s", at, ErrNothingToLoad, hint)
	}
	return fmt.Errorf("%s: %w: no model.safetensors, onnx/model.onnx nor %s among its %d files", at, ErrNothingToLoad, pickle, len(repo.Siblings))
}
