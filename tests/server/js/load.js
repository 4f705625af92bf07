// Many concurrent streaming clients, some of which leave mid-stream. Every client that stays
// must get a complete stream; afterwards no KV block may remain in use.
// Usage: node load.js BASE_URL MODEL CLIENTS LEAVERS MAX_TOKENS [expect-preemption]
const { assert, run, idle_blocks, metric, prompt_ids } = require('./check.js');

const [base, model, clients, leavers, max_tokens] = process.argv.slice(2, 7).map((v, i) => (i < 2 ? v : Number(v)));
const expect_preemption = process.argv[7] === 'expect-preemption';

async function stream_one(i, leave) {
  const ctrl = new AbortController();
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    signal: ctrl.signal,
    body: JSON.stringify({ model, prompt: prompt_ids(8 + (i % 24), i), max_tokens, stream: true, ignore_eos: true,
      return_token_ids: true, temperature: 0.8, seed: i, stream_options: { include_usage: true } }),
  });
  assert.equal(res.status, 200, `client ${i}: status ${res.status}`);
  const decoder = new TextDecoder();
  let buf = '';
  let tokens = 0;
  let done = false;
  let usage = null;
  try {
    for await (const part of res.body) {
      buf += decoder.decode(part, { stream: true });
      let at;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, at);
        buf = buf.slice(at + 2);
        const data = event.replace(/^data: /, '');
        if (data === '[DONE]') { done = true; continue; }
        const chunk = JSON.parse(data);
        assert.ok(!chunk.error, `client ${i}: ${JSON.stringify(chunk.error)}`);
        if (chunk.usage) usage = chunk.usage;
        for (const c of chunk.choices) tokens += c.token_ids.length;
        if (leave && tokens > 0) {
          ctrl.abort();
          return 'left';
        }
      }
    }
  } catch (e) {
    if (leave && e.name === 'AbortError') return 'left';
    throw e;
  }
  assert.ok(done, `client ${i}: no [DONE]`);
  assert.equal(tokens, max_tokens, `client ${i}: ${tokens} tokens`);
  assert.equal(usage.completion_tokens, max_tokens);
  return 'done';
}

run({
  async [`${clients} concurrent streams, ${leavers} leaving mid-stream`]() {
    const t0 = Date.now();
    const results = await Promise.allSettled(Array.from({ length: clients }, (_, i) => stream_one(i, i < leavers)));
    const failures = results.filter((r) => r.status === 'rejected');
    assert.equal(failures.length, 0, failures.slice(0, 3).map((f) => f.reason && f.reason.message).join('; '));
    const done = results.filter((r) => r.value === 'done').length;
    assert.equal(done, clients - leavers);
    console.log(`${clients} streams in ${Date.now() - t0} ms`);
  },

  async 'KV blocks return to idle'() {
    assert.equal(await idle_blocks(base), 0);
    assert.equal(await metric(base, 'tessera_num_requests_running'), 0);
    if (expect_preemption) assert.ok((await metric(base, 'tessera_preemptions_total')) > 0, 'no sequence was preempted');
  },
});
