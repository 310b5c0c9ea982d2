#!/usr/bin/env python3
"""Random-weight static models and their reference vectors (a test reference only).

Writes into --out (cli/testdata/static, committed; cli's TestEmbedStatic reads it):

  m2v-f32/       model2vec's StaticModel(...).save_pretrained: float32
                 embeddings, normalize true (its modules.json names
                 StaticEmbedding at "." and Normalize)
  m2v-weighted/  float16 embeddings of fewer rows than tokens, with per-token
                 weights and a token mapping (model2vec's vocabulary
                 quantization), normalize false
  m2v-int8/      int8 embeddings (model2vec's quantize_to="int8")
  st-static/     sentence-transformers' StaticEmbedding layout as its save()
                 writes it: modules.json, 0_StaticEmbedding/{model.safetensors
                 (embedding.weight), tokenizer.json}, 1_Normalize/
  reference.json the texts and, per model, each text's vector

The Model2Vec vectors are model2vec's StaticModel.encode. The StaticEmbedding
ones are its forward pass written out in numpy (nn.EmbeddingBag's mean over
the ids of tokenizer.encode_batch(texts, add_special_tokens=False), then
Normalize), because sentence-transformers needs torch, whose wheels are too
large for this machine; the layout is the one StaticEmbedding.save writes.
With --real DIR (a Model2Vec directory fetched by make real-models, e.g.
.cache/models/potion-tokenlearn-int8) it writes instead, into --out
(model/convert/testdata/reference), that model's reference over the first
--count SciFact documents in reference.py's format (NAME.json, NAME.f32.gz):
model2vec's StaticModel.from_pretrained(DIR).encode(texts), its defaults
(max_length 512, normalize from config.json), texts by MTEB's BEIR rule;
with --trec RUN also SciFact's retrieval run with model2vec's vectors (exact
cosine search), which synapse eval scores (cli TestRealStaticSciFact's figure).

Never used by synapse itself. Needs the reference environment (make
reference-env: torch, sentence-transformers) and model2vec (pip install
model2vec==0.10.0); --real needs model2vec alone.
"""

import argparse
import gzip
import hashlib
import json
import os
import platform
import shutil
import time

import numpy as np
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from model2vec import StaticModel

