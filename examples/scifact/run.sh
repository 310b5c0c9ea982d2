#!/usr/bin/env bash
# embed → search → rerank → eval on a BEIR-layout data set (SciFact: corpus.jsonl,
# queries.jsonl or queries-test.jsonl, qrels/test.tsv), all with synapse.
#
#   examples/scifact/run.sh DATA_DIR EMBED_MODEL RERANK_MODEL [OUT_DIR]
#
# EMBED_MODEL is an embedding GGUF (e.g. all-MiniLM-L6-v2, bge-small; e5 and nomic
# models want their prompts: set QUERY_PREFIX and DOC_PREFIX), RERANK_MODEL a
# cross-encoder GGUF (e.g. bge-reranker-base). With the repository's random test
# models (synapse gen-model) the pipeline runs but the scores mean nothing.
set -euo pipefail
data=${1:?DATA_DIR}; embed_model=${2:?EMBED_MODEL}; rerank_model=${3:?RERANK_MODEL}
out=${4:-scifact-out}
synapse=${SYNAPSE:-synapse}
queries=$data/queries-test.jsonl
[ -f "$queries" ] || queries=$data/queries.jsonl
mkdir -p "$out"

# 1. The corpus (title and text, as BEIR joins them) and the queries, one model.
"$synapse" embed "$data/corpus.jsonl" -m "$embed_model" -o "$out/corpus.arrow" \
    --text-field title --text-field text --id-field _id --prefix "${DOC_PREFIX:-}"
"$synapse" embed "$queries" -m "$embed_model" -o "$out/queries.arrow" \
    --id-field _id --prefix "${QUERY_PREFIX:-}"

# 2. A 32x smaller corpus: sign bits (binary needs no calibration).
"$synapse" embed "$data/corpus.jsonl" -m "$embed_model" -o "$out/corpus.binary.arrow" \
    --text-field title --text-field text --id-field _id --prefix "${DOC_PREFIX:-}" --dtype binary

# 3. Exact search, and binary search re-scored with the float32 vectors.
"$synapse" search --queries "$out/queries.arrow" --corpus "$out/corpus.arrow" -k 100 \
    -o "$out/dense.trec" --qrels "$data/qrels/test.tsv"
"$synapse" search --queries "$out/queries.arrow" --corpus "$out/corpus.binary.arrow" -k 100 \
    --rescore 4 --rescore-with "$out/corpus.arrow" -o "$out/binary.trec" --qrels "$data/qrels/test.tsv"

# 4. Re-rank the dense run's top 100 with the cross-encoder, scored before and after.
"$synapse" rerank --run "$out/dense.trec" --queries "$queries" --corpus "$data/corpus.jsonl" --depth 100 \
    -m "$rerank_model" -o "$out/reranked.trec" --qrels "$data/qrels/test.tsv"

# 5. Any run file scores alone.
"$synapse" eval --run "$out/reranked.trec" --qrels "$data/qrels/test.tsv"
