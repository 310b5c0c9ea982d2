#!/usr/bin/env bash
# ort-graphs.sh: does ONNX Runtime's own graph optimizer make synapse faster?
# The same weights (all-MiniLM-L6-v2) as four ONNX graphs, each run by
# synapse embed over the same SciFact documents (title + text, truncated at
# 256 tokens), whole processes, interleaved rounds with the order rotated:
#
#   synapse-st     the sentence-transformers directory converted by synapse
#                  (models add DIR: plain ONNX operators, what synapse writes)
#   publisher      the publisher's ONNX export (a PyTorch export)
#   publisher-ort  the publisher's export through onnxruntime.transformers
#                  .optimizer (model_type bert: com.microsoft Attention,
#                  SkipLayerNormalization, EmbedLayerNormalization, BiasGelu)
#   synapse-ort    synapse's graph through the same optimizer (its patterns
#                  fuse SkipLayerNormalization and BiasGelu there)
#
# Prints the rounds, then the medians: documents per second, tokens per
# second and per CPU-second, the ratio to synapse-st, the min cosine of each
# graph's vectors to synapse-st's, and the GFLOP/s per busy core that the
# tokens per CPU-second imply (the encoder's multiply-adds, counted below).
# docs/onnx-bench.md section 6 holds the figures and what they say.
#
#   examples/bench/ort-graphs.sh [DOCS=1000] [ROUNDS=3]
#
# Needs make real-models and make build. The optimizer is installed by the
# script from PyPI (onnxruntime 1.30.0, the version of synapse's own ONNX
# Runtime library, and onnx) into CACHE/venv. Environment: SYNAPSE (default
# bin/synapse), MODELS (default .cache/models), CORPUS (default
# ../shared/fixtures/corpora/scifact/corpus.jsonl), CACHE (default
# .cache/ort-graphs), WORK (default a new temporary directory).
set -euo pipefail

DOCS=${1:-1000}
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SYNAPSE=${SYNAPSE:-$ROOT/bin/synapse}
MODELS=${MODELS:-$ROOT/.cache/models}
CORPUS=${CORPUS:-$ROOT/../shared/fixtures/corpora/scifact/corpus.jsonl}
CACHE=${CACHE:-$ROOT/.cache/ort-graphs}
WORK=${WORK:-$(mktemp -d)}
PINS="onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6 pyarrow==22.0.0 sympy==1.14.0 packaging coloredlogs flatbuffers protobuf"

ST="$MODELS/all-MiniLM-L6-v2"
PUB="$MODELS/all-MiniLM-L6-v2-onnx"
for d in "$ST" "$PUB"; do
	[ -d "$d" ] || { echo "ort-graphs: $d is missing: run make real-models" >&2; exit 1; }
done
[ -x "$SYNAPSE" ] || { echo "ort-graphs: $SYNAPSE is missing: run make build" >&2; exit 1; }

mkdir -p "$CACHE" "$WORK"
PY="$CACHE/venv/bin/python"
STAMP="$CACHE/venv/.installed-$(echo "$PINS" | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ]; then
	echo "ort-graphs: installing onnxruntime's optimizer into $CACHE/venv (once)" >&2
	rm -rf "$CACHE/venv"
	python3 -m venv "$CACHE/venv"
	# shellcheck disable=SC2086 # the pins are words
	"$PY" -m pip install --quiet --disable-pip-version-check --only-binary :all: $PINS
	touch "$STAMP"
fi

export SYNAPSE_MODELS="$WORK/model-cache"
"$SYNAPSE" models add "$ST" --name graphs-st >"$WORK/add-st.log" 2>&1 ||
	{ echo "ort-graphs: models add $ST failed: $(tail -n 2 "$WORK/add-st.log")" >&2; exit 1; }
CONVERTED=$(find "$SYNAPSE_MODELS" -name model.onnx -size +1M | head -n 1)

