#!/usr/bin/env python3
"""Reference vectors of the real models (make reference): a test reference only.

For each embedding model that examples/models/fetch.sh put in --models, embeds
the first --count documents of SciFact (BEIR layout) as the model's own
library does and writes, into --out:

  NAME.json     metadata (what was run, on what, how) with the document ids in
                order and each text's token count under the model's tokenizer
  NAME.f32.gz   the vectors: gzip of count*dims float32 little-endian, row i
                the vector of ids[i]

A sentence-transformers directory is run by SentenceTransformer(DIR).encode
with the modules its modules.json lists (pooling, and Normalize when listed);
an ONNX export (model.onnx + tokenizer.json, no modules) by ONNX Runtime over
the tokenizer.json tokenizer, pooled and normalised as the upstream model's
modules are (named in MODELS below). Text is MTEB's rule for a BEIR corpus,
(title + " " + text).strip(), after the model's document prefix if it has one,
truncated at the model's max_seq_length. Never used by synapse itself.
"""

import argparse
import gzip
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# What the reference knows of each model beyond its files. "upstream" is the
# Hub model the package says it ships; an ONNX export carries no
# sentence-transformers modules, so its pooling, normalisation and
# max_seq_length are the upstream model's (its modules.json,
# 1_Pooling/config.json and sentence_bert_config.json), and the prefix is its
# model card's.
MODELS = [
    {"name": "all-MiniLM-L6-v2", "kind": "sentence-transformers",
     "upstream": "sentence-transformers/all-MiniLM-L6-v2", "prefix": ""},
    {"name": "bge-small-en-v1.5", "kind": "sentence-transformers",
     "upstream": "BAAI/bge-small-en-v1.5", "prefix": ""},
    {"name": "all-MiniLM-L6-v2-onnx", "kind": "onnx",
     "upstream": "sentence-transformers/all-MiniLM-L6-v2", "prefix": "",
     "pooling": "mean", "normalize": True, "max_seq_length": 256},
    {"name": "all-MiniLM-L6-v2-onnx-q", "kind": "onnx",
     "upstream": "sentence-transformers/all-MiniLM-L6-v2 (int8 quantized ONNX export)", "prefix": "",
     "pooling": "mean", "normalize": True, "max_seq_length": 256},
    {"name": "e5-small-v2-onnx-q", "kind": "onnx",
     "upstream": "intfloat/e5-small-v2 (int8 quantized ONNX export)", "prefix": "passage: ",
     "pooling": "mean", "normalize": True, "max_seq_length": 512},
    {"name": "bge-small-en-v1.5-onnx", "kind": "onnx",
     "upstream": "BAAI/bge-small-en-v1.5 (ONNX export)", "prefix": "",
     "pooling": "cls", "normalize": True, "max_seq_length": 512},
]

