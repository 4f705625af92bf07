// Prefix caching seen from a client: a conversation's second turn reports the first turn as
// cached and its first token comes sooner. Usage: node prefix_cache.js BASE_URL MODEL
const { assert, run, metric, prompt_ids } = require('./check.js');

const [base, model] = process.argv.slice(2);

// Streams a completion; returns the generated ids and the usage.
async function turn(prompt, max_tokens) {
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens, temperature: 0, ignore_eos: true, stream: true,
      return_token_ids: true, stream_options: { include_usage: true } }),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  const ids = [];
  let usage = null;
  for (const event of text.split('\n\n')) {
    if (!event.startsWith('data: {')) continue;
    const chunk = JSON.parse(event.slice(6));
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) ids.push(...c.token_ids);
  }
  return { ids, usage };
}

// Time to the first streamed token, read as the chunks arrive.
async function ttft_of(prompt) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt, max_tokens: 2, temperature: 0, ignore_eos: true, stream: true, return_token_ids: true }),
  });
  const reader = res.body.getReader();
  const { value } = await reader.read();
  const t = performance.now() - t0;
  assert.ok(value && value.length > 0);
  while (!(await reader.read()).done);
  return t;
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

run({
  async 'the second turn reports the first as cached and its first token comes sooner'() {
    const first = [], second = [];
    for (let i = 0; i < 3; i++) {
      const turn1 = prompt_ids(500, 20 + i);
      first.push(await ttft_of(turn1));
      const r1 = await turn(turn1, 16);
      const turn2 = [...turn1, ...r1.ids, ...prompt_ids(12, 40 + i)];
      const t2 = await ttft_of(turn2);
      second.push(t2);
      const r2 = await turn(turn2, 4);
      assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= turn1.length,
        `cached ${r2.usage.prompt_tokens_details.cached_tokens} < ${turn1.length}`);
    }
    console.log(`TTFT median: first turn ${median(first).toFixed(1)} ms, second turn ${median(second).toFixed(1)} ms`);
    assert.ok(median(second) < median(first), `second turn ${median(second)} ms >= first ${median(first)} ms`);
    assert.ok((await metric(base, 'tessera_prefix_cache_hit_tokens_total')) >= 3 * 500);
  },
});
