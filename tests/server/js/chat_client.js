// The official OpenAI client against /v1/chat/completions on a model with a chat template:
// streamed equals non-streamed, n > 1, stop strings, logprobs, usage, multi-turn prefix caching,
// template errors. Usage: node chat_client.js BASE_URL MODEL BOS_ID
const OpenAI = require('openai');
const { assert, run, idle_blocks } = require('./check.js');

const [base, model, bos] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

const messages = [
  { role: 'system', content: 'Thou art a scribe.' },
  { role: 'user', content: 'Tell of the beginning.' },
];

async function streamed(params) {
  const stream = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true }, ...params });
  const choices = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const acc = (choices[c.index] ??= { role: null, content: '', finish_reason: null, logprobs: [] });
      if (c.delta.role) acc.role = c.delta.role;
      if (c.delta.content) acc.content += c.delta.content;
      if (c.finish_reason) acc.finish_reason = c.finish_reason;
      if (c.logprobs) acc.logprobs.push(...c.logprobs.content);
    }
  }
  return { choices, usage };
}

run({
  async 'a chat completion, streamed equals non-streamed'() {
    const params = { max_tokens: 30, temperature: 0.7, seed: 21 };
    const r = await client.chat.completions.create({ model, messages, ...params });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.ok(r.choices[0].message.content.length > 0);
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    const s = await streamed(params);
    assert.equal(s.choices[0].role, 'assistant');
    assert.equal(s.choices[0].content, r.choices[0].message.content);
    assert.equal(s.choices[0].finish_reason, r.choices[0].finish_reason);
    assert.equal(s.usage.prompt_tokens, r.usage.prompt_tokens);
    assert.equal(s.usage.completion_tokens, r.usage.completion_tokens);
    // The second request finds the first one's prompt blocks in the prefix cache.
    assert.ok(s.usage.prompt_tokens_details.cached_tokens >= 16);
  },

  async 'the rendered template is tokenized without a second BOS'() {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 2, return_token_ids: true });
    const ids = r.prompt_token_ids[0];
    assert.equal(ids[0], Number(bos));
    assert.notEqual(ids[1], Number(bos));
    assert.equal(r.usage.prompt_tokens, ids.length);
  },

  async 'n > 1, streamed equals non-streamed'() {
    const params = { max_tokens: 16, temperature: 1.0, seed: 4, n: 2 };
    const r = await client.chat.completions.create({ model, messages, ...params });
    const s = await streamed(params);
    for (let i = 0; i < 2; i++) assert.equal(s.choices[i].content, r.choices[i].message.content);
    assert.equal(r.usage.completion_tokens, s.usage.completion_tokens);
  },

  async 'stop strings end the content before them'() {
    const full = (await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0 })).choices[0].message.content;
    const stop = full.slice(10, 14);
    const expected = full.slice(0, full.indexOf(stop));
    const r = await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0, stop });
    assert.equal(r.choices[0].message.content, expected);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await streamed({ max_tokens: 40, temperature: 0, stop });
    assert.equal(s.choices[0].content, expected);
  },

  async 'logprobs: token, logprob, bytes and top_logprobs per token'() {
    const params = { max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 };
    const r = await client.chat.completions.create({ model, messages, ...params });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens - (r.choices[0].finish_reason === 'stop' ? 1 : 0));
    for (const t of content) {
      assert.deepEqual(Buffer.from(t.bytes).toString('utf8'), t.token);
      assert.equal(t.top_logprobs.length, 2);
      assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6);
    }
    assert.equal(content.map((t) => t.token).join(''), r.choices[0].message.content);
    const s = await streamed(params);
    assert.deepEqual(s.choices[0].logprobs.map((t) => t.token), content.map((t) => t.token));
  },

  async 'the second turn of a conversation comes from the prefix cache'() {
    const turn1 = [{ role: 'system', content: 'Thou art a scribe of the law. '.repeat(12) }, { role: 'user', content: 'Speak.' }];
    const r1 = await client.chat.completions.create({ model, messages: turn1, max_tokens: 20, temperature: 0 });
    const turn2 = [...turn1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And then?' }];
    const r2 = await client.chat.completions.create({ model, messages: turn2, max_tokens: 4, temperature: 0 });
    const full_blocks = Math.floor(r1.usage.prompt_tokens / 16) * 16;
    assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= full_blocks,
      `cached ${r2.usage.prompt_tokens_details.cached_tokens} < ${full_blocks}`);
  },

  async 'text content parts are joined; other parts are a 400'() {
    const parts = [{ role: 'user', content: [{ type: 'text', text: 'Tell of' }, { type: 'text', text: 'the beginning.' }] }];
    const joined = [{ role: 'user', content: 'Tell of\nthe beginning.' }];
    const a = await client.chat.completions.create({ model, messages: parts, max_tokens: 1, return_token_ids: true });
    const b = await client.chat.completions.create({ model, messages: joined, max_tokens: 1, return_token_ids: true });
    assert.deepEqual(a.prompt_token_ids, b.prompt_token_ids);
    const image = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }];
    await assert.rejects(client.chat.completions.create({ model, messages: image }), (e) => e.status === 400);
  },

  async 'continue_final_message (vLLM): the model continues the assistant message; echo gives it back'() {
    const opening = 'And the earth was';
    const cont = [...messages, { role: 'assistant', content: opening }];
    const params = { messages: cont, continue_final_message: true, max_tokens: 10, temperature: 0 };
    const r = await client.chat.completions.create({ model, ...params, return_token_ids: true });
    // The prompt ends with the message's text: no end of turn, no new assistant header.
    const post = async (path, body) => (await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body) })).json();
    const ids = r.prompt_token_ids[0];
    assert.ok((await post('/detokenize', { model, tokens: ids })).prompt.endsWith(`<|assistant|>\n${opening}`));
    assert.deepEqual((await post('/tokenize', { model, messages: cont, continue_final_message: true })).tokens, ids);
    // The content is what a text completion of those tokens gives.
    const text = await client.completions.create({ model, prompt: ids, max_tokens: 10, temperature: 0 });
    assert.equal(r.choices[0].message.content, text.choices[0].text);
    // echo: the message's text first, streamed or not.
    const echoed = await client.chat.completions.create({ model, ...params, echo: true });
    assert.equal(echoed.choices[0].message.content, opening + r.choices[0].message.content);
    assert.equal((await streamed({ ...params, echo: true })).choices[0].content, echoed.choices[0].message.content);
    // echo after a user's message with a generation prompt: the answer's role differs, nothing echoed.
    const plain = { max_tokens: 6, temperature: 0 };
    assert.equal((await client.chat.completions.create({ model, messages, ...plain, echo: true })).choices[0].message.content,
      (await client.chat.completions.create({ model, messages, ...plain })).choices[0].message.content);
    await assert.rejects(client.chat.completions.create({ model, ...params, add_generation_prompt: true }),
      (e) => e.status === 400 && e.param === 'continue_final_message');
  },

  async 'a conversation the template rejects is a 400 with its reason'() {
    await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'tool', content: 'x' }] }),
      (e) => e.status === 400 && /roles/.test(e.message));
  },

  async 'no KV blocks are left in use'() {
    assert.equal(await idle_blocks(base), 0);
  },
});
