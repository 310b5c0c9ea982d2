#!/usr/bin/env bash
# peers-embed.sh: synapse embed against the Python tools users pick for batch
# embedding — sentence-transformers (torch, and its ONNX Runtime backend),
# infinity-emb's offline engine and fastembed — on the same real model (all-MiniLM-L6-v2), the same SciFact
# documents (MTEB's title + " " + text, truncated at the model's 256 tokens),
# whole processes on this machine, in interleaved rounds with the order
# rotated. docs/peers.md holds the figures and says how to read them.
#
#   examples/bench/peers-embed.sh [DOCS=2000] [ROUNDS=3]
#
# Needs: make real-models (the model's sentence-transformers directory and
# its ONNX exports in .cache/models), make build. The peers are installed by
# the script from PyPI into a virtual environment, CACHE/venv: the pins of
# examples/models/requirements-ref.txt (CPU torch, sentence-transformers,
# onnxruntime) with --no-deps, then fastembed and optimum-onnx constrained
# by them. Environment: SYNAPSE (default bin/synapse), MODELS (default
# .cache/models), CORPUS (default ../shared/fixtures/corpora/scifact/
# corpus.jsonl), CACHE (default .cache/peers-embed), WORK (default a new
# temporary directory).
#
# Every contender's vectors are compared with sentence-transformers' (torch)
# of the same round: the min cosine is printed beside its time. Each run is
# timed as a whole process by /usr/bin/time (wall, user + system CPU, peak
# RSS); the Python peers also report their model load apart, synapse its
# embedding time in its summary.
set -euo pipefail

DOCS=${1:-2000}
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SYNAPSE=${SYNAPSE:-$ROOT/bin/synapse}
MODELS=${MODELS:-$ROOT/.cache/models}
CORPUS=${CORPUS:-$ROOT/../shared/fixtures/corpora/scifact/corpus.jsonl}
CACHE=${CACHE:-$ROOT/.cache/peers-embed}
WORK=${WORK:-$(mktemp -d)}
FASTEMBED_VERSION=0.9.1

ST="$MODELS/all-MiniLM-L6-v2"
ONNX="$MODELS/all-MiniLM-L6-v2-onnx"
ONNXQ="$MODELS/all-MiniLM-L6-v2-onnx-q"
for d in "$ST" "$ONNX" "$ONNXQ"; do
	[ -d "$d" ] || { echo "peers-embed: $d is missing: run make real-models" >&2; exit 1; }
done
if [ ! -x "$SYNAPSE" ]; then
	echo "peers-embed: $SYNAPSE is missing: run make build" >&2
	exit 1
fi

# The peers' environments, once. sentence-transformers (and torch) under
# the pins of the reference; fastembed in a venv of its own, since it wants
# huggingface_hub < 2 where sentence-transformers 6 pins 2.x.
# sentence-transformers' onnx backend needs optimum-onnx, whose 0.1.0 wants
# transformers < 4.58 where sentence-transformers 6 needs >= 5: it runs
# from a venv of its own, venv-st-onnx, with sentence-transformers 5.1.2
# and transformers 4.57.1 (the last that optimum-onnx takes) over the same
# torch, which a .pth file lends it from venv (its own packages first).
ST_ONNX_PINS="sentence-transformers==5.1.2 transformers==4.57.1 optimum==2.1.0 optimum-onnx==0.1.0 onnx==1.23.2
tokenizers==0.22.1 huggingface-hub==0.36.0 onnxruntime==1.32.0 requests==2.34.2 urllib3==2.8.0
charset-normalizer==3.5.3 certifi==2026.10.19.post1 tqdm==4.70.1 pillow==13.0.0 ml_dtypes==0.7.0
typing_extensions==4.16.0"
# infinity-emb 0.0.78 wants numpy < 2 and sentence-transformers < 4: a venv
# of its own too (numpy 1.26.4, sentence-transformers 3.4.1), over the
# same torch.
INF_PINS="infinity-emb==0.0.78 numpy==1.26.4 sentence-transformers==3.4.1 transformers==4.57.1 tokenizers==0.22.1
huggingface-hub==0.36.0 requests==2.34.2 urllib3==2.8.0 charset-normalizer==3.5.3 certifi==2026.10.19.post1
tqdm==4.70.1 pillow==13.0.0 typing_extensions==4.16.0 rich==13.9.4"
mkdir -p "$CACHE" "$WORK"
PY="$CACHE/venv/bin/python"
FE_PY="$CACHE/venv-fastembed/bin/python"
STAMP="$CACHE/venv/.installed-$(sha256sum <"$ROOT/examples/models/requirements-ref.txt" | cut -c1-16)"
if [ ! -f "$STAMP" ]; then
	echo "peers-embed: installing sentence-transformers into $CACHE/venv (once; about 5 GB)" >&2
	rm -rf "$CACHE/venv"
	python3 -m venv "$CACHE/venv"
	"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: \
		-r "$ROOT/examples/models/requirements-ref.txt"
	touch "$STAMP"
