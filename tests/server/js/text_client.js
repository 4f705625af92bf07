// The official OpenAI client against a model with a tokenizer: text prompts, stop strings
// across token boundaries, logprobs with token text, n > 1 and seeds, streamed and not.
// Usage: node text_client.js BASE_URL MODEL
const OpenAI = require('openai');
const { assert, run, idle_blocks } = require('./check.js');

const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

async function streamed(params) {
  const stream = await client.completions.create({ model, stream: true, stream_options: { include_usage: true }, ...params });
  const choices = [];
  let usage = null;
  let chunks = 0;  // those that carry text
  for await (const chunk of stream) {
    if (chunk.choices.some((c) => c.text)) chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const acc = (choices[c.index] ??= { text: '', finish_reason: null, tokens: [] });
      acc.text += c.text;
      if (c.finish_reason) acc.finish_reason = c.finish_reason;
      if (c.logprobs) acc.tokens.push(...c.logprobs.tokens);
    }
  }
  return { choices, usage, chunks };
}

const prompt = 'In the beginning God';

run({
  async 'text prompt: streamed text equals non-streamed text, chunk by chunk'() {
    const params = { prompt, max_tokens: 40, temperature: 0.8, seed: 11 };
    const whole = await client.completions.create({ model, ...params });
    assert.ok(whole.choices[0].text.length > 20);
    const s = await streamed(params);
    assert.equal(s.choices[0].text, whole.choices[0].text);
    assert.equal(s.choices[0].finish_reason, whole.choices[0].finish_reason);
    assert.deepEqual(s.usage, whole.usage);
    // The writer sends what is ready each time it runs, so on a busy machine tokens share chunks
    // (4 text chunks in 300 streams with 6 busy processes on 2 cores; once, with compilers
    // beside it, a single chunk); a server that held the text to the end would send one every
    // time, so a few streams are asked for one in pieces.
    const chunks = [s.chunks];
    while (chunks.at(-1) < 2 && chunks.length < 5) chunks.push((await streamed(params)).chunks);
    assert.ok(chunks.at(-1) >= 2, `the text arrives in pieces (chunks in each stream: ${chunks})`);
  },

  async 'n > 1 with a seed: choices differ, streamed equals non-streamed'() {
    const params = { prompt, max_tokens: 24, temperature: 1.0, seed: 3, n: 3 };
    const whole = await client.completions.create({ model, ...params });
    const s = await streamed(params);
    for (let i = 0; i < 3; i++) assert.equal(s.choices[i].text, whole.choices[i].text);
    assert.ok(new Set(whole.choices.map((c) => c.text)).size > 1);
  },

  async 'a stop string spanning tokens ends the text right before it'() {
    const base_params = { prompt, max_tokens: 40, temperature: 0 };
    const full = (await client.completions.create({ model, ...base_params })).choices[0].text;
    // A stop string that starts inside one token and ends inside a later one.
    const start = Math.floor(full.length / 3);
    const stop = full.slice(start + 1, start + 7);
    const expected = full.slice(0, full.indexOf(stop));
    const whole = await client.completions.create({ model, ...base_params, stop: [stop, 'never appears'] });
    assert.equal(whole.choices[0].text, expected);
    assert.equal(whole.choices[0].finish_reason, 'stop');
    assert.ok(whole.usage.completion_tokens < 40);
    const s = await streamed({ ...base_params, stop: [stop, 'never appears'] });
    assert.equal(s.choices[0].text, expected);
    assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
  },

  async 'min_tokens (vLLM): a stop string in the first min_tokens tokens does not end the text'() {
    const base_params = { prompt, max_tokens: 40, temperature: 0, ignore_eos: true };
    const full = (await client.completions.create({ model, ...base_params })).choices[0].text;
    const stop = full.slice(Math.floor(full.length / 3), Math.floor(full.length / 3) + 4);
    const cut = await client.completions.create({ model, ...base_params, stop: [stop] });
    assert.equal(cut.choices[0].finish_reason, 'stop');
    for (const stream of [false, true]) {
      const params = { ...base_params, stop: [stop], min_tokens: 40 };
      const r = stream ? await streamed(params) : await client.completions.create({ model, ...params });
      assert.equal(r.choices[0].text, full, `stream=${stream}`);
      assert.equal(r.usage.completion_tokens, 40);
    }
  },

  async 'include_stop_str_in_output (vLLM): the stop string found ends the text'() {
    const base_params = { prompt, max_tokens: 40, temperature: 0, ignore_eos: true };
    const full = (await client.completions.create({ model, ...base_params })).choices[0].text;
    const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 5);
    const expected = full.slice(0, full.indexOf(stop)) + stop;
    for (const stream of [false, true]) {
      const params = { ...base_params, stop: ['never appears', stop], include_stop_str_in_output: true };
      const r = stream ? await streamed(params) : await client.completions.create({ model, ...params });
      assert.equal(r.choices[0].text, expected, `stream=${stream}`);
      assert.equal(r.choices[0].finish_reason, 'stop');
    }
  },

  async 'logprobs name the tokens by their text'() {
    const r = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    assert.equal(lp.text_offset[0], 0);
    for (let i = 1; i < lp.tokens.length; i++) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length);
    const s = await streamed({ prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
    assert.deepEqual(s.choices[0].tokens, lp.tokens);
  },

  async 'echo with logprobs scores the prompt, as lm-eval reads it'() {
    // A prompt whose last 8 tokens are the model's own greedy continuation, with their logprobs.
    const gen = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 1,
      ignore_eos: true, return_token_ids: true });
    const n = gen.prompt_token_ids[0].length, ids = gen.prompt_token_ids[0].concat(gen.choices[0].token_ids);
    // lm-eval's loglikelihood request: the prompt echoed with its tokens' logprobs, one token made.
    const params = { prompt: ids, max_tokens: 1, temperature: 0, echo: true, logprobs: 1 };
    const r = await client.completions.create({ model, ...params });
    const c = r.choices[0], lp = c.logprobs;
    assert.equal(c.text, prompt + gen.choices[0].text + lp.tokens[ids.length]);
    assert.equal(lp.tokens.length, ids.length + 1);
    assert.equal(r.usage.prompt_tokens, ids.length);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);
    for (let i = 1; i < lp.tokens.length; i++) {
      assert.ok(lp.token_logprobs[i] <= Math.max(...Object.values(lp.top_logprobs[i])), `position ${i}`);
      if (i > 1) assert.ok(c.text.slice(lp.text_offset[i]).startsWith(lp.tokens[i]), `offset of token ${i}`);
    }
    // The continuation's tokens: the logprobs their generation gave (a decode step's products sum
    // in another order than a prompt's on the CPU: ~1e-6 apart), and each the most likely, to the
    // bit, as lm-eval's is_greedy compares them.
    for (let k = 0; k <= 8; k++) {
      const got = lp.token_logprobs[n + k];
      if (k < 8) assert.ok(Math.abs(got - gen.choices[0].logprobs.token_logprobs[k]) < 1e-4, `token ${k}`);
      assert.equal(got, Math.max(...Object.values(lp.top_logprobs[n + k])), `token ${k} is greedy`);
    }
    // Again: the same values (a prompt scored is computed whole, not taken from the prefix cache).
    const again = await client.completions.create({ model, ...params });
    assert.deepEqual(again.choices[0].logprobs.token_logprobs, lp.token_logprobs);
    // Streamed: the prompt comes first, and the rest as without streaming.
    const s = await streamed(params);
    assert.equal(s.choices[0].text, c.text);
    assert.deepEqual(s.choices[0].tokens, lp.tokens);
  },

  async 'echo with max_tokens 0 gives the prompt alone'() {
    const r = await client.completions.create({ model, prompt, max_tokens: 0, echo: true, logprobs: 0 });
    const c = r.choices[0];
    assert.equal(c.text, prompt);
    assert.equal(c.finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 0);
    assert.equal(c.logprobs.tokens.length, r.usage.prompt_tokens);
    assert.deepEqual(c.logprobs.top_logprobs.slice(1).map((t) => Object.keys(t).length), Array(r.usage.prompt_tokens - 1).fill(0));
    const plain = await client.completions.create({ model, prompt, max_tokens: 0, echo: true });
    assert.equal(plain.choices[0].text, prompt);
    assert.equal(plain.choices[0].logprobs, null);
    await assert.rejects(client.completions.create({ model, prompt, max_tokens: 0 }), /max_tokens/);
  },

  async 'echo gives the prompt back as sent, special tokens written in it included'() {
    // "<|user|>" is a special token: decoding the prompt's tokens would leave it out.
    const text = '<|user|>\nIn the beginning';
    const r = await client.completions.create({ model, prompt: text, max_tokens: 0, echo: true, logprobs: 0,
      return_token_ids: true });
    const c = r.choices[0], lp = c.logprobs;
    assert.equal(c.text, text);
    assert.equal(lp.tokens.length, r.prompt_token_ids[0].length);
    // Offsets into the text as sent: a token the text holds starts there; the BOS the tokenizer
    // added takes no room.
    assert.deepEqual(lp.text_offset.slice(0, 2), [0, 0]);
    for (let i = 1; i < lp.tokens.length; i++) {
      assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1], `offset ${i} goes back`);
      assert.ok(text.slice(lp.text_offset[i]).startsWith(lp.tokens[i]), `token ${i} ${lp.tokens[i]} at ${lp.text_offset[i]}`);
    }
    // With a continuation, and streamed: the same text first.
    const params = { prompt: text, max_tokens: 4, temperature: 0, echo: true };
    const whole = await client.completions.create({ model, ...params });
    assert.ok(whole.choices[0].text.startsWith(text) && whole.choices[0].text.length > text.length);
    assert.equal((await streamed(params)).choices[0].text, whole.choices[0].text);
  },

  async 'stream_options.continuous_usage_stats (vLLM): usage so far in every chunk'() {
    const stream = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, ignore_eos: true,
      stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } });
    const seen = [];
    let final = null;
    for await (const chunk of stream) {
      if (chunk.choices.length === 0) final = chunk.usage;
      else seen.push(chunk.usage);
    }
    assert.ok(seen.length > 1 && seen.every((u) => u && u.prompt_tokens === final.prompt_tokens));
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].completion_tokens >= seen[i - 1].completion_tokens);
    assert.equal(seen[seen.length - 1].completion_tokens, 12);
    assert.equal(final.completion_tokens, 12);
    assert.equal(seen[0].total_tokens, seen[0].prompt_tokens + seen[0].completion_tokens);
    // Without it, only the last chunk has usage.
    const plain = await streamed({ prompt, max_tokens: 4 });
    assert.equal(plain.usage.completion_tokens, 4);
  },

  async 'truncate_prompt_tokens (vLLM) keeps the prompt\'s last tokens'() {
    const full = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, return_token_ids: true });
    const ids = full.prompt_token_ids[0];
    assert.ok(ids.length > 3);
    const r = await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0, return_token_ids: true,
      truncate_prompt_tokens: 3, echo: true });
    assert.deepEqual(r.prompt_token_ids[0], ids.slice(-3));
    assert.equal(r.usage.prompt_tokens, 3);
    // The same as sending those tokens; echo gives what the model read.
    const same = await client.completions.create({ model, prompt: ids.slice(-3), max_tokens: 4, temperature: 0, echo: true });
    assert.equal(r.choices[0].text, same.choices[0].text);
    // Shorter prompts are left whole.
    const whole = await client.completions.create({ model, prompt, max_tokens: 1, return_token_ids: true, truncate_prompt_tokens: -1 });
    assert.deepEqual(whole.prompt_token_ids[0], ids);
  },

  async '/tokenize and /detokenize use the tokenizer and template of the prompts'() {
    const post = async (path, body) => (await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body) })).json();
    const gen = await client.completions.create({ model, prompt, max_tokens: 1, return_token_ids: true });
    const t = await post('/tokenize', { model, prompt, return_token_strs: true });
    assert.deepEqual(t.tokens, gen.prompt_token_ids[0]);
    assert.equal(t.count, t.tokens.length);
    assert.equal(t.max_model_len, (await (await fetch(`${base}/v1/models`)).json()).data[0].max_model_len);
    assert.equal(t.token_strs.length, t.count);
    const bare = await post('/tokenize', { prompt, add_special_tokens: false });
    assert.equal(bare.token_strs, null);
    assert.deepEqual(bare.tokens, t.tokens.slice(t.count - bare.count));
    assert.equal((await post('/detokenize', { model, tokens: bare.tokens })).prompt, prompt);
    // A chat's messages count what the chat completion's usage says.
    const messages = [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: prompt }];
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 1 });
    assert.equal((await post('/tokenize', { model, messages })).count, chat.usage.prompt_tokens);
    const err = await post('/detokenize', { tokens: [1, 1 << 30] });
    assert.equal(err.error.param, 'tokens');
  },

  async 'no KV blocks are left in use'() {
    assert.equal(await idle_blocks(base), 0);
  },
});
