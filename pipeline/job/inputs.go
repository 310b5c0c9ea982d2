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
	return checkFields(o.Inputs, corpus.DocNeeds(o.Read))
}

// checkFields is corpus.CheckFields as a ConfigError that names the flag.
func checkFields(inputs []string, need []corpus.Need) error {
	err := corpus.CheckFields(context.Background(), inputs, need)
	var fe *corpus.FieldError
	switch {
	case errors.As(err, &fe):
		return configErrorf("%v: use --%s", fe, fe.Option)
	case err != nil:
		return &ConfigError{err}
	}
	return nil
}

// checkQueryInputs refuses rerank query rows in a format rerank does not
// read — an unknown extension, CSV or TSV (whose fields are all strings:
// no candidate lists, no scores), Arrow IPC — and inputs without the query id or
// query field (corpus.QueryOptions.Needs).
func checkQueryInputs(inputs []string, q corpus.QueryOptions) error {
	for _, in := range inputs {
		format, err := corpus.InputFormat(in)
		if err != nil {
			return &ConfigError{err}
		}
		if format != corpus.FormatAuto {
			return &ConfigError{fmt.Errorf("input %s: rerank reads its query rows from Parquet or JSON Lines, not CSV, TSV or Arrow IPC", in)}
		}
	}
	return checkFields(inputs, q.Needs())
}
