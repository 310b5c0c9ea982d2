package vector

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Metadata keys of the vector settings in an embedding output.
const (
	MetaSettingsDigest = "synapse.settings_digest" // "sha256:HEX" of MetaSettings' value
	MetaSettings       = "synapse.settings"        // Settings as JSON
)

// Settings are what decides a document's vectors besides its text:
// two outputs with the same settings digest give a document of the same
// text the same chunks and (to the engine's rounding) the same vectors, so
// an incremental run may copy them. The batch size, worker count, ids and
// inputs are not in it: they do not change a vector.
type Settings struct {
	ModelDigest string   `json:"model_digest"`
	TextFields  []string `json:"text_fields"`
	Prefix      string   `json:"prefix"`
	ChunkTokens int      `json:"chunk_tokens"`
	Overlap     int      `json:"chunk_overlap"`
	// Truncate: one chunk a document, its first window (omitempty keeps
	// the digests of outputs before it).
	Truncate  bool   `json:"truncate,omitempty"`
	Pooling   string `json:"pooling"`
	Normalize bool   `json:"normalize"`
	Dims      int    `json:"dims"`
	// Dtype is the embedding column's dtype, "" for float32 (so that the
	// settings of float32 outputs are those of synapse before dtypes);
	// Ranges the digest of the int8/uint8 ranges (vector.Ranges.Digest).
	Dtype  string `json:"dtype,omitempty"`
	Ranges string `json:"ranges,omitempty"`
	// Modules are the sentence-transformers modules applied after the
	// pooling (Dense weights by digest, Normalize), "" for none: a changed
	// Dense module changes the vectors though the graph's digest does not.
	// (omitempty keeps the records of outputs without modules readable.)
	Modules string `json:"modules,omitempty"`
	// Output is the kind of vectors when it is not one pooled vector per
	// chunk ("late-chunking": chunks pooled from their window's token
	// states; "sparse": SPLADE vectors over the vocabulary; "tokens" and
	// "tokens-query": ColBERT token vectors of documents and of queries);
	// omitempty keeps the digests of outputs before it.
	Output string `json:"output,omitempty"`
	// SparseTopK is a sparse output's --sparse-top-k (0: every non-zero
	// weight kept); omitempty keeps the digests of outputs before it.
	SparseTopK int `json:"sparse_top_k,omitempty"`
	// Tokens is a multi-vector output's query and document handling (the
	// markers, lengths, expansion and skiplist: hfmodel.MultiVector), which
	// change its vectors though the graph does not; omitempty keeps the
	// digests of outputs before it.
	Tokens string `json:"tokens,omitempty"`
}

// JSON is the settings' canonical JSON (fields in declaration order).
func (s Settings) JSON() string {
	b, _ := json.Marshal(s) // plain strings, ints and bools: cannot fail
	return string(b)
}

// Digest is "sha256:" and the hex SHA-256 of JSON.
func (s Settings) Digest() string {
	sum := sha256.Sum256([]byte(s.JSON()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Metadata is the settings' schema metadata: the digest and the readable record.
func (s Settings) Metadata() map[string]string {
	return map[string]string{MetaSettingsDigest: s.Digest(), MetaSettings: s.JSON()}
}

// SettingsFromMetadata reads the settings an embedding output recorded; an
// output without them (from a synapse before doc hashes) or whose record
// does not match its digest is an error.
func SettingsFromMetadata(get func(key string) (string, bool)) (Settings, error) {
	var s Settings
	raw, ok := get(MetaSettings)
	digest, ok2 := get(MetaSettingsDigest)
	if !ok || !ok2 {
		return s, fmt.Errorf("no %s in its schema metadata: not an embedding output of this synapse version (re-run it in full once)", MetaSettingsDigest)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%s: %w", MetaSettings, err)
	}
	if s.JSON() != raw || s.Digest() != digest {
		return s, fmt.Errorf("%s %s does not match its %s record", MetaSettingsDigest, digest, MetaSettings)
	}
	return s, nil
}

// Diff names the first setting that differs between s (this run) and
// prev, "" when none does; the output kind first, which decides the
// others' meaning.
func (s Settings) Diff(prev Settings) string {
	if s.Output != prev.Output {
		return fmt.Sprintf("output: previous %s, this run %s", show(prev.Output), show(s.Output))
	}
	a, b := reflect.ValueOf(s), reflect.ValueOf(prev)
	t := a.Type()
	for i := range t.NumField() {
		x, y := a.Field(i).Interface(), b.Field(i).Interface()
		if xs, ok := x.([]string); ok {
			if slices.Equal(xs, y.([]string)) {
				continue
			}
		} else if x == y {
			continue
		}
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if name == "dtype" { // "" is float32
			x, y = cmp.Or(x.(string), "float32"), cmp.Or(y.(string), "float32")
		}
		return fmt.Sprintf("%s: previous %s, this run %s", name, show(y), show(x))
	}
	return ""
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
