"""Reads a `synapse embed --with-text` output as a user's tools read it, and checks it.

A test reference only (cli TestReadbackPython runs it; `make test-readback` makes its venv): never part of
synapse's run path. With DuckDB, pyarrow and LanceDB, each as it comes, no extension:

  - every chunk's text is its document's embedded text cut at [byte_start, byte_end) (bytes) and at
    [codepoint_start, codepoint_end) (DuckDB's character-based substring, Python's str slicing);
  - chunk_id is ID#CHUNK and unique; the metadata names the text fields;
  - the top-k documents of every query (a document's score is its best chunk's dot product, ties by id,
    as `synapse search` scores float32) are those of the `synapse search` run given.

Top-k lists are compared rank by rank; where two documents' scores are within --tie of each other (computed
in float64) the order between them is not held against a tool (float32 sums differ in their last bits).

usage: check.py --corpus C.parquet [--arrow C.arrow] --queries Q.parquet --run RUN.jsonl --docs DOCS.jsonl
                [--text-field F ...] [-k 10] [--lancedb-dir DIR]
Exit 0: all checks hold; 1: a check failed (each failure is printed); 2: usage.
"""

import argparse
import json
import sys
import tempfile

import duckdb
import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def joined_texts(path, fields):
    """The embedded text of each document: its text fields' non-empty values joined by a newline."""
    texts = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                doc_id = str(d.get("id", d.get("_id")))
                texts[doc_id] = "\n".join(d[k] for k in fields if d.get(k))
    return texts


def check_rows(tool, tbl, texts, fields):
    """Text, offsets and chunk_id of every row of a pyarrow table."""
    ids, chunks, cids = tbl["id"].to_pylist(), tbl["chunk"].to_pylist(), tbl["chunk_id"].to_pylist()
    bs, be = tbl["byte_start"].to_pylist(), tbl["byte_end"].to_pylist()
    cs, ce = tbl["codepoint_start"].to_pylist(), tbl["codepoint_end"].to_pylist()
    got = tbl["text"].to_pylist()
    non_ascii = 0
    for i, doc_id in enumerate(ids):
        t = texts[doc_id]
        by_bytes = t.encode("utf-8")[bs[i]:be[i]].decode("utf-8", errors="replace")
        if got[i] != by_bytes or got[i] != t[cs[i]:ce[i]]:
            fail(f"{tool}: {doc_id} chunk {chunks[i]}: text {got[i]!r}; bytes give {by_bytes!r}, code points {t[cs[i]:ce[i]]!r}")
        if cids[i] != f"{doc_id}#{chunks[i]}" or cids[i].rpartition("#")[0] != doc_id:
            fail(f"{tool}: {doc_id} chunk {chunks[i]}: chunk_id {cids[i]!r}")
        non_ascii += not got[i].isascii()
    if len(set(cids)) != len(cids):
        fail(f"{tool}: {len(cids) - len(set(cids))} repeated chunk_ids")
    meta = tbl.schema.metadata or {}
    if json.loads(meta.get(b"synapse.text_fields", b"null")) != fields:
        fail(f"{tool}: metadata synapse.text_fields {meta.get(b'synapse.text_fields')!r}; want {fields}")
    print(f"{tool}: {len(ids)} chunks ({non_ascii} with non-ASCII text): text, offsets and chunk_id agree")


def top_k(scores, k):
    """{query: [doc, ...]} of the k best documents by (score desc, id asc) from {(query, doc): score}."""
    by_q = {}
    for (q, d), s in scores.items():
        by_q.setdefault(q, []).append((-s, d))
    return {q: [d for _, d in sorted(v)[:k]] for q, v in by_q.items()}


def exact_scores(corpus, queries):
    """{(query, doc): float64 best-chunk dot product}."""
    cv = np.array(corpus["embedding"].to_pylist(), dtype=np.float64)
    qv = np.array(queries["embedding"].to_pylist(), dtype=np.float64)
    sims = qv @ cv.T
    out = {}
    cids, qids = corpus["id"].to_pylist(), queries["id"].to_pylist()
    for qi, q in enumerate(qids):
        for ci, d in enumerate(cids):
            key = (q, d)
            out[key] = max(out.get(key, -np.inf), sims[qi, ci])
    return out


def compare(tool, got, want, exact, tie):
    """got and want are {query: [doc, ...]}: equal rank by rank, but for ties within tie."""
    if set(got) != set(want):
        fail(f"{tool}: queries {sorted(got)}; synapse search has {sorted(want)}")
        return
    swaps = 0
    for q in sorted(want):
        g, w = got[q], want[q]
        if len(g) != len(w):
            fail(f"{tool}: query {q}: {len(g)} hits; synapse search has {len(w)}")
            continue
        for r, (gd, wd) in enumerate(zip(g, w)):
            if gd != wd:
                if abs(exact[(q, gd)] - exact[(q, wd)]) > tie:
                    fail(f"{tool}: query {q} rank {r + 1}: {gd} ({exact[(q, gd)]:.9f}); synapse search has {wd} ({exact[(q, wd)]:.9f})")
                    break
                swaps += 1
    print(f"{tool}: the top-{len(next(iter(want.values())))} of {len(want)} queries are synapse search's"
          + (f" ({swaps} ties within {tie} ordered otherwise)" if swaps else ""))