fi
FE_STAMP="$CACHE/venv-fastembed/.installed-$FASTEMBED_VERSION"
if [ ! -f "$FE_STAMP" ]; then
	echo "peers-embed: installing fastembed $FASTEMBED_VERSION into $CACHE/venv-fastembed (once)" >&2
	rm -rf "$CACHE/venv-fastembed"
	python3 -m venv "$CACHE/venv-fastembed"
	if "$FE_PY" -m pip install --quiet --disable-pip-version-check --only-binary :all: "fastembed==$FASTEMBED_VERSION"; then
		touch "$FE_STAMP"
	else
		echo "peers-embed: fastembed $FASTEMBED_VERSION did not install: its rows are left out" >&2
	fi
fi
# torch_venv NAME WHAT PINS: a venv CACHE/NAME of PINS (--no-deps) that
# borrows torch and the rest from venv through a .pth file, once; its
# stamp file's path on stdout when it is installed, nothing when not.
torch_venv() {
	local name=$1 what=$2 pins=$3
	local py="$CACHE/$name/bin/python" stamp
	stamp="$CACHE/$name/.installed-$(echo "$pins" | sha256sum | cut -c1-16)"
	if [ ! -f "$stamp" ]; then
		echo "peers-embed: installing $what into $CACHE/$name (once)" >&2
		rm -rf "${CACHE:?}/$name"
		python3 -m venv "$CACHE/$name"
		# shellcheck disable=SC2086 # the pins are words
		if "$py" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: $pins >&2; then
			"$PY" -c 'import site; print(site.getsitepackages()[0])' \
				>"$("$py" -c 'import site; print(site.getsitepackages()[0])')/zz-synapse-bench-torch.pth"
			touch "$stamp"
		else
			echo "peers-embed: $what did not install: its rows are left out" >&2
		fi
	fi
	[ -f "$stamp" ] && echo "$stamp"
	return 0
}
STO_PY="$CACHE/venv-st-onnx/bin/python"
STO_STAMP=$(torch_venv venv-st-onnx "sentence-transformers 5.1.2 with its onnx backend" "$ST_ONNX_PINS")
INF_PY="$CACHE/venv-infinity/bin/python"
INF_STAMP=$(torch_venv venv-infinity "infinity-emb 0.0.78" "$INF_PINS")
export INFINITY_ANONYMOUS_USAGE_STATS=0
"$PY" -m pip freeze >"$WORK/venv.freeze" 2>/dev/null || true
"$FE_PY" -m pip freeze >"$WORK/venv-fastembed.freeze" 2>/dev/null || true

# The texts, as MTEB joins a BEIR document.
head -n "$DOCS" "$CORPUS" | "$PY" -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(json.dumps({"_id": d["_id"], "text": (d.get("title", "") + " " + d["text"]).strip()}, ensure_ascii=False))
' >"$WORK/texts.jsonl"

