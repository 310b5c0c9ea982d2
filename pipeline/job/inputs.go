package job

import (
	"context"
	"errors"

	"github.com/synapse-embed/synapse/io/corpus"
)

// checkDocInputs refuses, before any work, document inputs the run cannot
// read a single row of: an extension synapse does not read, and a text or
// id field the file does not have (corpus.CheckFields: a Parquet, CSV or
// TSV file's columns, the first rows of a JSON Lines file), named with
// the flag that sets it.
func checkDocInputs(o *Options) error {
	err := corpus.CheckFields(context.Background(), o.Inputs, o.Read)
	var fe *corpus.FieldError
	switch {
	case errors.As(err, &fe):
		return configErrorf("%v: use --%s-field", fe, fe.Role)
	case err != nil:
		return &ConfigError{err}
	}
	return nil
}
