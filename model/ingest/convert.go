package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/synapse-embed/synapse/model/artifact"
	"github.com/synapse-embed/synapse/model/convert"
	"github.com/synapse-embed/synapse/model/modelcache"
)

// addConverted converts a Hugging Face safetensors directory (package
// convert) into the store: the converted model (an ONNX directory, or a
// GGUF file with Options.Format gguf) is opened as any model is and a
// worker LOADs it and runs one request in the staging directory, before
// the entry is committed. A directory converted before
// (same source files, same converter) is returned with existed true.
func (s *session) addConverted(ctx context.Context, path, name string) (modelcache.Entry, bool, error) {
	check := func(ctx context.Context, file string) (int, error) {
		a, err := artifact.OpenWith(file, artifact.Options{Store: s.o.Store})
		if err != nil {
			return 0, fmt.Errorf("add %s: %w: the converted model: %w", path, ErrInvalid, err)
		}
		if err := checkScoring(path, a); err != nil {
			return 0, err
		}
		kind := kindOf(a)
		s.o.progress("validating the conversion of %s (%s) in a worker", path, kind)
		loaded, err := s.validate(ctx, a.Path, a, kind)
		if err != nil {
			return 0, fmt.Errorf("add %s: %w", path, err)
		}
		return loaded.Dims, nil
	}
	res, err := convert.Cached(ctx, s.o.Store, path, convert.Options{Format: s.o.Format, Name: name, Version: s.o.Version,
		Check: check, Progress: s.o.progress})
	if errors.Is(err, convert.ErrRefused) {
		return modelcache.Entry{}, false, fmt.Errorf("add: %w", err)
	}
	if err != nil {
		return modelcache.Entry{}, false, err
	}
	return res.Entry, res.Reused, nil
}
