// The official OpenAI client against /v1/completions with token-id prompts (models without a
// tokenizer): streaming and not, n > 1, seeds, stop ids, logprobs, usage, prefix caching.
// Usage: node completions_client.js BASE_URL MODEL API_KEY
const OpenAI = require('openai');
const { assert, run, idle_blocks, prompt_ids } = require('./check.js');

const [base, model, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

async function complete(params) {
  return client.completions.create({ model, return_token_ids: true, ...params });
}

// Concatenates a stream's chunks into the shape of a non-streamed response.
async function complete_streamed(params) {
  const stream = await client.completions.create({
    model, return_token_ids: true, stream: true, stream_options: { include_usage: true }, ...params,
  });
  const choices = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const acc = (choices[c.index] ??= { index: c.index, text: '', token_ids: [], finish_reason: null, logprobs: null });
      acc.text += c.text;
      acc.token_ids.push(...c.token_ids);
      if (c.finish_reason) acc.finish_reason = c.finish_reason;
      if (c.logprobs) {
        acc.logprobs ??= { tokens: [], token_logprobs: [], top_logprobs: [] };
        acc.logprobs.tokens.push(...c.logprobs.tokens);
        acc.logprobs.token_logprobs.push(...c.logprobs.token_logprobs);
        acc.logprobs.top_logprobs.push(...c.logprobs.top_logprobs);
      }
    }
  }
  return { choices, usage };
}

const sampled = { prompt: prompt_ids(12, 1), max_tokens: 12, temperature: 0.9, top_p: 0.95, seed: 1234, ignore_eos: true };

