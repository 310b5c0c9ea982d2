#!/usr/bin/env python3
"""faiss_search.py: the exact top-k search synapse search does, by faiss, on
the raw vectors `randvec raw` dumped from the same embedding outputs.

    faiss_search.py CORPUS_PREFIX QUERIES_PREFIX K RUN.tsv [--extend EXT.tsv] [--sq8]

Scores are synapse search's, so that the two runs compare value for value:
  float32  IndexFlatIP: the dot product of the float32 vectors.
  int8     IndexScalarQuantizer, QT_8bit_direct_signed (faiss's 8-bit scalar
           quantizer holding the int8 codes as they are, one byte each),
           inner product: the float32 queries quantized here with the
           corpus's stored ranges by the rule synapse documents
           (trunc((x - min)/step - 128) in float32, step = (max - min)/255,
           clamped to [-128, 127]) and given as floats, so that every score
           is the integer dot product of the codes (products and partial
           sums below 2**24: exact in float32).
  --sq8    (a float32 corpus) IndexScalarQuantizer, QT_8bit: faiss's own
           8-bit quantizer trained on the corpus (per-dimension ranges, as
           synapse's int8), float queries against the decoded codes. Its
           scores are not synapse's int8 ones, so it is timed, not checked.
  binary   IndexBinaryFlat over the packed sign bits (the stored bytes with
           the top bit flipped back), the queries np.packbits(q > 0); the
           score is dims - Hamming distance.

RUN.tsv is a BEIR TSV (query-id, corpus-id, score) in faiss's order. With
--extend, EXT.tsv holds every document whose score reaches the query's k-th
(a range search: for float32, within 1e-5 of it), which is what a check
needs to decide ties at the k-th place. One JSON line on stdout gives the
timings: load (read and convert the files), add (build the index), search.
"""
import json
import sys
import time

import faiss
import numpy as np


def load(prefix):
    with open(prefix + ".json") as f:
        meta = json.load(f)
    with open(prefix + ".ids") as f:
        ids = f.read().split("\n")[:-1]
    if len(ids) != meta["rows"]:
        sys.exit(f"{prefix}.ids: {len(ids)} ids for {meta['rows']} rows")
    return meta, ids


def quantize_int8(x, ranges):
    lo = np.asarray(ranges["min"], dtype=np.float32)
    hi = np.asarray(ranges["max"], dtype=np.float32)
    step = (hi - lo) / np.float32(255)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (x - lo) / step - np.float32(128)
    t = np.where(step == 0, np.float32(-128), t)
    return np.clip(np.trunc(t), -128, 127).astype(np.int8)


def main(argv):
    sq8 = "--sq8" in argv
    argv = [a for a in argv if a != "--sq8"]
    extend = None
    if len(argv) == 7 and argv[5] == "--extend":
        extend = argv[6]
        argv = argv[:5]
    if len(argv) != 5:
        sys.exit(__doc__)
    cprefix, qprefix, k, out = argv[1], argv[2], int(argv[3]), argv[4]

    t0 = time.perf_counter()
    cmeta, cids = load(cprefix)
    qmeta, qids = load(qprefix)
    dims, dtype = cmeta["dims"], cmeta["dtype"]
    if qmeta["dtype"] != "float32" or qmeta["dims"] != dims:
        sys.exit(f"queries: want float32 of {dims} dims, got {qmeta['dtype']} of {qmeta['dims']}")
    xq = np.fromfile(qprefix + ".vec", dtype=np.float32).reshape(-1, dims)
    if dtype == "float32" and sq8:
        xb = np.fromfile(cprefix + ".vec", dtype=np.float32).reshape(-1, dims)
        index = faiss.IndexScalarQuantizer(dims, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        dtype = "sq8"
    elif dtype == "float32":
        xb = np.fromfile(cprefix + ".vec", dtype=np.float32).reshape(-1, dims)
        index = faiss.IndexFlatIP(dims)
    elif dtype == "int8":
        xb = np.fromfile(cprefix + ".vec", dtype=np.int8).reshape(-1, dims).astype(np.float32)
        xq = quantize_int8(xq, cmeta["ranges"]).astype(np.float32)
        index = faiss.IndexScalarQuantizer(dims, faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.METRIC_INNER_PRODUCT)
    elif dtype == "binary":
        xb = np.fromfile(cprefix + ".vec", dtype=np.uint8).reshape(-1, (dims + 7) // 8) ^ np.uint8(0x80)
        xq = np.packbits(xq > 0, axis=1)
        index = faiss.IndexBinaryFlat(dims)
    else:
        sys.exit(f"corpus dtype {dtype}: want float32, int8 or binary")
    t1 = time.perf_counter()
    if not index.is_trained:
        index.train(xb)
    index.add(xb)
    t2 = time.perf_counter()
    D, I = index.search(xq, k)
    t3 = time.perf_counter()

    def score(d):
        return dims - int(d) if dtype == "binary" else float(d)

    def fmt(s):  # float32 shortest repr, as synapse writes
        return repr(float(np.float32(s))) if dtype in ("float32", "sq8") else str(int(round(s)))

    with open(out, "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qi, q in enumerate(qids):
            for d, i in zip(D[qi], I[qi]):
                if i >= 0:
                    f.write(f"{q}\t{cids[i]}\t{fmt(score(d))}\n")
    if extend:
        # Every document at or above each query's k-th score: one range
        # search with the loosest radius, then each query's own bound.
        if dtype == "binary":
            kth = D[:, -1].astype(np.int64)
            lims, ED, EI = index.range_search(xq, int(kth.max()) + 1)  # distance < radius
            keep = lambda qi, d: d <= kth[qi]
        else:
            eps = np.float32(0.5 if dtype == "int8" else 1e-5)
            kth = D[:, -1] - eps
            ranged = index
            if dtype == "int8":
                # IndexScalarQuantizer's range search scans without its SIMD
                # kernels (minutes here); IndexFlatIP over the same codes as
                # floats gives the same integer scores, exactly.
                ranged = faiss.IndexFlatIP(dims)
                ranged.add(xb)
            lims, ED, EI = ranged.range_search(xq, float(kth.min()))  # score > radius
            keep = lambda qi, d: d > kth[qi]
        with open(extend, "w") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for qi, q in enumerate(qids):
                for j in range(lims[qi], lims[qi + 1]):
                    if keep(qi, ED[j]):
                        f.write(f"{q}\t{cids[EI[j]]}\t{fmt(score(ED[j]))}\n")
    pairs = len(qids) * len(cids)
    print(json.dumps({"dtype": dtype, "faiss": faiss.__version__, "compile_options": faiss.get_compile_options(), "queries": len(qids), "chunks": len(cids), "threads": faiss.omp_get_max_threads(),
                      "load_s": round(t1 - t0, 3), "add_s": round(t2 - t1, 3), "search_s": round(t3 - t2, 3),
                      "pairs_per_s": pairs / (t3 - t2)}))


if __name__ == "__main__":
    main(sys.argv)