TEXT_RULE = ('MTEB\'s for a BEIR corpus: (title + " " + text).strip(), the prefix '
             'before it; truncated on the right at max_seq_length tokens, special tokens included')


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_pins():
    """models.tsv rows by name: the package each model came from."""
    pins = {}
    with open(os.path.join(HERE, "models.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, client, package, version, sha256, _files = line.rstrip("\n").split("\t")
            pins[name] = {"client": client, "package": package, "version": version, "sha256": sha256}
    return pins


def read_corpus(path, count):
    ids, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if len(ids) == count:
                break
            doc = json.loads(line)
            ids.append(doc["_id"])
            texts.append((doc.get("title", "") + " " + doc["text"]).strip() if "title" in doc else doc["text"].strip())
    if len(ids) < count:
        sys.exit(f"reference.py: {path} has {len(ids)} documents, fewer than {count}")
    return ids, texts


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def embed_sentence_transformers(model_dir, spec, texts):
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    modules = [type(m).__module__ + "." + type(m).__name__ for m in model]
    normalized = any(type(m).__name__ == "Normalize" for m in model)
    pooling = next((str(m.pooling_mode) for m in model if type(m).__name__ == "Pooling"), None)
    msl = model.max_seq_length
    docs = [spec["prefix"] + t for t in texts]
    # The Normalize module, when modules.json lists it, already normalises:
    # normalize_embeddings stays False so nothing is added to the model's own.
    vecs = model.encode(docs, batch_size=32, normalize_embeddings=False, convert_to_numpy=True,
                        show_progress_bar=False)
    tok = model[0].tokenizer
    counts = [len(ids) for ids in tok(docs, truncation="longest_first", max_length=msl)["input_ids"]]
    full = [len(ids) for ids in tok(docs, truncation=False)["input_ids"]]
    run = {"library": "sentence-transformers",
           "call": "SentenceTransformer(DIR).encode(texts, batch_size=32, normalize_embeddings=False)",
           "sentence_transformers": sentence_transformers.__version__,
           "transformers": transformers.__version__, "torch": torch.__version__,
           "torch_threads": torch.get_num_threads()}
    pipe = {"modules": modules, "pooling": pooling, "normalized": normalized,
            "normalized_by": "the Normalize module of modules.json" if normalized else None,
            "max_seq_length": msl, "max_seq_length_from": "sentence_bert_config.json"}
    return np.asarray(vecs, dtype=np.float32), counts, full, run, pipe, "model.safetensors"


def embed_onnx(model_dir, spec, texts, threads):
    import onnxruntime as ort
    import tokenizers

    msl = spec["max_seq_length"]
    tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    docs = [spec["prefix"] + t for t in texts]
    full = [len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=True)]
    tok.enable_truncation(max_length=msl, strategy="longest_first", direction="right")
    encs = tok.encode_batch(docs, add_special_tokens=True)
    counts = [len(e.ids) for e in encs]

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), opts, providers=["CPUExecutionProvider"])
    inputs = {i.name for i in sess.get_inputs()}
    out = np.zeros((len(docs), 0), dtype=np.float32)
    order = sorted(range(len(docs)), key=lambda i: counts[i])
    batch = 32
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        n = max(counts[i] for i in idx)
        ids = np.zeros((len(idx), n), dtype=np.int64)
        types = np.zeros((len(idx), n), dtype=np.int64)
        mask = np.zeros((len(idx), n), dtype=np.int64)
        for r, i in enumerate(idx):
            e = encs[i]
            ids[r, :len(e.ids)] = e.ids
            types[r, :len(e.ids)] = e.type_ids
            mask[r, :len(e.ids)] = e.attention_mask
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = sess.run(["last_hidden_state"], {k: v for k, v in feed.items() if k in inputs})[0]
        # sentence-transformers' Pooling (mean, or the [CLS] row) and
        # Normalize, in float32.
        if spec["pooling"] == "cls":
            pooled = hidden[:, 0, :].copy()
        else:
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        if spec["normalize"]:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        if out.shape[1] == 0:
            out = np.zeros((len(docs), pooled.shape[1]), dtype=np.float32)
        out[idx] = pooled
    run = {"library": "onnxruntime",
           "call": "InferenceSession(model.onnx) over tokenizers.Tokenizer(tokenizer.json) ids, batches of 32 "
                   "padded with id 0 and attention_mask 0; last_hidden_state mean-pooled over attention_mask "
                   "(or its [CLS] row, for a model whose Pooling is cls), then L2-normalised (x / max(|x|, 1e-12)), as sentence-transformers' Pooling and Normalize do",
           "onnxruntime": ort.__version__, "tokenizers": tokenizers.__version__, "ort_threads": threads}
    pipe = {"modules": None, "pooling": spec["pooling"], "normalized": spec["normalize"],
            "normalized_by": "L2 after pooling, as the upstream model's Normalize module" if spec["normalize"] else None,
            "max_seq_length": msl,
            "max_seq_length_from": "the upstream model's sentence_bert_config.json (tokenizer.json's own "
                                   "truncation setting is replaced)"}
    return out, counts, full, run, pipe, "model.onnx"


