package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/hfmodel"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// addONNX adds an ONNX model (a model directory or a .onnx file): its graph
// goes into the entry as model.onnx, hard-linked or copied, its digest the
// entry's, and the directory's other files (hfmodel.Files.Sidecars) are
// copied beside it, so that the entry is a model directory of its own (the
// same graph with other files beside it is an entry of its own). A
// worker then LOADs it from the entry and runs one request, as for GGUF.
func (s *session) addONNX(ctx context.Context, path, name string) (modelcache.Entry, bool, error) {
	st := s.o.Store
	s.o.progress("checking %s", path)
	a, files, err := checkONNX(path)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	sidecars, err := files.Sidecars()
	if err != nil {
		return modelcache.Entry{}, false, fmt.Errorf("add %s: %w: %w", path, ErrInvalid, err)
	}
	key, err := modelcache.KeyOf(files.Graph)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	want, err := modelcache.HashFiles(sidecars)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	if e, ok, err := st.GetFiles(a.Digest, want); ok || err != nil {
		return e, ok, err
	}
	if name, err = s.pickName(a, path, name); err != nil {
		return modelcache.Entry{}, false, err
	}
	unlock, err := st.LockKey(ctx, a.Digest, func() { s.o.progress("waiting for another synapse process adding this model") })
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer unlock()
	if e, ok, err := st.GetFiles(a.Digest, want); ok || err != nil {
		return e, ok, err
	}
	stg, err := st.Stage()
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	defer stg.Abort()
	stored, err := stg.PutAs(files.Graph, modelcache.ONNXFile, key, a.Digest)
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	if err := stg.CopyIn(sidecars); err != nil {
		return modelcache.Entry{}, false, err
	}
	kind := kindOf(a)
	s.o.progress("validating %s (%s) in a worker", path, kind)
	loaded, err := s.validate(ctx, stg.Path(modelcache.ONNXFile), a, kind)
	if err != nil {
		return modelcache.Entry{}, false, fmt.Errorf("add %s: %w", path, err)
	}
	e := describe(a, kind, loaded.Dims)
	e.Name, e.SourcePath, e.Stored, e.SynapseVersion = name, key.Path, stored, s.o.Version
	return stg.Commit(e)
}

// checkONNX opens an ONNX model in the module (graph, tokenizer.json,
// config) and refuses one whose weights live in external data files, which
// its digest would not cover.
func checkONNX(path string) (*artifact.Artifact, hfmodel.Files, error) {
	a, err := artifact.OpenWith(path, artifact.Options{})
	if errors.Is(err, artifact.ErrInvalid) {
		return nil, hfmodel.Files{}, fmt.Errorf("add: %w (%w)", ErrInvalid, err)
	}
	if err != nil {
		return nil, hfmodel.Files{}, fmt.Errorf("add: %w", err)
	}
	if a.ONNX.ExternalData {
		return nil, hfmodel.Files{}, fmt.Errorf("add %s: %w: its weights are in external data files, which the digest of %s does not cover; the model cache takes self-contained graphs", path, ErrInvalid, a.Path)
	}
	if err := checkScoring(path, a); err != nil {
		return nil, hfmodel.Files{}, err
	}
	files, err := hfmodel.Resolve(path)
	if err != nil {
		return nil, hfmodel.Files{}, fmt.Errorf("add %s: %w: %w", path, ErrInvalid, err)
	}
	return a, files, nil
}
