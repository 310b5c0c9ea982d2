// Reference tokenizer for the parity tests (never used by synapse itself):
// Hugging Face tokenizers through the npm package @anush008/tokenizers
// (native builds of the Rust library), loaded from $SYNAPSE_HF_TOKENIZERS.
//
// usage: node hf_reference.js TOKENIZER.json < requests.jsonl > ids.jsonl
// Each request line is {"text": "...", "add_special": bool, "parse_special": bool};
// each answer line is {"ids": [...]} in the same order. parse_special false
// is the library's encode_special_tokens: the tokenizer is rebuilt without
// its special added tokens, so their text is tokenized as ordinary text.
// Truncation and padding are disabled.
'use strict';
const fs = require('fs');
const path = require('path');
const dir = process.env.SYNAPSE_HF_TOKENIZERS;
if (!dir) {
  console.error('hf_reference.js: set SYNAPSE_HF_TOKENIZERS to the @anush008/tokenizers package directory');
  process.exit(2);
}
const { Tokenizer } = require(path.join(dir, 'index.js'));

function load(json, keepSpecial) {
  const j = JSON.parse(json);
  if (!keepSpecial) j.added_tokens = (j.added_tokens || []).filter((t) => !t.special);
  const t = Tokenizer.fromString(JSON.stringify(j));
  t.disableTruncation();
  t.disablePadding();
  return t;
}

async function main() {
  const json = fs.readFileSync(process.argv[2], 'utf8');
  const toks = { true: load(json, true), false: load(json, false) };
  for (const t of JSON.parse(json).added_tokens || []) {
    if (!t.special && toks.true.tokenToId(t.content) !== toks.false.tokenToId(t.content)) {
      console.error(`hf_reference.js: dropping the special tokens renumbers added token ${JSON.stringify(t.content)}; list new special tokens after the others`);
      process.exit(3);
    }
  }
  const reqs = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  const out = new Array(reqs.length);
  const groups = {};
  reqs.forEach((r, i) => {
    const k = `${!!r.parse_special}/${!!r.add_special}`;
    (groups[k] = groups[k] || []).push(i);
  });
  for (const [k, idx] of Object.entries(groups)) {
    const [parse, add] = k.split('/');
    for (let s = 0; s < idx.length; s += 256) {
      const chunk = idx.slice(s, s + 256);
      const encs = await toks[parse].encodeBatch(chunk.map((i) => reqs[i].text), { addSpecialTokens: add === 'true' });
      encs.forEach((e, n) => { out[chunk[n]] = e.getIds(); });
    }
  }
  process.stdout.write(out.map((ids) => JSON.stringify({ ids })).join('\n') + (out.length ? '\n' : ''));
}

main().catch((e) => { console.error(e); process.exit(1); });