run({
  async 'non-streamed completion: ids, usage, finish reason'() {
    const r = await complete(sampled);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.model, model);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].token_ids.length, 12);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.deepEqual(r.prompt_token_ids, [sampled.prompt]);
    assert.equal(r.usage.prompt_tokens, 12);
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.usage.total_tokens, 24);
    assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  },

  async 'the same seed gives the same tokens; streamed equals non-streamed'() {
    const a = await complete(sampled);
    const b = await complete(sampled);
    assert.deepEqual(a.choices[0].token_ids, b.choices[0].token_ids);
    const s = await complete_streamed(sampled);
    assert.deepEqual(s.choices[0].token_ids, a.choices[0].token_ids);
    assert.equal(s.choices[0].finish_reason, 'length');
    assert.equal(s.usage.completion_tokens, 12);
    assert.equal(s.usage.prompt_tokens, 12);
  },

  async 'n > 1: one choice per index, streamed equals non-streamed'() {
    const params = { ...sampled, n: 3 };
    const r = await complete(params);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(r.usage.prompt_tokens, 12);
    assert.equal(r.usage.completion_tokens, 36);
    const single = await complete(sampled);
    assert.deepEqual(r.choices[0].token_ids, single.choices[0].token_ids);
    assert.notDeepEqual(r.choices[1].token_ids, r.choices[0].token_ids);
    const s = await complete_streamed(params);
    for (let i = 0; i < 3; i++) assert.deepEqual(s.choices[i].token_ids, r.choices[i].token_ids);
  },

  async 'several prompts in one request'() {
    const r = await complete({ prompt: [prompt_ids(5, 2), prompt_ids(7, 3)], max_tokens: 3, temperature: 0, n: 2 });
    assert.equal(r.choices.length, 4);
    assert.equal(r.usage.prompt_tokens, 12);
    assert.deepEqual(r.choices[0].token_ids, r.choices[1].token_ids);  // greedy
  },

  async 'a stop token id ends the text before it'() {
    const greedy = await complete({ prompt: prompt_ids(10, 4), max_tokens: 10, temperature: 0, ignore_eos: true });
    const ids = greedy.choices[0].token_ids;
    const stop = ids[4];
    const first = ids.indexOf(stop);
    for (const stream of [false, true]) {
      const params = { prompt: prompt_ids(10, 4), max_tokens: 10, temperature: 0, ignore_eos: true, stop_token_ids: [stop] };
      const r = stream ? await complete_streamed(params) : await complete(params);
      assert.deepEqual(r.choices[0].token_ids, ids.slice(0, first), `stream=${stream}`);
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.equal(r.usage.completion_tokens, first + 1);
    }
  },

  async 'min_tokens (vLLM): no stop token before that many tokens'() {
    const greedy = await complete({ prompt: prompt_ids(10, 4), max_tokens: 10, temperature: 0, ignore_eos: true });
    const ids = greedy.choices[0].token_ids;
    for (const stream of [false, true]) {
      // The greedy's first token is a stop id: without min_tokens the text ends at once; with
      // min_tokens 4 the first four tokens are drawn from the others, and the fifth may stop.
      const params = { prompt: prompt_ids(10, 4), max_tokens: 10, temperature: 0, ignore_eos: true, stop_token_ids: [ids[0]] };
      const at_once = stream ? await complete_streamed(params) : await complete(params);
      assert.equal(at_once.usage.completion_tokens, 1);
      const r = stream ? await complete_streamed({ ...params, min_tokens: 4 }) : await complete({ ...params, min_tokens: 4 });
      const got = r.choices[0].token_ids;
      assert.ok(r.usage.completion_tokens >= 5, `stream=${stream}: ${r.usage.completion_tokens} tokens`);
      assert.ok(got.slice(0, 4).every((t) => t !== ids[0]), `stream=${stream}: ${got}`);
    }
  },

  async 'logprobs: the sampled token and the top N, streamed equals non-streamed'() {
    const params = { prompt: prompt_ids(8, 5), max_tokens: 6, temperature: 0, logprobs: 3, ignore_eos: true };
    const r = await complete(params);
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 6);
    assert.deepEqual(lp.tokens, r.choices[0].token_ids.map((id) => `token_id:${id}`));
    for (let i = 0; i < 6; i++) {
      const top = Object.values(lp.top_logprobs[i]);
      assert.equal(top.length, 3);
      assert.ok(lp.token_logprobs[i] <= 0);
      // Greedy: the sampled token is the most likely one.
      assert.ok(Math.abs(Math.max(...top) - lp.token_logprobs[i]) < 1e-6);
    }
    const s = await complete_streamed(params);
    assert.deepEqual(s.choices[0].logprobs.tokens, lp.tokens);
    assert.deepEqual(s.choices[0].logprobs.token_logprobs, lp.token_logprobs);
  },

  async 'logit_bias forces a token'() {
    const r = await complete({ prompt: prompt_ids(6, 6), max_tokens: 4, temperature: 0.7, seed: 5, logit_bias: { 77: 100 }, ignore_eos: true });
    assert.deepEqual(r.choices[0].token_ids, [77, 77, 77, 77]);
  },

  async 'second turn reuses the first turn from the prefix cache'() {
    const turn1 = prompt_ids(48, 7);
    const r1 = await complete({ prompt: turn1, max_tokens: 24, temperature: 0, ignore_eos: true });
    const turn2 = [...turn1, ...r1.choices[0].token_ids, ...prompt_ids(9, 8)];
    const r2 = await complete({ prompt: turn2, max_tokens: 4, temperature: 0 });
    assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= turn1.length,
      `cached ${r2.usage.prompt_tokens_details.cached_tokens} < ${turn1.length}`);
  },

  async 'errors reach the client as OpenAI errors'() {
    await assert.rejects(complete({ prompt: prompt_ids(200, 9), max_tokens: 100 }), (e) => e.status === 400 && /context length/.test(e.message));
    await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: [1, 2] }), (e) => e.status === 404);
  },

  async 'no KV blocks are left in use'() {
    assert.equal(await idle_blocks(base), 0);
  },

  async '/metrics counts what happened'() {
    const text = await (await fetch(`${base}/metrics`)).text();
    const value = (re) => Number((text.match(re) || [])[1]);
    assert.ok(value(/^tessera_requests_total\{status="200"\} (\d+)$/m) >= 10);
    assert.ok(value(/^tessera_requests_total\{status="400"\} (\d+)$/m) >= 1);
    assert.ok(value(/^tessera_requests_total\{status="404"\} (\d+)$/m) >= 1);
    assert.ok(value(/^tessera_generation_tokens_total (\d+)$/m) >= 100);
    assert.ok(value(/^tessera_prompt_tokens_total (\d+)$/m) >= 100);
    assert.ok(value(/^tessera_prefix_cache_hit_tokens_total (\d+)$/m) >= 48);
    assert.ok(value(/^tessera_time_to_first_token_seconds_count (\d+)$/m) >= 10);
    assert.ok(value(/^tessera_inter_token_latency_seconds_count (\d+)$/m) >= 100);
    assert.equal(value(/^tessera_time_to_first_token_seconds_bucket\{le="\+Inf"\} (\d+)$/m),
      value(/^tessera_time_to_first_token_seconds_count (\d+)$/m));
    assert.equal(value(/^tessera_kv_blocks_used (\d+)$/m), 0);
    assert.ok(value(/^tessera_kv_blocks_free (\d+)$/m) > 0);
  },
});
