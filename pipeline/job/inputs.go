package job

import (
	"context"
	"errors"
	"fmt"

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

// checkQueryInputs refuses rerank query rows in a format rerank does not
// read: an unknown extension, and CSV or TSV (whose fields are all
// strings: no candidate lists, no scores).
func checkQueryInputs(inputs []string) error {
	for _, in := range inputs {
		format, err := corpus.InputFormat(in)
		if err != nil {
			return &ConfigError{err}
		}
		if format != corpus.FormatAuto {
			return &ConfigError{fmt.Errorf("input %s: rerank reads its query rows from Parquet or JSON Lines, not CSV or TSV", in)}
		}
	}
	return nil
}
