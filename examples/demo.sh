#!/usr/bin/env bash
# make demo: embeds the bundled corpus (examples/corpus.jsonl: 80 documents,
# 40 topics, two documents each) with a real model, all-MiniLM-L6-v2, and
# reads the output back (examples/readback), printing each document's
# nearest neighbour and how many are on the document's own topic.
#
#   examples/demo.sh OUT_DIR
#
# The model (the Hub's sentence-transformers directory: model.safetensors,
# tokenizer.json, modules.json, …) is fetched by examples/models/fetch.sh
# (pinned, sha256-checked) into $SYNAPSE_REAL_MODELS or .cache/models, and
# synapse converts it to ONNX on first use. Where the machine cannot fetch
# it, the demo says why and falls back to a model synapse learns from the
# corpus itself (gen-model --kind word-vectors), so the demo still runs
# offline. SYNAPSE_DEMO_MODEL=learned takes the fallback on purpose.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:?usage: demo.sh OUT_DIR}
models=${SYNAPSE_REAL_MODELS:-"$root/.cache/models"}
name=${SYNAPSE_DEMO_MODEL:-all-MiniLM-L6-v2}
# synapse converts the model's safetensors directory to ONNX on first use,
# into a model cache the demo keeps beside its output.
export SYNAPSE_MODELS=${SYNAPSE_MODELS:-$out/models}
synapse="$root/bin/synapse"
mkdir -p "$out"

model=
if [ "$name" != learned ]; then
  log="$out/fetch.log"
  if bash "$here/models/fetch.sh" --dest "$models" "$name" >"$log" 2>&1; then
    model="$models/$name"
    echo "demo: model $name (sentence-transformers' all-MiniLM-L6-v2 as the Hub has it: safetensors, tokenizer, modules; fetched by examples/models/fetch.sh into $models)"
  else
    echo "demo: could not fetch the real model $name, so this demo uses a model learned from the corpus instead." >&2
    echo "demo: why (from $log):" >&2
    tail -n 5 "$log" | sed 's/^/demo:   /' >&2
  fi
fi
if [ -z "$model" ]; then
  model="$out/demo-wordvec.gguf"
  echo "demo: model learned from the corpus (gen-model --kind word-vectors; docs/wordvec.md)"
  "$synapse" gen-model --kind word-vectors --train "$root/examples/corpus.jsonl" --min-count 1 --dims 62 --window 10 \
    --out "$model"
fi

"$synapse" embed "$root/examples/corpus.jsonl" -m "$model" --text-field title --text-field text -o "$out/vectors.arrow"
cd "$root" && go run ./examples/readback "$out/vectors.arrow"