# dir NAME GRAPH: a model directory of the publisher's tokenizer and GRAPH.
dir() {
	mkdir -p "$WORK/$1"
	for f in "$PUB"/*; do ln -sf "$f" "$WORK/$1/"; done
	rm -f "$WORK/$1/model.onnx"
	ln -s "$2" "$WORK/$1/model.onnx"
}
optimize() {
	"$PY" - "$1" "$2" <<'PY' 2>"$2.log"
import collections, sys
import onnx
from onnxruntime.transformers import optimizer
src, dst = sys.argv[1:]
m = optimizer.optimize_model(src, model_type="bert", num_heads=12, hidden_size=384, opt_level=0)
m.save_model_to_file(dst)
ops = collections.Counter(n.op_type for n in onnx.load(dst).graph.node)
print(f"ort-graphs: {dst}: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()), file=sys.stderr)
PY
	grep '^ort-graphs' "$2.log" >&2
}
optimize "$PUB/model.onnx" "$WORK/publisher-ort.onnx"
optimize "$CONVERTED" "$WORK/synapse-ort.onnx"
dir synapse-st "$CONVERTED"
dir publisher "$PUB/model.onnx"
dir publisher-ort "$WORK/publisher-ort.onnx"
dir synapse-ort "$WORK/synapse-ort.onnx"
NAMES=(synapse-st publisher publisher-ort synapse-ort)

head -n "$DOCS" "$CORPUS" | "$PY" -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(json.dumps({"_id": d["_id"], "text": (d.get("title", "") + " " + d["text"]).strip()}, ensure_ascii=False))
' >"$WORK/texts.jsonl"

# run NAME ROUND: one whole-process synapse embed; prints a TSV row.
run() {
	local name=$1 round=$2 t="$WORK/$1.time" log="$WORK/$1.log"
	/usr/bin/time -f "%e %U %S %M" -o "$t" "$SYNAPSE" embed "$WORK/texts.jsonl" -m "$WORK/$name" --id-field _id \
		--truncate --chunk-tokens 254 -o "$WORK/$name.arrow" >"$log" 2>&1 ||
		{ echo "ort-graphs: $name failed: $(tail -n 3 "$log" | tr '\n' ' ')" >&2; return 1; }
	"$PY" - "$name" "$round" "$t" "$log" "$WORK/$name.arrow" "$WORK/synapse-st.arrow" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import re, sys
import numpy as np, pyarrow.ipc as ipc
name, rnd, tfile, log, arrow, ref, load = sys.argv[1:]
wall, user, sys_, rss = open(tfile).read().split()[-4:]
cpu = float(user) + float(sys_)
tokens = int(re.search(r"^tokens\s+(\d+)", open(log).read(), re.M).group(1))
vec = lambda p: np.array(ipc.open_file(p).read_all().column("embedding").to_pylist(), dtype=np.float64)
v, r = vec(arrow), vec(ref)
cos = np.min(np.sum(v * r, 1) / np.linalg.norm(v, axis=1) / np.linalg.norm(r, axis=1))
rows = len(v)
print(f"{rnd}\t{name}\t{wall}\t{cpu:.2f}\t{int(rss) // 1024}\t{tokens}\t{rows / float(wall):.1f}\t{tokens / float(wall):.0f}\t{tokens / cpu:.0f}\t{cos:.6f}\t{load}")
PY
}

echo "ort-graphs: $DOCS documents, $ROUNDS rounds, $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ort-graphs: work in $WORK"
RESULTS="$WORK/results.tsv"
: >"$RESULTS"
run synapse-st warmup >/dev/null # the reference the others are checked against
printf 'round\tgraph\twall s\tCPU s\tRSS MiB\ttokens\tdocs/s\ttokens/s\ttokens/CPU-s\tmin cos\tload\n'
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < ${#NAMES[@]}; i++)); do
		run "${NAMES[(i + r) % ${#NAMES[@]}]}" "$r" | tee -a "$RESULTS"
	done
done

"$PY" - "$RESULTS" "$DOCS" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    rows[f[1]].append(f)
med = lambda name, i: statistics.median(float(f[i]) for f in rows[name])
# Multiply-adds per token of a 6-layer, 384-wide, 1536-inner BERT at the
# run's mean length L: Q, K, V and output projections (4·h²), the
# feed-forward pair (2·h·i), and the attention's two products (2·L·h); two
# FLOPs each.
h, inner, layers = 384, 1536, 6
print("\nmedians")
print("graph\tdocs/s\ttokens/s\ttokens/CPU-s\t× synapse-st\tmin cos\tGFLOP/s per busy core")
for name in rows:
    mean_len = med(name, 5) / int(sys.argv[2])  # one chunk a document (--truncate)
    flops = 2 * layers * (4 * h * h + 2 * h * inner + 2 * mean_len * h)
    print(f"{name}\t{med(name, 6):.1f}\t{med(name, 7):.0f}\t{med(name, 8):.0f}\t{med(name, 8) / med('synapse-st', 8):.2f}\t"
          f"{min(float(f[9]) for f in rows[name]):.6f}\t{med(name, 8) * flops / 1e9:.0f}")
PY