WORDS = """the a of and in to is for with on by as at from that this be are was were it its an or not
cell cells gene genes protein proteins study studies result results patient patients cancer risk
disease treatment effect effects level levels human mouse blood brain heart lung liver tissue
expression response growth factor factors receptor receptors activity increase decrease high low
dose trial group groups control model models data analysis method methods time rate rates
hello world quick brown fox jumps over lazy dog static embedding vector vectors token tokens
""".split()
PIECES = ["##s", "##ed", "##ing", "##ly", "##er", "##es", "##ion", "##al"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

TEXTS = [
    "Hello world",
    "The cell study results",
    "protein, gene and cells!",
    "a",
    "the gene of the protein is in the cell",
    "Quickly, the brown foxes jumped over lazy dogs.",
    "Expression levels increased in human liver tissue (dose: 5mg).",
    "Static embeddings: a vector is the mean of its tokens' vectors",
    "日本 cells 東京",  # unknown characters: model2vec drops [UNK]
    "Treatment effects on patients with cancer risk factors were studied in three trial groups",
]


def tokenizer():
    vocab = {}
    for w in SPECIAL + LETTERS + ["##" + c for c in LETTERS] + PIECES + WORDS:
        vocab.setdefault(w, len(vocab))
    for p in ".,!?:;'()-0123456789":
        vocab.setdefault(p, len(vocab))
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return tok


def model2vec_models(tok, rng, out):
    n, dims = tok.get_vocab_size(), 16
    vecs = {}
    m = StaticModel(rng.standard_normal((n, dims)).astype(np.float32), tok, normalize=True)
    m.save_pretrained(os.path.join(out, "m2v-f32"))
    rows = n // 2
    mapping = rng.integers(0, rows, size=n).astype(np.int64)
    weights = rng.uniform(0.1, 2.0, size=n).astype(np.float32)
    emb = rng.standard_normal((rows, dims)).astype(np.float16)
    m = StaticModel(emb, tok, normalize=False, weights=weights, token_mapping=mapping)
    m.save_pretrained(os.path.join(out, "m2v-weighted"))
    m = StaticModel(rng.standard_normal((n, dims)).astype(np.float32), tok, normalize=True)
    m.save_pretrained(os.path.join(out, "m2v-int8-src"))
    m = StaticModel.from_pretrained(os.path.join(out, "m2v-int8-src"), quantize_to="int8")
    m.save_pretrained(os.path.join(out, "m2v-int8"))
    for name in ["m2v-f32", "m2v-weighted", "m2v-int8"]:
        loaded = StaticModel.from_pretrained(os.path.join(out, name))
        vecs[name] = loaded.encode(TEXTS).astype(np.float64)
    return vecs


def static_embedding(tok, rng, out):
    """A StaticEmbedding + Normalize SentenceTransformer, saved by
    sentence-transformers, and its encode of TEXTS."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, StaticEmbedding

    d = os.path.join(out, "st-static")
    shutil.rmtree(d, ignore_errors=True)
    emb = rng.standard_normal((tok.get_vocab_size(), 12)).astype(np.float32)
    model = SentenceTransformer(modules=[StaticEmbedding(Tokenizer.from_str(tok.to_str()), embedding_weights=torch.from_numpy(emb)),
                                         Normalize()], device="cpu")
    model.save(d)
    vecs = SentenceTransformer(d, device="cpu").encode(TEXTS, convert_to_numpy=True).astype(np.float64)
    # The Hub's static-retrieval-mrl-en-v1 layout (sentence-transformers 3's
    # save): the module in 0_StaticEmbedding/; sentence-transformers gives
    # the same vectors from it.
    sub = os.path.join(out, "st-static-sub")
    shutil.rmtree(sub, ignore_errors=True)
    shutil.copytree(d, sub)
    os.makedirs(os.path.join(sub, "0_StaticEmbedding"))
    for f in ["model.safetensors", "tokenizer.json"]:
        os.rename(os.path.join(sub, f), os.path.join(sub, "0_StaticEmbedding", f))
    with open(os.path.join(sub, "modules.json")) as f:
        modules = json.load(f)
    modules[0]["path"] = "0_StaticEmbedding"
    with open(os.path.join(sub, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    again = SentenceTransformer(sub, device="cpu").encode(TEXTS, convert_to_numpy=True).astype(np.float64)
    assert np.allclose(vecs, again), "sentence-transformers reads the 0_StaticEmbedding layout differently"
    return vecs


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def real_reference(args):
    import model2vec
    name = os.path.basename(os.path.normpath(args.real))
    corpus = os.path.join(args.fixtures, "corpora", "scifact", "corpus.jsonl")
    ids, texts = [], []
    with open(corpus) as f:
        for line in f:
            if len(ids) == args.count:
                break
            d = json.loads(line)
            ids.append(d["_id"])
            texts.append((d.get("title", "") + " " + d["text"]).strip())
    model = StaticModel.from_pretrained(args.real)
    start = time.time()
    vecs = model.encode(texts).astype("<f4")
    took = time.time() - start
    raw = vecs.tobytes()
    with gzip.GzipFile(os.path.join(args.out, name + ".f32.gz"), "wb", mtime=0) as z:
        z.write(raw)
    counts = [len(t) for t in model.tokenize(texts)]
    norms = np.linalg.norm(vecs, axis=1)
    meta = {
        "format": "synapse reference vectors 1", "name": name,
        "model": {"directory": ".cache/models/%s (make real-models)" % name, "weights_file": "model.safetensors",
                  "weights_sha256": sha256_file(os.path.join(args.real, "model.safetensors"))},
        "reference": {"library": "model2vec", "call": "StaticModel.from_pretrained(DIR).encode(texts)",
                      "model2vec": model2vec.__version__, "numpy": np.__version__, "python": platform.python_version(),
                      "date": time.strftime("%Y-%m-%d"), "seconds": round(took, 2)},
        "pipeline": {"modules": ["model2vec StaticModel"], "pooling": "mean", "normalized": bool(model.normalize),
                     "normalized_by": "config.json normalize", "max_seq_length": model.max_length,
                     "max_seq_length_from": "model2vec's default max_length (config.json names none)", "prefix": ""},
        "corpus": {"path": "corpora/scifact/corpus.jsonl", "path_under": "SYNAPSE_FIXTURES", "sha256": sha256_file(corpus),
                   "documents": "the first %d lines, in file order" % len(ids),
                   "text_rule": 'MTEB\'s for a BEIR corpus: (title + " " + text).strip(); model2vec cuts each text at '
                                'max_length × its median token length characters, tokenizes without special tokens, '
                                'truncates at max_length tokens and drops the unknown token'},
        "count": len(ids), "dims": int(vecs.shape[1]),
        "norms": {"min": float(norms.min()), "max": float(norms.max())},
        "truncated": sum(1 for c in counts if c >= model.max_length),
        "ids": ids, "token_counts": counts,
        "vectors": {"file": name + ".f32.gz", "dtype": "float32", "byte_order": "little", "shape": list(vecs.shape),
                    "layout": "row-major: row i (dims float32s) is the vector of ids[i]", "compression": "gzip",
                    "sha256_uncompressed": hashlib.sha256(raw).hexdigest()},
    }
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    if args.trec:
        scifact_run(model, os.path.dirname(corpus), args.trec)


def scifact_run(model, sf, path):
    """SciFact's retrieval with model2vec's own vectors: every document and
    test query encoded, an exact cosine search, the top 100 as a TREC run
    (score it with synapse eval --qrels qrels/test.tsv)."""
    with open(os.path.join(sf, "corpus.jsonl")) as f:
        docs = [json.loads(line) for line in f]
    with open(os.path.join(sf, "queries-test.jsonl")) as f:
        queries = [json.loads(line) for line in f]
    d = model.encode([(x.get("title", "") + " " + x["text"]).strip() for x in docs])
    q = model.encode([x["text"] for x in queries])
    scores = q @ d.T
    with open(path, "w") as f:
        for i, x in enumerate(queries):
            for rank, j in enumerate(np.argsort(-scores[i])[:100]):
                f.write("%s Q0 %s %d %.6f model2vec\n" % (x["_id"], docs[j]["_id"], rank + 1, scores[i, j]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--real", help="a Model2Vec directory: write its SciFact reference instead")
    ap.add_argument("--fixtures", default=os.environ.get("SYNAPSE_FIXTURES", ""))
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--trec", help="with --real: also write SciFact's run with model2vec's vectors here")
    args = ap.parse_args()
    if args.real:
        real_reference(args)
        return
    rng = np.random.default_rng(46)
    tok = tokenizer()
    vecs = model2vec_models(tok, rng, args.out)
    vecs["st-static"] = static_embedding(tok, rng, args.out)
    shutil.rmtree(os.path.join(args.out, "m2v-int8-src"))
    for name in os.listdir(args.out):
        readme = os.path.join(args.out, name, "README.md")
        if os.path.exists(readme):
            os.remove(readme)  # model cards: not read by synapse
    ref = {"texts": TEXTS, "vectors": {k: [[round(float(x), 7) for x in row] for row in v] for k, v in vecs.items()}}
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
