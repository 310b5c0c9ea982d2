#!/usr/bin/env python3
"""model2vec's distill of a model directory: the reference of `synapse models distill` (a test reference only).

    python examples/models/reference_distill.py --model model/convert/testdata/distilbert-tiny \\
        --dims 8 --out model/convert/testdata/distilbert-tiny.distill.json

Runs model2vec 0.10's distill(model_name=DIR, pca_dims=--dims) with its other defaults (SIF 1e-4,
token_remove_pattern [unusedN], mean pooling) but float32 rows (quantize_to="float32", where its
default is float16, so that the comparison measures the recipe and not the rounding), and writes
the kept vocabulary (its tokenizer's tokens in id order) and each token's row as JSON. cli's
TestModelsDistillReference distills the same directory with synapse and compares them token by token,
so CI needs no torch. Needs model2vec (with torch and transformers); never used by synapse.
"""
import argparse
import json

from model2vec.distill import distill


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = distill(model_name=a.model, pca_dims=a.dims, quantize_to="float32", device="cpu")
    vocab = m.tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    assert [vocab[t] for t in tokens] == list(range(len(tokens))), "ids are not 0..n-1"
    rows = m.embedding.astype("float32")
    assert rows.shape[0] == len(tokens), (rows.shape, len(tokens))
    ref = {"model": a.model, "distill": f"model2vec distill(pca_dims={a.dims}, quantize_to='float32')",
           "tokens": tokens, "vectors": [[float(x) for x in r] for r in rows]}
    with open(a.out, "w") as f:
        json.dump(ref, f)
        f.write("\n")
    print("wrote", a.out, "tokens", len(tokens), "dims", rows.shape[1])


if __name__ == "__main__":
    main()
