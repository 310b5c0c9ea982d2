package parity

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/synapse-embed/synapse/engine/testenv"
	"github.com/synapse-embed/synapse/model/tokenize"
)

// TestHFParity tokenizes every text with the Go tokenizer.json tokenizer and
// with Hugging Face tokenizers (the npm build fastembed-js uses, run by
// testdata/hf_reference.js), for every tokenizer.json target and every
// combination of AddSpecial and ParseSpecial, and wants identical ids. The
// texts are the corpus sample and its split pieces (as TestWorkerParity's)
// and as many generated texts with the target's special tokens spliced in.
func TestHFParity(t *testing.T) {
	dir, node := testenv.HFTokenizers(t)
	texts := corpusTexts(t)
	for i, tg := range hfTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			tok, err := tokenize.LoadHF(tg.path)
			if err != nil {
				t.Fatalf("LoadHF: %v", err)
			}
			compareHF(t, dir, node, tg.name, tg.path, tok, append(slices.Clip(texts), generated(t, tok, len(texts), uint64(i)+100)...))
		})
	}
}

// compareHF tokenizes every text with tok for every option set and wants
// the ids Hugging Face tokenizers gives for the tokenizer.json at path
// (name in messages); mismatches are reported, and dumped to $envDump.
func compareHF(t *testing.T, dir, node, name, path string, tok tokenize.Tokenizer, all []string) {
	t.Helper()
	var reqs []hfRequest
	for _, text := range all {
		for _, opt := range optionSets {
			res := tok.Tokenize(text, opt)
			reqs = append(reqs, hfRequest{Text: res.Text, AddSpecial: opt.AddSpecial, ParseSpecial: opt.ParseSpecial, got: res.IDs(), res: res})
		}
	}
	want := hfReference(t, dir, node, path, reqs)
	var bad []int
	for k, r := range reqs {
		if !slices.Equal(r.got, want[k]) {
			bad = append(bad, k)
		}
	}
	t.Logf("%d texts, %d comparisons, %d mismatches", len(all), len(reqs), len(bad))
	for n, k := range bad[:min(maxReported, len(bad))] {
		m := mismatch{Vocab: name, Text: reqs[k].Text, AddSpecial: reqs[k].AddSpecial, ParseSpecial: reqs[k].ParseSpecial,
			Go: reqs[k].got, Llama: want[k], res: reqs[k].res}
		t.Errorf("mismatch %d of %d (llama.cpp below means the HF reference):\n%s", n+1, len(bad), describe(tok.Vocab(), m))
	}
	if p := os.Getenv(envDump); p != "" && len(bad) > 0 {
		var ms []mismatch
		for _, k := range bad {
			ms = append(ms, mismatch{Vocab: name, Text: reqs[k].Text, AddSpecial: reqs[k].AddSpecial,
				ParseSpecial: reqs[k].ParseSpecial, Go: reqs[k].got, Llama: want[k]})
		}
		if err := dump(p, ms); err != nil {
			t.Error(err)
		}
	}
}

type hfRequest struct {
	Text         string `json:"text"`
	AddSpecial   bool   `json:"add_special"`
	ParseSpecial bool   `json:"parse_special"`
	got          []int32
	res          tokenize.Result
}

// hfReference runs the reference tokenizer over the requests.
func hfReference(t *testing.T, dir, node, tokenizerJSON string, reqs []hfRequest) [][]int32 {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, r := range reqs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, filepath.Join("testdata", "hf_reference.js"), tokenizerJSON)
	cmd.Env = append(os.Environ(), "SYNAPSE_HF_TOKENIZERS="+dir)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference tokenizer: %v\n%s", err, stderr.String())
	}
	var ids [][]int32
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		var a struct{ IDs []int32 }
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("reference answer %d: %v", len(ids), err)
		}
		ids = append(ids, a.IDs)
	}
	if len(ids) != len(reqs) {
		t.Fatalf("reference answered %d of %d requests", len(ids), len(reqs))
	}
	return ids
}

// hfTarget is a tokenizer.json both tokenizers load.
type hfTarget struct{ name, path string }

// hfTargets are the fixture's tokenizer.json (BERT WordPiece) and
// tokenizer.json files written here from the fixture vocabularies to cover
// the other components: a cased BERT with added tokens of every kind, a
// WordPiece with a sequence of normalizers and pre-tokenizers, an XLM-R
// style Unigram (Precompiled charsmap, Metaspace) and GPT-2 and RoBERTa
// style byte-level BPEs.
func hfTargets(t *testing.T) []hfTarget {
	t.Helper()
	bert := testenv.Fixture(t, "models", "ref-bert-embed-onnx", "tokenizer.json")
	if _, err := os.Stat(bert); err != nil {
		t.Skipf("fixture: %v", err)
	}
	out := []hfTarget{{"ref-bert-embed-onnx", bert}}
	dir := t.TempDir()
	write := func(name string, j map[string]any) {
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, hfTarget{name, p})
	}
	var base map[string]any
	raw, err := os.ReadFile(bert)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	write("bert-cased-added", bertCasedAdded(base))
	write("bert-sequences", bertSequences(base))
	write("unigram-metaspace", unigramJSON(t, testenv.Fixture(t, "vocab", "ggml-vocab-opus-mt-en-ugm.gguf")))
	gpt2 := testenv.Fixture(t, "vocab", "ggml-vocab-gpt-2.gguf")
	write("bytelevel-bpe", bpeJSON(t, gpt2, false))
	write("bytelevel-bpe-prefix-space", bpeJSON(t, gpt2, true))
	return out
}

