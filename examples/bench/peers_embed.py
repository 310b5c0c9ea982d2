#!/usr/bin/env python3
"""One run of a Python embedding peer, for examples/bench/peers-embed.sh.

    peers_embed.py PEER MODEL_DIR TEXTS_JSONL OUT_F32 [--batch N] [--max-seq 256] [--onnx-file F]
    peers_embed.py --export MODEL_DIR

PEER is one of
  st-torch   sentence-transformers SentenceTransformer(MODEL_DIR).encode (torch, CPU)
  st-onnx    sentence-transformers with backend="onnx" (its ONNX Runtime backend),
             over MODEL_DIR/onnx/model.onnx or --onnx-file (a path in MODEL_DIR)
  fastembed  fastembed's TextEmbedding over MODEL_DIR's ONNX graph (its custom-model API)
  infinity   infinity-emb's offline AsyncEmbeddingEngine (engine "torch": sentence-transformers
             over torch), every text submitted at once, batched by its own batch handler

TEXTS_JSONL holds one {"_id", "text"} a line, the text already as MTEB joins a
BEIR document. The vectors go to OUT_F32 (float32 little-endian, row after
row, in input order); one JSON line on stdout says what was timed: the model
load and the encode apart, in seconds of wall time. --export writes
sentence-transformers' own O4 and avx512_vnni int8 exports of MODEL_DIR's
onnx/model.onnx beside it. Never used by synapse.
"""

import argparse
import json
import os
import sys
import time

import numpy as np


def load_texts(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def st_model(model_dir, backend, max_seq, onnx_file=None):
    from sentence_transformers import SentenceTransformer

    kwargs = {"device": "cpu"}
    if backend != "torch":
        kwargs["backend"] = backend
    if onnx_file:
        kwargs["model_kwargs"] = {"file_name": onnx_file}
    m = SentenceTransformer(model_dir, **kwargs)
    m.max_seq_length = max_seq
    return lambda texts, batch: m.encode(texts, batch_size=batch, convert_to_numpy=True,
                                         normalize_embeddings=False, show_progress_bar=False)


def fastembed_model(model_dir, max_seq):
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    name = "synapse-bench/" + os.path.basename(os.path.normpath(model_dir))
    TextEmbedding.add_custom_model(model=name, pooling=PoolingType.MEAN, normalization=True,
                                   sources=ModelSource(hf=name), dim=384, model_file="model.onnx")
    m = TextEmbedding(model_name=name, specific_model_path=model_dir, threads=None)
    # fastembed truncates at the tokenizer's max_length; all-MiniLM-L6-v2's
    # sentence-transformers length is the one compared here.
    m.model.tokenizer.enable_truncation(max_length=max_seq)
    return lambda texts, batch: np.stack(list(m.embed(texts, batch_size=batch)))


def infinity_model(model_dir, max_seq, batch):
    import asyncio

    from infinity_emb import AsyncEmbeddingEngine, EngineArgs

    # from_args loads the model (the load is timed); astart starts the
    # batch handler in the loop that embed then runs in.
    engine = AsyncEmbeddingEngine.from_args(EngineArgs(
        model_name_or_path=model_dir, engine="torch", device="cpu", batch_size=batch, model_warmup=False))
    loop = asyncio.new_event_loop()
    loop.run_until_complete(engine.astart())

    def encode(texts, _batch):
        vecs, _ = loop.run_until_complete(engine.embed(sentences=texts))
        loop.run_until_complete(engine.astop())
        return np.stack(vecs)
    return encode


def export(model_dir):
    from sentence_transformers import (SentenceTransformer, export_dynamic_quantized_onnx_model,
                                       export_optimized_onnx_model)

    m = SentenceTransformer(model_dir, backend="onnx", device="cpu")
    export_optimized_onnx_model(m, "O4", model_dir)
    export_dynamic_quantized_onnx_model(m, "avx512_vnni", model_dir)


def main():
    if sys.argv[1:2] == ["--export"]:
        export(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=["st-torch", "st-onnx", "fastembed", "infinity"])
    ap.add_argument("model_dir")
    ap.add_argument("texts")
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-seq", type=int, default=256)
    ap.add_argument("--onnx-file")
    a = ap.parse_args()
    texts = load_texts(a.texts)
    t0 = time.perf_counter()
    if a.peer == "st-torch":
        encode = st_model(a.model_dir, "torch", a.max_seq)
    elif a.peer == "st-onnx":
        encode = st_model(a.model_dir, "onnx", a.max_seq, a.onnx_file)
    elif a.peer == "infinity":
        encode = infinity_model(a.model_dir, a.max_seq, a.batch)
    else:
        encode = fastembed_model(a.model_dir, a.max_seq)
    t1 = time.perf_counter()
    v = np.asarray(encode(texts, a.batch), dtype=np.float32)
    t2 = time.perf_counter()
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    v.astype("<f4").tofile(a.out)
    json.dump({"peer": a.peer, "batch": a.batch, "docs": len(texts), "dims": int(v.shape[1]),
               "load_s": round(t1 - t0, 3), "encode_s": round(t2 - t1, 3)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