def duckdb_checks(args, texts, k):
    con = duckdb.connect()
    docs = pa.table({"id": list(texts), "joined": list(texts.values())})
    con.register("docs", docs)
    c, q = args.corpus, args.queries
    bad = con.execute("""
        SELECT count(*) FROM read_parquet(?) c JOIN docs d USING (id)
        WHERE c.text IS DISTINCT FROM substring(d.joined, c.codepoint_start + 1, c.codepoint_end - c.codepoint_start)
           OR strlen(c.text) <> c.byte_end - c.byte_start
           OR c.chunk_id <> c.id || '#' || c.chunk""", [c]).fetchone()[0]
    n, distinct = con.execute("SELECT count(*), count(DISTINCT chunk_id) FROM read_parquet(?)", [c]).fetchone()
    if bad or n != distinct:
        fail(f"duckdb: {bad} of {n} chunks whose text is not substring(joined, codepoint_start + 1, ...) or whose chunk_id is not id#chunk; {n - distinct} repeated chunk_ids")
    fields = con.execute("SELECT decode(value) FROM parquet_kv_metadata(?) WHERE decode(key) = 'synapse.text_fields'", [c]).fetchone()
    if fields is None or json.loads(fields[0]) != args.text_field:
        fail(f"duckdb: parquet_kv_metadata synapse.text_fields {fields}; want {args.text_field}")
    print(f"duckdb {duckdb.__version__}: {n} chunks: text = substring(joined, codepoint_start + 1, codepoint_end - codepoint_start), chunk_id unique")
    rows = con.execute("""
        WITH s AS (
            SELECT q.id AS qid, c.id AS did,
                   max(list_dot_product(q.embedding::FLOAT[], c.embedding::FLOAT[])) AS score
            FROM read_parquet(?) q, read_parquet(?) c GROUP BY ALL)
        SELECT qid, did FROM s
        QUALIFY row_number() OVER (PARTITION BY qid ORDER BY score DESC, did) <= ?
        ORDER BY qid, score DESC, did""", [q, c, k]).fetchall()
    got = {}
    for qid, did in rows:
        got.setdefault(qid, []).append(did)
    return got


def lancedb_top_k(corpus, queries, k, directory):
    """LanceDB's exact (unindexed) dot-product search over the chunks, best chunk per document."""
    db = lancedb.connect(directory)
    tbl = db.create_table("chunks", data=corpus, mode="overwrite")
    per_doc = max(pa.compute.value_counts(corpus["id"]).field("counts").to_pylist())
    got = {}
    for qid, vec in zip(queries["id"].to_pylist(), queries["embedding"].to_pylist()):
        hits = (tbl.search(vec, vector_column_name="embedding").distance_type("dot")
                .limit(k * per_doc).select(["id", "_distance"]).to_arrow())
        best = {}
        for d, dist in zip(hits["id"].to_pylist(), hits["_distance"].to_pylist()):
            best[d] = max(best.get(d, -np.inf), 1.0 - dist)  # LanceDB's dot distance is 1 - dot
        got[qid] = [d for _, d in sorted((-s, d) for d, s in best.items())[:k]]
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="the corpus output, Parquet (read by DuckDB, pyarrow, LanceDB)")
    ap.add_argument("--arrow", help="the same output as Arrow IPC (read by pyarrow)")
    ap.add_argument("--queries", required=True, help="the queries output, Parquet")
    ap.add_argument("--run", required=True, help="synapse search's run, JSONL")
    ap.add_argument("--docs", required=True, help="the corpus input, JSONL")
    ap.add_argument("--text-field", action="append", help="the --text-field of the embed run (default: text)")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--tie", type=float, default=1e-5, help="scores this close may be ordered either way")
    ap.add_argument("--lancedb-dir", help="LanceDB's database directory (default: a temporary one)")
    args = ap.parse_args()
    args.text_field = args.text_field or ["text"]
    texts = joined_texts(args.docs, args.text_field)

    corpus, queries = pq.read_table(args.corpus), pq.read_table(args.queries)
    check_rows(f"pyarrow {pa.__version__} (Parquet)", corpus, texts, args.text_field)
    if args.arrow:
        with pa.memory_map(args.arrow) as src:
            arrow_tbl = pa.ipc.open_file(src).read_all()
        check_rows("pyarrow (Arrow IPC)", arrow_tbl, texts, args.text_field)
        if not arrow_tbl.equals(corpus):
            fail("pyarrow: the Arrow IPC output's table differs from the Parquet output's")

    want = {}
    with open(args.run, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            want.setdefault(r["query_id"], []).append((r["rank"], r["doc_id"]))
    want = {q: [d for _, d in sorted(v)[:args.k]] for q, v in want.items()}
    exact = exact_scores(corpus, queries)

    compare("numpy (float64)", top_k(exact, args.k), want, exact, args.tie)
    compare("duckdb", duckdb_checks(args, texts, args.k), want, exact, args.tie)
    with tempfile.TemporaryDirectory() as tmp:
        compare(f"lancedb {lancedb.__version__}", lancedb_top_k(corpus, queries, args.k, args.lancedb_dir or tmp), want, exact, args.tie)
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("all checks hold")


if __name__ == "__main__":
    main()
