#!/bin/sh
# vs-transformersjs.sh: synapse embed against transformers.js on the same
# ONNX model (fp32 and its dynamic int8 form, transformers.js's "q8") and the
# same SciFact documents cut to 512 tokens, in interleaved rounds. See
# docs/onnx-bench.md for how MINILM_DIR is made (gen-model --kind minilm,
# ../shared/tools/gguf2onnx.py, with and without --int8). The only network it
# uses is npm, once, to install @huggingface/transformers into CACHE.
#
#   examples/bench/vs-transformersjs.sh MINILM_DIR [DOCS=300] [ROUNDS=3]
#
# Environment: SYNAPSE (default bin/synapse), CORPUS (default
# ../shared/fixtures/corpora/scifact/corpus.jsonl), CACHE (default
# .cache/bench-tjs), WORK (default a new temporary directory).
set -eu
MINILM=${1:?usage: vs-transformersjs.sh MINILM_DIR [DOCS] [ROUNDS]}
DOCS=${2:-300}
ROUNDS=${3:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
SYNAPSE=${SYNAPSE:-bin/synapse}
CORPUS=${CORPUS:-../shared/fixtures/corpora/scifact/corpus.jsonl}
CACHE=${CACHE:-.cache/bench-tjs}
WORK=${WORK:-$(mktemp -d)}
TJS_VERSION=4.3.2

mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
if [ ! -d "$CACHE/node_modules/@huggingface/transformers" ]; then
	# --ignore-scripts: onnxruntime-node's package carries its library; its
	# install script would download other builds.
	(cd "$CACHE" && [ -f package.json ] || echo '{"private":true}' >"$CACHE/package.json"
	 cd "$CACHE" && ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts --no-audit --no-fund "@huggingface/transformers@$TJS_VERSION" >/dev/null)
fi
cp "$HERE/tjs-embed.mjs" "$CACHE/tjs-embed.mjs" # resolves the package from CACHE

# transformers.js's layout: ROOT/NAME/{config.json,tokenizer.json,onnx/model*.onnx}.
M="$WORK/models/minilm"
mkdir -p "$M/onnx"
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json; do
	[ -f "$MINILM/onnx/$f" ] && ln -sf "$(cd "$MINILM/onnx" && pwd)/$f" "$M/$f"
done
ln -sf "$(cd "$MINILM/onnx" && pwd)/model.onnx" "$M/onnx/model.onnx"
ln -sf "$(cd "$MINILM/onnx" && pwd)/model_quantized.onnx" "$M/onnx/model_quantized.onnx"

head -n "$DOCS" "$CORPUS" >"$WORK/docs.jsonl"
node "$CACHE/tjs-embed.mjs" "$WORK/models" minilm fp32 "$WORK/docs.jsonl" --prepare 512 "$WORK/docs512.jsonl"

now() { date +%s.%N; }
synapse_run() { # $1: model path
	t0=$(now)
	"$SYNAPSE" embed "$WORK/docs512.jsonl" -m "$1" --chunk-tokens 510 -o "$WORK/out.arrow" >"$WORK/synapse.out" 2>&1
	t1=$(now)
	echo "$t0 $t1" | awk '{printf "%.3f", $2-$1}'
}
tjs_run() { # $1: dtype
	t0=$(now)
	node "$CACHE/tjs-embed.mjs" "$WORK/models" minilm "$1" "$WORK/docs512.jsonl" >"$WORK/tjs.out"
	t1=$(now)
	echo "$t0 $t1" | awk '{printf "%.3f", $2-$1}'
}

echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $DOCS documents cut to 512 tokens; $("$SYNAPSE" version 2>/dev/null | head -1); transformers.js $TJS_VERSION"
echo "round contender wall_s"
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	# Rotate the order each round.
	set -- "synapse fp32" "tjs fp32" "synapse int8" "tjs q8"
	i=0
	while [ "$i" -lt "$r" ]; do first=$1; shift; set -- "$@" "$first"; i=$((i + 1)); done
	for c in "$@"; do
		case $c in
		"synapse fp32") s=$(synapse_run "$MINILM/onnx") ;;
		"synapse int8") s=$(synapse_run "$MINILM/onnx/model_quantized.onnx") ;;
		"tjs fp32") s=$(tjs_run fp32) ;;
		"tjs q8") s=$(tjs_run q8) ;;
		esac
		echo "$r $(echo "$c" | tr ' ' '-') $s"
	done
	r=$((r + 1))
done | tee "$WORK/rounds.txt"
echo "# $(date -u +%FT%TZ) $(uptime)"
# Per round: transformers.js wall / synapse wall (> 1: synapse faster); then the medians.
awk '{w[$1" "$2]=$3; rs[$1]=1}
END { for (r in rs) printf "%s %.3f %.3f\n", r, w[r" tjs-fp32"] / w[r" synapse-fp32"], w[r" tjs-q8"] / w[r" synapse-int8"] }' "$WORK/rounds.txt" |
	sort -n >"$WORK/ratios.txt"
while read -r r f q; do echo "round $r: fp32 ${f}x  int8 ${q}x"; done <"$WORK/ratios.txt"
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "median of $ROUNDS rounds (transformers.js wall / synapse wall): fp32 $(cut -d' ' -f2 "$WORK/ratios.txt" | med)x, int8 $(cut -d' ' -f3 "$WORK/ratios.txt" | med)x"
echo "tokens (transformers.js's count, special tokens included): $(sed -n 's/.*"tokens":\([0-9]*\).*/\1/p' "$WORK/tjs.out"); synapse: $(grep -i tokens "$WORK/synapse.out" | head -1)"
