// tjs-embed.mjs embeds documents with transformers.js (npm
// @huggingface/transformers, feature-extraction, mean pooling, normalized,
// batch 1: its fastest setting on CPU, since its batches are padded) and
// prints one JSON line: documents, tokens, seconds embedding, seconds in all.
//
//   node tjs-embed.mjs MODEL_ROOT MODEL_NAME fp32|q8 DOCS.jsonl
//
// MODEL_ROOT/MODEL_NAME holds config.json, tokenizer.json and
// onnx/model.onnx (fp32) or onnx/model_quantized.onnx (q8), as transformers.js
// lays out a model; nothing is downloaded. With "--prepare N OUT.jsonl"
// instead of the last argument it writes DOCS cut to N tokens, as text
// (decoded from the first N-2 content tokens), for both tools to embed.
const t0 = performance.now();
const [root, name, dtype, docsPath, ...rest] = process.argv.slice(2);
const { pipeline, AutoTokenizer, env } = await import("@huggingface/transformers");
const fs = await import("node:fs");
env.allowRemoteModels = false;
env.localModelPath = root;

const lines = fs.readFileSync(docsPath, "utf8").split("\n").filter((l) => l.trim() !== "");
const docs = lines.map((l) => JSON.parse(l));
const text = (d) => (d.title ? d.title + "\n" : "") + d.text;

if (rest[0] === "--prepare") {
  const n = Number(rest[1]);
  const tok = await AutoTokenizer.from_pretrained(name);
  const out = docs.map((d) => {
    const ids = tok.encode(text(d), { add_special_tokens: false }).slice(0, n - 2);
    return JSON.stringify({ _id: d._id ?? d.id, text: tok.decode(ids) });
  });
  fs.writeFileSync(rest[2], out.join("\n") + "\n");
  process.exit(0);
}

const extract = await pipeline("feature-extraction", name, { dtype });
const tok = extract.tokenizer;
const c0 = performance.now();
let tokens = 0;
for (const d of docs) tokens += tok.encode(text(d)).length; // not counted in the times
const t1 = performance.now();
for (const d of docs) {
  await extract(text(d), { pooling: "mean", normalize: true });
}
const t2 = performance.now();
console.log(JSON.stringify({ docs: docs.length, tokens, embed_s: (t2 - t1) / 1000, total_s: (t2 - t0 - (t1 - c0)) / 1000 }));
