// Reference code point properties for TestHFUnicodeTables (never used by
// synapse itself): for every code point, what the Hugging Face tokenizers
// components of @anush008/tokenizers ($SYNAPSE_HF_TOKENIZERS) make of it.
// One tab-separated line per code point (surrogates skipped):
//   hex, clean_text, NFD, strip_accents (NFD + drop Mn), lowercase,
//   BertPreTokenizer class (w whitespace, p punctuation, o other),
//   StripAccents (m: dropped, o: kept), Whitespace class (w word, s space, o other),
//   Digits (n: numeric, o), NFKD, NFC, NFKC
// where the normalizer columns hold the output's code points in hex.
'use strict';
const path = require('path');
const t = require(path.join(process.env.SYNAPSE_HF_TOKENIZERS, 'index.js'));
const clean = t.bertNormalizer({ cleanText: true, handleChineseChars: false, stripAccents: false, lowercase: false });
const strip = t.bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: true, lowercase: false });
const nfd = t.nfdNormalizer(), nfkd = t.nfkdNormalizer(), nfc = t.nfcNormalizer(), nfkc = t.nfkcNormalizer();
const lower = t.lowercase(), sa = t.stripAccentsNormalizer();
const bert = t.bertPreTokenizer(), ws = t.whitespacePreTokenizer(), dg = t.digitsPreTokenizer(true);
const hex = (s) => Array.from(s).map((c) => c.codePointAt(0).toString(16)).join(' ');
const lines = [];
for (let cp = 0; cp < 0x110000; cp++) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const ch = String.fromCodePoint(cp);
  const p = bert.preTokenizeString('a' + ch + 'b').map((x) => x[0]);
  const pk = p.length === 2 && p[0] === 'a' && p[1] === 'b' ? 'w' : p.length === 3 ? 'p' : 'o';
  const w = ws.preTokenizeString('a' + ch + 'a').length;
  lines.push([cp.toString(16), hex(clean.normalizeString(ch)), hex(nfd.normalizeString(ch)), hex(strip.normalizeString(ch)),
    hex(lower.normalizeString(ch)), pk, sa.normalizeString(ch) === '' ? 'm' : 'o', w === 1 ? 'w' : w === 2 ? 's' : 'o',
    dg.preTokenizeString('a' + ch + 'a').length === 3 ? 'n' : 'o',
    hex(nfkd.normalizeString(ch)), hex(nfc.normalizeString(ch)), hex(nfkc.normalizeString(ch))].join('\t'));
}
process.stdout.write(lines.join('\n') + '\n');