func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	json.Unmarshal(b, &c)
	return c
}

func added(id int, content string, special, normalized, singleWord, lstrip, rstrip bool) map[string]any {
	return map[string]any{"id": id, "content": content, "special": special, "normalized": normalized,
		"single_word": singleWord, "lstrip": lstrip, "rstrip": rstrip}
}

// bertCasedAdded keeps case and accents and adds tokens: special ones with
// lstrip/rstrip, a single_word one, a normalized one and one the model has.
func bertCasedAdded(base map[string]any) map[string]any {
	j := clone(base)
	j["normalizer"] = map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
		"strip_accents": nil, "lowercase": false}
	toks := j["added_tokens"].([]any)
	n := len(j["model"].(map[string]any)["vocab"].(map[string]any))
	// New special tokens come last: the reference drops special tokens to
	// tokenize with parse_special false, which must not renumber the others.
	toks = append(toks,
		added(n, "the cell", false, false, false, false, false),
		added(n+1, "x", false, false, true, false, false),
		added(n+2, "Naïve", false, true, false, false, false),
		added(1996, "the", false, false, true, true, false),
		added(n+3, "<ent>", true, false, false, true, true),
		added(n+4, "<sep/>", true, false, false, false, true))
	j["added_tokens"] = toks
	return j
}

// bertSequences runs WordPiece behind sequences of normalizers and
// pre-tokenizers.
func bertSequences(base map[string]any) map[string]any {
	j := clone(base)
	j["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
		map[string]any{"type": "NFKD"},
		map[string]any{"type": "StripAccents"},
		map[string]any{"type": "Lowercase"},
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": "``"}, "content": "\""},
		map[string]any{"type": "Strip", "strip_left": true, "strip_right": true},
	}}
	j["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Whitespace"},
		map[string]any{"type": "Digits", "individual_digits": true},
		map[string]any{"type": "Punctuation", "behavior": "MergedWithPrevious"},
	}}
	return j
}

// unigramJSON writes an XLM-R style tokenizer.json for a SentencePiece
// Unigram vocabulary: Precompiled charsmap and a collapse of repeated
// spaces, Metaspace, <s> $A </s>.
func unigramJSON(t *testing.T, gguf string) map[string]any {
	tok, err := tokenize.Load(gguf)
	if err != nil {
		t.Fatal(err)
	}
	v := tok.Vocab()
	vocab := make([]any, len(v.Tokens))
	var added []any
	for i, p := range v.Tokens {
		vocab[i] = []any{p, float64(v.Scores[i])}
		if v.Attrs[i] == tokenize.TokenControl || v.Attrs[i] == tokenize.TokenUnknown {
			added = append(added, map[string]any{"id": i, "content": p, "special": true, "normalized": false,
				"single_word": false, "lstrip": false, "rstrip": false})
		}
	}
	bos, eos := v.Tokens[v.BOS], v.Tokens[v.EOS]
	return map[string]any{
		"version": "1.0", "added_tokens": added,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Precompiled", "precompiled_charsmap": base64.StdEncoding.EncodeToString(v.PrecompiledCharsmap)},
			map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " {2,}"}, "content": " "},
		}},
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": []any{special(bos, 0), sequence("A", 0), special(eos, 0)},
			"pair":   []any{special(bos, 0), sequence("A", 0), special(eos, 0), special(eos, 0), sequence("B", 0), special(eos, 0)},
			"special_tokens": map[string]any{
				bos: map[string]any{"id": bos, "ids": []int32{v.BOS}, "tokens": []string{bos}},
				eos: map[string]any{"id": eos, "ids": []int32{v.EOS}, "tokens": []string{eos}},
			}},
		"model": map[string]any{"type": "Unigram", "unk_id": v.UNK, "vocab": vocab, "byte_fallback": false},
	}
}

func special(id string, typ int) map[string]any {
	return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": typ}}
}

func sequence(id string, typ int) map[string]any {
	return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
}

// bpeJSON writes a GPT-2 style (ByteLevel, no special tokens added) or, with
// prefixSpace, RoBERTa style (ByteLevel with a prefix space,
// RobertaProcessing) tokenizer.json for a byte-level BPE vocabulary.
func bpeJSON(t *testing.T, gguf string, prefixSpace bool) map[string]any {
	tok, err := tokenize.Load(gguf)
	if err != nil {
		t.Fatal(err)
	}
	v := tok.Vocab()
	vocab := map[string]int{}
	var added []any
	for i, p := range v.Tokens {
		vocab[p] = i
		if v.Attrs[i] == tokenize.TokenControl {
			added = append(added, map[string]any{"id": i, "content": p, "special": true, "normalized": false,
				"single_word": false, "lstrip": false, "rstrip": false})
		}
	}
	post := any(map[string]any{"type": "ByteLevel", "add_prefix_space": prefixSpace, "trim_offsets": true, "use_regex": true})
	if prefixSpace {
		eot := v.Tokens[v.EOS]
		post = map[string]any{"type": "RobertaProcessing", "sep": []any{eot, v.EOS}, "cls": []any{eot, v.EOS},
			"trim_offsets": true, "add_prefix_space": true}
	}
	return map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": prefixSpace, "trim_offsets": true, "use_regex": true},
		"post_processor": post,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": v.Merges},
	}
}