# Model directories in each peer's layout, all of the same weights: the
# sentence-transformers directory with the ONNX exports as onnx/model.onnx
# and onnx/model_quantized.onnx (sentence-transformers' onnx backend), and a
# flat one with model.onnx (fastembed's custom-model layout).
B="$WORK/st-dir"
mkdir -p "$B/onnx" "$WORK/fe-fp32" "$WORK/fe-int8"
for f in "$ST"/*; do ln -sf "$f" "$B/"; done
ln -sf "$ONNX/model.onnx" "$B/onnx/model.onnx"
ln -sf "$ONNXQ/model.onnx" "$B/onnx/model_quantized.onnx"
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
	ln -sf "$ST/$f" "$WORK/fe-fp32/$f"
	ln -sf "$ST/$f" "$WORK/fe-int8/$f"
done
ln -sf "$ONNX/model.onnx" "$WORK/fe-fp32/model.onnx"
ln -sf "$ONNXQ/model.onnx" "$WORK/fe-int8/model.onnx"

# contender NAME KIND CMD...: KIND is fp32 or int8. One line per contender.
CONTENDERS=()
add() { CONTENDERS+=("$*"); }
add "st-torch-b32 fp32 py st-torch $B --batch 32"
add "st-torch-b8 fp32 py st-torch $B --batch 8"
# (batch 128 measured no faster than 8 here: docs/peers.md)
# sentence-transformers' onnx backend over the publisher's graph, and its
# own exports of it: O4 (optimum's ORTOptimizer at its highest level) and
# the dynamic int8 quantization for AVX-512 VNNI, made once here.
if [ -n "$STO_STAMP" ] && HF_HUB_OFFLINE=1 "$STO_PY" "$HERE/peers_embed.py" --export "$B" >"$WORK/st-export.log" 2>&1; then
	add "st-onnx-b32 fp32 sto st-onnx $B --batch 32"
	add "st-onnx-b8 fp32 sto st-onnx $B --batch 8"
	add "st-onnx-O4 fp32 sto st-onnx $B --batch 8 --onnx-file onnx/model_O4.onnx"
	add "st-onnx-qint8 int8 sto st-onnx $B --batch 8 --onnx-file onnx/model_qint8_avx512_vnni.onnx"
elif [ -n "$STO_STAMP" ]; then
	echo "peers-embed: sentence-transformers' onnx exports failed (see $WORK/st-export.log): no st-onnx rows" >&2
fi
if [ -n "$INF_STAMP" ]; then
	add "infinity-b32 fp32 inf infinity $ST --batch 32"
	add "infinity-b8 fp32 inf infinity $ST --batch 8"
fi
if [ -f "$FE_STAMP" ]; then
	add "fastembed fp32 fe fastembed $WORK/fe-fp32 --batch 256"
	add "fastembed-q int8 fe fastembed $WORK/fe-int8 --batch 256"
fi
add "synapse-onnx fp32 syn -m $ONNX"
add "synapse-onnx-q int8 syn -m $ONNXQ"
# synapse's own int8 of the fp32 graph (models add --quantize int8), and
# its GGUF rows when this synapse converts a sentence-transformers directory
# to GGUF (models add DIR --format gguf: F32, with F16 and Q8_0 variants;
# the GGUF rows of the float class are F16, as llama.cpp users run them).
export SYNAPSE_MODELS="$WORK/model-cache"
# Its quality report may call the int8 entry degraded: it runs with
# --allow-degraded, and its cosine is reported like every other.
if "$SYNAPSE" models add "$ONNX" --name bench-onnx --quantize int8 >"$WORK/add-int8.log" 2>&1; then
	add "synapse-onnx-int8 int8 syn -m bench-onnx:int8 --allow-degraded"
else
	echo "peers-embed: models add --quantize int8 failed (see $WORK/add-int8.log): its row is left out" >&2
fi
# The sentence-transformers directory as users have it, converted by
# synapse to ONNX (once, here, so that no round pays the conversion).
if "$SYNAPSE" models add "$ST" --name bench-st >"$WORK/add-st.log" 2>&1; then
	add "synapse-st fp32 syn -m bench-st"
else
	echo "peers-embed: this synapse does not convert $ST to ONNX (see $WORK/add-st.log): no synapse-st row" >&2
fi
if "$SYNAPSE" models add "$ST" --format gguf --name bench-gguf --quantize f16 >"$WORK/add-gguf.log" 2>&1 &&
	"$SYNAPSE" models add "$ST" --format gguf --name bench-gguf --quantize q8_0 >>"$WORK/add-gguf.log" 2>&1; then
	add "synapse-gguf-f16 fp32 syn -m bench-gguf:f16 --allow-degraded"
	add "synapse-gguf-q8_0 int8 syn -m bench-gguf:q8_0 --allow-degraded"
else
	echo "peers-embed: this synapse does not convert $ST to GGUF (see $WORK/add-gguf.log): no GGUF rows" >&2
fi
"$SYNAPSE" models ls >"$WORK/models.txt" 2>&1 || true

# run NAME KIND how ARGS...: one whole-process run; prints a TSV row.
run() {
	local name=$1 kind=$2 how=$3
	shift 3
	local out="$WORK/$name.f32" tfile="$WORK/$name.time" log="$WORK/$name.log"
	local rc=0
	case "$how" in
	py | fe | sto | inf)
		local py=$PY
		[ "$how" = fe ] && py=$FE_PY
		[ "$how" = sto ] && py=$STO_PY
		[ "$how" = inf ] && py=$INF_PY
		HF_HUB_OFFLINE=1 /usr/bin/time -f "%e %U %S %M" -o "$tfile" "$py" "$HERE/peers_embed.py" "$1" "$2" "$WORK/texts.jsonl" "$out" "${@:3}" >"$log" 2>"$log.err" || rc=$? ;;
	syn) /usr/bin/time -f "%e %U %S %M" -o "$tfile" "$SYNAPSE" embed "$WORK/texts.jsonl" "$@" --id-field _id --truncate \
		--chunk-tokens 254 -o "$WORK/$name.arrow" >"$log" 2>"$log.err" || rc=$? ;;
	esac
	if [ "$rc" != 0 ]; then
		echo "peers-embed: $name failed (exit $rc): $(tail -n 3 "$log.err" | tr '\n' ' ')" >&2
		return 0
	fi
	"$PY" - "$name" "$kind" "$how" "$tfile" "$log" "$out" "$WORK/$name.arrow" "$WORK/st-torch-b32.f32" "$DOCS" <<'PY'
import json, re, sys
import numpy as np
name, kind, how, tfile, log, out, arrow, ref, docs = sys.argv[1:]
wall, user, sys_, rss = open(tfile).read().split()[-4:]
load = encode = ""
if how in ("py", "fe", "sto", "inf"):
    j = json.loads(open(log).read().strip().splitlines()[-1])
    load, encode = j["load_s"], j["encode_s"]
    v = np.fromfile(out, dtype="<f4").reshape(int(docs), -1)
else:
    import pyarrow.ipc as ipc
    t = ipc.open_file(arrow).read_all()
    v = np.array(t.column("embedding").to_pylist(), dtype=np.float32)
    m = re.search(r"tokens/s over ((?:[0-9.]+h)?(?:[0-9.]+m(?!s))?(?:[0-9.]+(?:ms|s))?)\)", open(log).read() + open(log + ".err").read())
    if m:  # a Go duration: 1m5.2s, 3.1s, 850ms
        encode = 0.0
        for num, unit in re.findall(r"([0-9.]+)(h|ms|m|s)", m.group(1)):
            encode += float(num) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
        encode = round(encode, 3)
        load = round(float(wall) - encode, 3)
try:
    r = np.fromfile(ref, dtype="<f4").reshape(v.shape)
    cos = float(np.min(np.sum(v * r, axis=1) / np.linalg.norm(v, axis=1) / np.linalg.norm(r, axis=1)))
    cos = f"{cos:.6f}"
except Exception:
    cos = "-"
print(f"{name}\t{kind}\t{wall}\t{float(user) + float(sys_):.2f}\t{int(rss) // 1024}\t{load}\t{encode}\t{int(docs) / float(wall):.1f}\t{cos}")
PY
}

echo "peers-embed: $DOCS documents, $ROUNDS rounds, $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "peers-embed: work in $WORK"
RESULTS="$WORK/results.tsv"
: >"$RESULTS"
# st-torch-b32 first in round 0: it is the reference the others are checked against.
run ${CONTENDERS[0]} >/dev/null
n=${#CONTENDERS[@]}
for ((r = 0; r < ROUNDS; r++)); do
	echo "round $((r + 1)), load $(cut -d' ' -f1-3 /proc/loadavg):"
	for ((i = 0; i < n; i++)); do
		c=${CONTENDERS[$(((i + r) % n))]}
		row=$(run $c)
		[ -n "$row" ] || continue
		echo "$row" | tee -a "$RESULTS" | awk -F'\t' '{printf "  %-20s %-4s wall %7ss cpu %7ss rss %5s MiB load %6s encode %7s docs/s %7s min cos %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
	done
done

echo
echo "medians over $ROUNDS rounds (docs/s = documents / process wall time, model load included):"
"$PY" - "$RESULTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    rows.setdefault((f[0], f[1]), []).append(f)
med = {}
for (name, kind), fs in rows.items():
    med[(name, kind)] = {
        "dps": statistics.median(float(f[7]) for f in fs),
        "wall": statistics.median(float(f[2]) for f in fs),
        "cpu": statistics.median(float(f[3]) for f in fs),
        "rss": max(int(f[4]) for f in fs),
        "load": statistics.median(float(f[5]) for f in fs if f[5]) if any(f[5] for f in fs) else float("nan"),
        "cos": min(fs, key=lambda f: f[8])[8],
    }
def best_peer(kind, key):
    c = [(v[key], n) for (n, k), v in med.items() if k == kind and not n.startswith("synapse-")]
    return max(c) if c else (None, None)
for v in med.values():
    v["dpc"] = v["dps"] * v["wall"] / v["cpu"]  # documents per CPU-second
print("| contender | kind | docs/s | docs/CPU-s | wall s | CPU s | model load s | peak RSS MiB | min cosine to ST | × fastest peer (docs/s) | × fastest peer (docs/CPU-s) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (name, kind), v in sorted(med.items(), key=lambda kv: (kv[0][1], -kv[1]["dps"])):
    ratios = []
    for key in ("dps", "dpc"):
        b, bname = best_peer(kind, key)
        ratios.append(f"{v[key] / b:.2f}× {bname}" if b else "-")
    print(f"| {name} | {kind} | {v['dps']:.1f} | {v['dpc']:.1f} | {v['wall']:.2f} | {v['cpu']:.2f} | {v['load']:.2f} | {v['rss']} | {v['cos']} | {ratios[0]} | {ratios[1]} |")
PY
