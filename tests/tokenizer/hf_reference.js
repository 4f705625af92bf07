#!/usr/bin/env node
// Reference for the tokenizer tests: runs Hugging Face tokenizers (npm `tokenizers`, the Rust
// library) on a tokenizer.json. Reads one JSON string per line on stdin and prints, per line,
// {"ids", "ids_special", "decoded", "decoded_special", "decoded_skip"} as JSON.
// Usage: node hf_reference.js TOKENIZER_JSON [--plain-special]
//   --plain-special: special added tokens are not matched in the text (encoded as plain text).
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', 'node_modules', 'tokenizers'));

const [tokPath, flag] = process.argv.slice(2);
let tk;
if (flag === '--plain-special') {
  // The binding cannot set encode_special_tokens; giving special tokens a content that never
  // occurs in the texts has the same effect. Ids stay in place: the library numbers added tokens
  // after the model's vocabulary, so a special token that is also a vocabulary entry is renamed
  // there too (keeping the vocabulary's size).
  const spec = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
  const vocab = spec.model.vocab;
  for (const t of spec.added_tokens || []) {
    if (!t.special) continue;
    const renamed = '\u{10FFFE}\u{10FFFF}' + t.id;
    if (vocab[t.content] === t.id) {
      delete vocab[t.content];
      vocab[renamed] = t.id;
    }
    t.content = renamed;
  }
  tk = Tokenizer.fromString(JSON.stringify(spec));
} else {
  tk = Tokenizer.fromFile(tokPath);
}

(async () => {
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const line of lines) {
    const text = JSON.parse(line);
    const ids = (await tk.encode(text, null, { addSpecialTokens: false })).getIds();
    const idsSpecial = (await tk.encode(text, null, { addSpecialTokens: true })).getIds();
    out.push(JSON.stringify({
      ids, ids_special: idsSpecial,
      decoded: await tk.decode(ids, false),
      decoded_special: await tk.decode(idsSpecial, false),
      decoded_skip: await tk.decode(idsSpecial, true),
    }));
  }
  process.stdout.write(out.join('\n') + '\n');
})().catch((e) => { console.error(e); process.exit(1); });
