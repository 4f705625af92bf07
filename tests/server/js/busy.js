// A burst larger than the running seats plus the waiting queue: the overflow is refused with
// 429 in OpenAI's shape, the rest complete. Usage: node busy.js BASE_URL MODEL REQUESTS
const { assert, run, idle_blocks, prompt_ids } = require('./check.js');

const [base, model, requests] = process.argv.slice(2);

run({
  async 'overflow is 429, the rest succeed'() {
    const results = await Promise.all(Array.from({ length: Number(requests) }, async (_, i) => {
      const res = await fetch(`${base}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model, prompt: prompt_ids(16, i), max_tokens: 200, ignore_eos: true }),
      });
      const body = await res.json();
      if (res.status === 429) assert.equal(body.error.type, 'rate_limit_error');
      else assert.equal(body.usage.completion_tokens, 200);
      return res.status;
    }));
    assert.ok(results.includes(429), `no 429 among ${results}`);
    assert.ok(results.includes(200), `no 200 among ${results}`);
    assert.deepEqual([...new Set(results)].sort(), [200, 429]);
  },

  async 'no KV blocks are left in use'() {
    assert.equal(await idle_blocks(base), 0);
  },
});
