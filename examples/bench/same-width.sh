#!/bin/sh
# same-width.sh: tokens/s of each architecture synapse converts against BERT
# of the same width (docs/models.md, "Speed against BERT of the same width").
# The checkpoints are random weights at all-MiniLM-L6-v2's shape, made by
# examples/models/same_width.py into DIR (bert, distilbert, mpnet,
# modernbert: the same WordPiece tokenizer, so the same token sequences;
# qwen3: a BPE of the same vocabulary size). Each run is `synapse embed` over
# the same SciFact documents (title + text, --truncate at 256 tokens, 1 worker
# × 1 thread), a whole process, after a warm-up run that converts the model.
# The runs are interleaved, BERT before each other contender, so that each
# ratio is taken against the BERT run beside it (the machine is shared):
#
#   ONNX Runtime: bert, distilbert, bert, mpnet, bert, modernbert  (DOCS documents)
#   llama.cpp:    bert-gguf (the BERT converted with --format gguf), qwen3  (GGUF_DOCS documents)
#
#   examples/bench/same-width.sh DIR [DOCS=500] [GGUF_DOCS=100] [ROUNDS=2]
#
# Environment: SYNAPSE (default bin/synapse), CORPUS (default
# ../shared/fixtures/corpora/scifact/corpus.jsonl), WORK (default a new
# temporary directory; its models/ is the model cache). Prints one line per
# run: round, contender, engine, documents, tokens, tokens/s (wall, synapse's
# summary), CPU seconds of synapse and its workers (/usr/bin/time), tokens per
# CPU-second, its ratio to the BERT run before it (on the same engine) and the
# 1-minute load average before the run. On a shared machine the wall rates
# follow the load; tokens per CPU-second is the measure to compare.
set -eu
DIR=${1:?usage: same-width.sh DIR [DOCS] [GGUF_DOCS] [ROUNDS]}
DOCS=${2:-500}
GGUF_DOCS=${3:-100}
ROUNDS=${4:-2}
SYNAPSE=${SYNAPSE:-bin/synapse}
CORPUS=${CORPUS:-../shared/fixtures/corpora/scifact/corpus.jsonl}
WORK=${WORK:-$(mktemp -d)}
SYNAPSE_MODELS=$WORK/models
export SYNAPSE_MODELS

head -n "$DOCS" "$CORPUS" >"$WORK/docs.jsonl"
head -n "$GGUF_DOCS" "$CORPUS" >"$WORK/gguf-docs.jsonl"
head -n 10 "$CORPUS" >"$WORK/warm.jsonl"
load() { cut -d' ' -f1 /proc/loadavg; }

embed() { # $1: model (a directory or a cached name), $2: documents, $3: log
	/usr/bin/time -f '%e %U %S' -o "$WORK/time" "$SYNAPSE" embed "$2" -m "$1" --text-field title --text-field text --truncate -o "$WORK/out.arrow" \
		--workers 1 --threads 1 >"$3" 2>&1 || { cat "$3" >&2; exit 1; }
}

base=1
run() { # $1: contender, $2: model, $3: engine, $4: documents
	l=$(load)
	embed "$2" "$4" "$WORK/$1.log"
	# tokens         115634 (3012 tokens/s over 38.4s)
	read -r _ user sys <"$WORK/time"
	cpu=$(echo "$user $sys" | awk '{ print $1 + $2 }')
	set -- "$1" "$3" "$(wc -l <"$4")" $(awk '$1 == "tokens" { gsub(/[(]/, "", $3); print $2, $3 }' "$WORK/$1.log") "$cpu"
	rate=$(echo "$4 $6" | awk '{ printf "%.0f", $1 / $2 }')
	case $1 in bert | bert-gguf) base=$rate ;; esac
	echo "$r $1 $2 $3 $4 $5 $6 $rate $base $l" |
		awk '{ printf "%s %-10s %-12s %5d %8d %7d %7.1f %7d %6.3f %5s\n", $1, $2, $3, $4, $5, $6, $7, $8, $8 / $9, $10 }'
}

"$SYNAPSE" models add "$DIR/bert" --format gguf --name bert-gguf >/dev/null 2>&1
for m in bert distilbert mpnet modernbert qwen3; do embed "$DIR/$m" "$WORK/warm.jsonl" "$WORK/warm.log"; done
embed bert-gguf "$WORK/warm.jsonl" "$WORK/warm.log"

echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $DOCS documents ($GGUF_DOCS for llama.cpp) of $CORPUS; models in $DIR; $("$SYNAPSE" version 2>/dev/null | head -1)"
echo "round contender engine docs tokens tokens_per_s cpu_s tokens_per_cpu_s vs_bert load1"
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	for m in distilbert mpnet modernbert; do
		run bert "$DIR/bert" onnxruntime "$WORK/docs.jsonl"
		run "$m" "$DIR/$m" onnxruntime "$WORK/docs.jsonl"
	done
	run bert-gguf bert-gguf llama.cpp "$WORK/gguf-docs.jsonl"
	run qwen3 "$DIR/qwen3" llama.cpp "$WORK/gguf-docs.jsonl"
	r=$((r + 1))
done
echo "# $(date -u +%FT%TZ) $(uptime)"