def write(out_dir, name, meta, vecs):
    raw = np.ascontiguousarray(vecs, dtype="<f4").tobytes()
    meta["vectors"] = {"file": name + ".f32.gz", "dtype": "float32", "byte_order": "little",
                       "shape": [int(vecs.shape[0]), int(vecs.shape[1])],
                       "layout": "row-major: row i (dims float32s) is the vector of ids[i]",
                       "compression": "gzip", "sha256_uncompressed": hashlib.sha256(raw).hexdigest()}
    with open(os.path.join(out_dir, name + ".f32.gz"), "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(raw)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="directory fetch.sh filled (.cache/models)")
    ap.add_argument("--fixtures", default=os.environ.get("SYNAPSE_FIXTURES", "/work/shared/fixtures"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("names", nargs="*", help="only these models")
    args = ap.parse_args()

    corpus = os.path.join(args.fixtures, "corpora", "scifact", "corpus.jsonl")
    if not os.path.isfile(corpus):
        sys.exit(f"reference.py: no SciFact corpus at {corpus}: set SYNAPSE_FIXTURES or --fixtures")
    import torch
    torch.set_num_threads(args.threads)
    ids, texts = read_corpus(corpus, args.count)
    pins = read_pins()
    os.makedirs(args.out, exist_ok=True)
    cpu = cpu_model()
    corpus_meta = {"path": "corpora/scifact/corpus.jsonl", "path_under": "SYNAPSE_FIXTURES",
                   "sha256": sha256_file(corpus), "documents": f"the first {args.count} lines, in file order",
                   "text_rule": TEXT_RULE}

    done = 0
    for spec in MODELS:
        name = spec["name"]
        if args.names and name not in args.names:
            continue
        model_dir = os.path.join(args.models, name)
        if not os.path.isdir(model_dir):
            print(f"reference.py: {name}: not in {args.models} (no package ships it, or not fetched): skipped")
            continue
        started = time.time()
        if spec["kind"] == "sentence-transformers":
            vecs, counts, full, run, pipe, weights = embed_sentence_transformers(model_dir, spec, texts)
        else:
            vecs, counts, full, run, pipe, weights = embed_onnx(model_dir, spec, texts, args.threads)
        seconds = round(time.time() - started, 1)
        run.update({"python": platform.python_version(), "numpy": np.__version__, "cpu": cpu,
                    "date": time.strftime("%Y-%m-%d", time.gmtime()), "seconds": seconds})
        norms = np.linalg.norm(vecs.astype(np.float64), axis=1)
        meta = {
            "format": "synapse reference vectors 1",
            "name": name,
            "model": dict(pins.get(name, {}), directory=f".cache/models/{name} (make real-models)",
                          upstream=spec["upstream"], weights_file=weights,
                          weights_sha256=sha256_file(os.path.join(model_dir, weights))),
            "reference": run,
            "pipeline": dict(pipe, prefix=spec["prefix"]),
            "corpus": corpus_meta,
            "count": int(vecs.shape[0]),
            "dims": int(vecs.shape[1]),
            "norms": {"min": float(norms.min()), "max": float(norms.max())},
            "truncated": int(sum(n > pipe["max_seq_length"] for n in full)),
            "ids": ids,
            "token_counts": counts,
        }
        write(args.out, name, meta, vecs)
        print(f"reference.py: {name}: {vecs.shape[0]} x {vecs.shape[1]} in {seconds} s "
              f"({meta['truncated']} texts cut at {pipe['max_seq_length']} tokens) -> {args.out}/{name}.json")
        done += 1
    if done == 0:
        sys.exit("reference.py: no model found: run make real-models first")


if __name__ == "__main__":
    main()
