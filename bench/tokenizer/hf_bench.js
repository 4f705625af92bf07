#!/usr/bin/env node
// Hugging Face tokenizers (npm `tokenizers`, Rust) side of bench_tokenizer: load time and
// single-call encode throughput on the same chunks, by wall time and by CPU time (the process's,
// all threads). Prints one JSON object.
// Usage: node hf_bench.js TOKENIZER_JSON CHUNKS_JSONL REPEATS
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', '..', 'tests', 'node_modules', 'tokenizers'));

const [tokPath, chunksPath, repeatsArg] = process.argv.slice(2);
const chunks = fs.readFileSync(chunksPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
const bytes = chunks.reduce((n, c) => n + Buffer.byteLength(c, 'utf8'), 0);

(async () => {
  let t0 = process.hrtime.bigint();
  const tk = Tokenizer.fromFile(tokPath);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  let best = Infinity, bestCpu = Infinity, tokens = 0;
  for (let r = 0; r < Number(repeatsArg); r++) {
    tokens = 0;
    t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    // One encode at a time: each runs on a single thread.
    for (const c of chunks) tokens += (await tk.encode(c, null, { addSpecialTokens: false })).getIds().length;
    const cpu = process.cpuUsage(c0);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
    bestCpu = Math.min(bestCpu, (cpu.user + cpu.system) / 1e6);
  }
  console.log(JSON.stringify({ load_ms: loadMs, mb_s: bytes / 1e6 / best, cpu_mb_s: bytes / 1e6 / bestCpu, tokens }));
})().catch((e) => { console.error(e); process.exit(1); });
