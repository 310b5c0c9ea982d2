package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/synapse-embed/synapse/io/output"
	"github.com/synapse-embed/synapse/io/vector"
)

// metaFlags are the output metadata keys a user sets with an option, by
// the option's name. Keys that are not here (the version, the model file)
// are named as they are.
var metaFlags = map[string]string{
	"synapse.batch_tokens":  "--batch-tokens",
	"synapse.chunk_tokens":  "--chunk-tokens",
	"synapse.chunk_overlap": "--overlap",
	"synapse.pooling":       "--pooling",
	"synapse.normalize":     "--no-normalize",
	"synapse.dims":          "--dims",
	"synapse.dtype":         "--dtype",
	"synapse.with_text":     "--with-text",
	"synapse.text_fields":   "--text-field",
	"synapse.prefix":        "--prefix",
	"synapse.prompt_name":   "--prompt-name",
	"synapse.id_field":      "--id-field",
	"synapse.skip_empty":    "--skip-empty",
	"synapse.shard":         "--shard",
	"synapse.model_digest":  "-m (the model's digest)",
	"synapse.inputs":        "the inputs",
	vector.MetaRanges:       "the int8/uint8 ranges (--calibration)",
	vector.MetaCalibration:  "the int8/uint8 ranges' source (--calibration)",
}

// settingsFlags are the vector settings' fields (their JSON names) by the
// option that sets them.
var settingsFlags = map[string]string{
	"model_digest":  "-m (the model's digest)",
	"text_fields":   "--text-field",
	"prefix":        "--prefix or --prompt-name",
	"chunk_tokens":  "--chunk-tokens",
	"chunk_overlap": "--overlap",
	"truncate":      "--truncate",
	"pooling":       "--pooling",
	"normalize":     "--no-normalize",
	"dims":          "--dims",
	"dtype":         "--dtype",
	"ranges":        "the int8/uint8 ranges (--calibration)",
	"modules":       "the model's sentence-transformers modules",
	"output":        "--late-chunking or --vectors",
	"sparse_top_k":  "--sparse-top-k",
	"tokens":        "the model's ColBERT settings (--vectors tokens)",
}

// negated are the options whose recorded value is the opposite of the flag.
var negated = map[string]bool{"--no-normalize": true}

// resumeMismatch turns a refused resume into a message naming the options
// that differ from the interrupted run's, each once; err is returned as it
// is when it is no *output.MismatchError.
func resumeMismatch(err error) error {
	var me *output.MismatchError
	if !errors.As(err, &me) {
		return err
	}
	var lines []string
	seen := map[string]bool{}
	add := func(flag, line string) {
		if !seen[flag] {
			seen[flag] = true
			lines = append(lines, line)
		}
	}
	for _, d := range me.Diffs {
		switch d.Key {
		case vector.MetaSettingsDigest, "synapse.model", "synapse.model_name":
			continue // said by the settings and the model's digest
		case vector.MetaSettings:
			for _, sd := range settingsDiffs(d) {
				add(sd[0], sd[1])
			}
			continue
		case "schema":
			if len(me.Diffs) > 1 {
				continue // the columns follow from the options named
			}
		}
		flag, ok := metaFlags[d.Key]
		if !ok {
			add(d.Key, d.String())
			continue
		}
		add(flag, optionChange(flag, d.Was, d.Now, d.InWas, d.InNow))
	}
	return fmt.Errorf("%w: %s", output.ErrResumeMismatch, strings.Join(lines, "; "))
}

// settingsDiffs are the fields of two vector settings records that differ,
// as (option, sentence) pairs; a record that does not read is one difference.
func settingsDiffs(d output.Mismatch) [][2]string {
	var was, now map[string]any
	if json.Unmarshal([]byte(d.Was), &was) != nil || json.Unmarshal([]byte(d.Now), &now) != nil {
		return [][2]string{{d.Key, d.String()}}
	}
	var out [][2]string
	for _, k := range output.UnionKeys(was, now) {
		a, inWas := was[k]
		b, inNow := now[k]
		if inWas == inNow && reflect.DeepEqual(a, b) {
			continue
		}
		flag, ok := settingsFlags[k]
		if !ok {
			flag = "the vector setting " + k
		}
		if k == "dtype" { // "" is float32
			a, b, inWas, inNow = cmpOr(a, "float32"), cmpOr(b, "float32"), true, true
		}
		out = append(out, [2]string{flag, optionChange(flag, showValue(a), showValue(b), inWas, inNow)})
	}
	return out
}

// showValue is a settings value as a user would give it.
func showValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// optionChange says how an option differs: "--truncate was set in the
// interrupted run and is not now", "--dtype was int8 and is binary now".
func optionChange(flag, was, now string, inWas, inNow bool) string {
	isBool := func(v string) bool { return v == "true" || v == "false" }
	wb, nb := was == "true", now == "true"
	if (isBool(was) || !inWas) && (isBool(now) || !inNow) && strings.HasPrefix(flag, "--") && !strings.Contains(flag, " ") {
		if negated[flag] {
			wb, nb = inWas && !wb, inNow && !nb
		} else {
			wb, nb = inWas && wb, inNow && nb
		}
		switch {
		case wb && !nb:
			return flag + " was set in the interrupted run and is not now"
		case !wb && nb:
			return flag + " was not set in the interrupted run and is now"
		}
	}
	const long = 80
	switch {
	case !inWas || was == "":
		return fmt.Sprintf("%s was not set in the interrupted run and is %s now", flag, clip(now, long))
	case !inNow || now == "":
		return fmt.Sprintf("%s was %s in the interrupted run and is not set now", flag, clip(was, long))
	}
	return fmt.Sprintf("%s was %s in the interrupted run and is %s now", flag, clip(was, long), clip(now, long))
}

// clip shortens a long value to its first n bytes and an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// cmpOr is v, or def when v is empty or missing.
func cmpOr(v any, def string) any {
	if s, _ := v.(string); s == "" {
		return def
	}
	return v
}
