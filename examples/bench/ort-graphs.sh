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
# With SET=int8 the contenders are int8 graphs of the same weights instead,
# beside synapse-st (the float32 reference the cosines are taken against):
#
#   synapse-int8   models add DIR --quantize int8: synapse's dynamic int8
#                  (DynamicQuantizeLinear + MatMulInteger, weights per column)
#   ort-dynamic    onnxruntime.quantization.quantize_dynamic on synapse's
#                  float32 graph (MatMul, per channel, int8 weights)
#   ort-static-qdq quantize_static (the weights' MatMuls, per channel, uint8 activations
#                  with fixed scales from MinMax calibration over CALIB other
#                  SciFact documents; QuantizeLinear/DequantizeLinear pairs
#                  that ONNX Runtime fuses into QLinearMatMul at load)
#   ort-static-qop the same calibration written as QLinearMatMul operators
#
# Prints the rounds, then the medians: documents per second, tokens per
# second and per CPU-second, the ratio to synapse-st, the min cosine of each
# graph's vectors to synapse-st's, and the GFLOP/s per busy core that the
# tokens per CPU-second imply (the encoder's multiply-adds, counted below).
# docs/onnx-bench.md sections 6 (SET=fused) and 7 (SET=int8) hold the figures
# and what they say.
#
#   examples/bench/ort-graphs.sh [DOCS=1000] [ROUNDS=3]
#   SET=int8 CALIB=200 examples/bench/ort-graphs.sh [DOCS] [ROUNDS]
#
# Needs make real-models and make build. The optimizer is installed by the
# script from PyPI (onnxruntime 1.30.0, the version of synapse's own ONNX
# Runtime library, and onnx) into CACHE/venv. Environment: SYNAPSE (default
# bin/synapse), MODELS (default .cache/models), CORPUS (default
# ../shared/fixtures/corpora/scifact/corpus.jsonl), CACHE (default
# .cache/ort-graphs), WORK (default a new temporary directory).
set -euo pipefail

SET=${SET:-fused}
CALIB=${CALIB:-200}
DOCS=${1:-1000}
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SYNAPSE=${SYNAPSE:-$ROOT/bin/synapse}
MODELS=${MODELS:-$ROOT/.cache/models}
CORPUS=${CORPUS:-$ROOT/../shared/fixtures/corpora/scifact/corpus.jsonl}
CACHE=${CACHE:-$ROOT/.cache/ort-graphs}
WORK=${WORK:-$(mktemp -d)}
PINS="onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6 pyarrow==22.0.0 sympy==1.14.0 tokenizers==0.22.1 packaging coloredlogs flatbuffers protobuf"

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

case $SET in
fused) ADD=() ;;
int8) ADD=(--quantize int8) ;;
*) echo "ort-graphs: SET=$SET: want fused or int8" >&2; exit 2 ;;
esac
export SYNAPSE_MODELS="$WORK/model-cache"
"$SYNAPSE" models add "$ST" --name graphs-st "${ADD[@]}" >"$WORK/add-st.log" 2>&1 ||
	{ echo "ort-graphs: models add $ST failed: $(tail -n 2 "$WORK/add-st.log")" >&2; exit 1; }
# graph QUANTIZATION: the cached model.onnx of graphs-st's entry of that quantization.
graph() {
	"$SYNAPSE" models ls --json | "$PY" -c '
import json, os, sys
for e in json.load(sys.stdin):
    if e["name"].startswith("graphs-st") and e["quantization"] == sys.argv[1]:
        print(os.path.join(os.environ["SYNAPSE_MODELS"], e["digest"].replace(":", "-"), e["file"]))
' "$1"
}
CONVERTED=$(graph F32)
[ -f "$CONVERTED" ] || { echo "ort-graphs: no float32 graph in $SYNAPSE_MODELS" >&2; exit 1; }

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
# quantize SRC DST KIND: onnxruntime.quantization's int8 of SRC, KIND dynamic,
# qdq or qop, calibrated (static kinds) on the CALIB documents after the
# timed ones, truncated at 256 tokens by the model's own tokenizer.
quantize() {
	"$PY" - "$1" "$2" "$3" "$PUB/tokenizer.json" "$CORPUS" "$DOCS" "$CALIB" <<'PY' 2>"$2.log"
import collections, itertools, json, sys
import numpy as np, onnx, onnxruntime as ort
from onnxruntime import quantization as q
from tokenizers import Tokenizer
src, dst, kind, tok, corpus, skip, n = sys.argv[1:]
if kind == "dynamic":
    q.quantize_dynamic(src, dst, op_types_to_quantize=["MatMul"], per_channel=True, weight_type=q.QuantType.QInt8)
else:
    t = Tokenizer.from_file(tok)
    t.enable_truncation(256)
    with open(corpus) as f:
        docs = [json.loads(l) for l in itertools.islice(f, int(skip), int(skip) + int(n))]
    names = {i.name for i in ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()}
    def feeds():
        for d in docs:
            e = t.encode((d.get("title", "") + " " + d["text"]).strip())
            x = {"input_ids": e.ids, "attention_mask": e.attention_mask, "token_type_ids": e.type_ids}
            yield {k: np.array([v], dtype=np.int64) for k, v in x.items() if k in names}
    class Reader(q.CalibrationDataReader):
        def __init__(self): self.it = feeds()
        def get_next(self): return next(self.it, None)
    # The weights' MatMuls only, as the dynamic graphs: attention's two
    # products (both inputs activations) stay float32.
    m = onnx.load(src)
    consts = {i.name for i in m.graph.initializer}
    acts = [n.name for n in m.graph.node if n.op_type == "MatMul" and n.input[1] not in consts]
    q.quantize_static(src, dst, Reader(), quant_format=q.QuantFormat.QDQ if kind == "qdq" else q.QuantFormat.QOperator,
                      op_types_to_quantize=["MatMul"], nodes_to_exclude=acts, per_channel=True, activation_type=q.QuantType.QUInt8,
                      weight_type=q.QuantType.QInt8, calibrate_method=q.CalibrationMethod.MinMax)
ops = collections.Counter(n.op_type for n in onnx.load(dst).graph.node)
print(f"ort-graphs: {dst}: " + ", ".join(f"{k} {v}" for k, v in ops.most_common(8)), file=sys.stderr)
PY
	grep '^ort-graphs' "$2.log" >&2 || { tail -n 5 "$2.log" >&2; exit 1; }
}
dir synapse-st "$CONVERTED"
if [ "$SET" = fused ]; then
	optimize "$PUB/model.onnx" "$WORK/publisher-ort.onnx"
	optimize "$CONVERTED" "$WORK/synapse-ort.onnx"
	dir publisher "$PUB/model.onnx"
	dir publisher-ort "$WORK/publisher-ort.onnx"
	dir synapse-ort "$WORK/synapse-ort.onnx"
	NAMES=(synapse-st publisher publisher-ort synapse-ort)
else
	dir synapse-int8 "$(graph INT8)"
	for kind in dynamic qdq qop; do
		quantize "$CONVERTED" "$WORK/ort-$kind.onnx" $kind
	done
	dir ort-dynamic "$WORK/ort-dynamic.onnx"
	dir ort-static-qdq "$WORK/ort-qdq.onnx"
	dir ort-static-qop "$WORK/ort-qop.onnx"
	NAMES=(synapse-st synapse-int8 ort-dynamic ort-static-qdq ort-static-qop)
fi

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

echo "ort-graphs: SET=$SET, $DOCS documents, $ROUNDS rounds, $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
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
