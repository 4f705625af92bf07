// Raw HTTP against every error path: each answers OpenAI's error shape with the right status,
// and the server keeps serving afterwards. The server runs with --api-key and --max-body-size 65536.
// Usage: node errors.js BASE_URL MODEL API_KEY
const net = require('node:net');
const { assert, run, prompt_ids } = require('./check.js');

const [base, model, key] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };

async function post(path, body, headers = auth) {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* checked by the caller */ }
  return { status: res.status, json, text };
}

// Expects an OpenAI error object with `status`, and `param` when given.
async function expect_error(path, body, status, param, headers) {
  const r = await post(path, body, headers);
  assert.equal(r.status, status, `${JSON.stringify(body).slice(0, 80)} -> ${r.status} ${r.text.slice(0, 200)}`);
  assert.ok(r.json && r.json.error, `not an OpenAI error body: ${r.text.slice(0, 200)}`);
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.type, 'string');
  if (param !== undefined) assert.equal(r.json.error.param, param);
  return r.json.error;
}

const ok = { model, prompt: [5, 6, 7], max_tokens: 2 };

run({
  async 'malformed JSON is 400'() {
    await expect_error('/v1/completions', '{"prompt": [1, 2', 400);
    await expect_error('/v1/chat/completions', 'not json at all', 400);
    await expect_error('/v1/completions', '[1, 2, 3]', 400);
  },

  async 'wrong types and out-of-range values are 400 naming the field'() {
    const cases = [
      [{ temperature: 'hot' }, 'temperature'], [{ temperature: 3 }, 'temperature'], [{ top_p: 0 }, 'top_p'],
      [{ top_p: 1.5 }, 'top_p'], [{ max_tokens: 0 }, 'max_tokens'], [{ max_tokens: 2.5 }, 'max_tokens'],
      [{ max_tokens: '5' }, 'max_tokens'], [{ n: 0 }, 'n'], [{ n: 1000 }, 'n'], [{ seed: 'x' }, 'seed'],
      [{ stop: 5 }, 'stop'], [{ stop: [''] }, 'stop'], [{ logit_bias: { abc: 1 } }, 'logit_bias'],
      [{ logit_bias: { 5: 500 } }, 'logit_bias'], [{ logit_bias: { 99999: 1 } }, 'logit_bias'],
      [{ presence_penalty: -3 }, 'presence_penalty'], [{ logprobs: 50 }, 'logprobs'], [{ stream: 'yes' }, 'stream'],
      [{ stream_options: { include_usage: true } }, 'stream_options'], [{ prompt: [] }, 'prompt'],
      [{ prompt: [1, -2] }, 'prompt'], [{ prompt: [1, 99999] }, 'prompt'], [{ prompt: { a: 1 } }, 'prompt'],
      [{ prompt: undefined }, 'prompt'], [{ stop_token_ids: [99999] }, 'stop_token_ids'], [{ top_k: -5 }, 'top_k'],
      [{ min_p: 2 }, 'min_p'], [{ repetition_penalty: 0 }, 'repetition_penalty'], [{ model: 7 }, 'model'],
      [{ min_tokens: -1 }, 'min_tokens'], [{ min_tokens: 3 }, 'min_tokens'], [{ min_tokens: 1.5 }, 'min_tokens'],
      [{ echo: true, max_tokens: 0, min_tokens: 1 }, 'min_tokens'],
    ];
    for (const [patch, param] of cases) await expect_error('/v1/completions', { ...ok, ...patch }, 400, param);
    await expect_error('/v1/chat/completions', { model }, 400, 'messages');
    await expect_error('/v1/chat/completions', { model, messages: 'hi' }, 400, 'messages');
    await expect_error('/v1/chat/completions', { model, messages: [{ content: 'no role' }] }, 400, 'messages');
    await expect_error('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 }, 400, 'top_logprobs');
  },

  async 'a response_format the server cannot hold is refused clearly'() {
    const e = await expect_error('/v1/completions', { ...ok, response_format: { type: 'json_schema', json_schema: {} } }, 400, 'response_format');
    assert.match(e.message, /'schema'/);
    const p = await expect_error('/v1/completions', { ...ok, response_format: { type: 'json_object', schema: { type: 'integer', minimum: 0 } } }, 400, 'response_format');
    assert.match(p.message, /minimum/);
    const r = await post('/v1/completions', { ...ok, response_format: { type: 'text' } });
    assert.equal(r.status, 200);
  },

  async 'unknown model is 404'() {
    await expect_error('/v1/completions', { ...ok, model: 'gpt-4o' }, 404, 'model');
  },

  async 'prompt + max_tokens beyond the context is 400, never truncated'() {
    const e = await expect_error('/v1/completions', { ...ok, prompt: prompt_ids(250, 1), max_tokens: 10 }, 400, 'max_tokens');
    assert.match(e.message, /context length/);
    await expect_error('/v1/completions', { ...ok, prompt: prompt_ids(300, 1), max_tokens: undefined }, 400, 'prompt');
  },

  async 'missing or wrong API key is 401; /health needs none'() {
    await expect_error('/v1/completions', ok, 401, undefined, { 'Content-Type': 'application/json' });
    await expect_error('/v1/completions', ok, 401, undefined, { Authorization: 'Bearer wrong' });
    assert.equal((await fetch(`${base}/v1/models`)).status, 401);
    assert.equal((await fetch(`${base}/health`)).status, 200);
  },

  async 'a body over the limit is 413'() {
    const big = JSON.stringify({ ...ok, padding: 'x'.repeat(100000) });
    await expect_error('/v1/completions', big, 413);
  },

  async 'asked first (Expect: 100-continue), a body over the limit or a missing key is refused before it is sent'() {
    // Raw HTTP: the headers, then the body only once the server says 100 Continue. A refusal
    // must come at once (not after the server's 30 s read timeout), and the connection closes.
    const ask = (headers, body) => new Promise((resolve, reject) => {
      const url = new URL(base);
      const sock = net.connect(Number(url.port), url.hostname);
      let got = '', continued = false;
      const timer = setTimeout(() => { sock.destroy(); reject(new Error(`no answer in 5 s: ${got}`)); }, 5000);
      sock.on('data', (d) => {
        got += d;
        if (got.startsWith('HTTP/1.1 100') && got.endsWith('\r\n\r\n')) sock.write(body), got = '', continued = true;
      });
      sock.on('close', () => { clearTimeout(timer); resolve({ answer: got, continued }); });
      sock.on('error', reject);
      sock.write(`POST /v1/completions HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
                 `Connection: close\r\nExpect: 100-continue\r\n${headers}\r\n`);
    });
    const small = JSON.stringify(ok);
    for (const [headers, status] of [
      [`Authorization: Bearer ${key}\r\nContent-Length: 10000000\r\n`, 413],
      [`Content-Length: ${small.length}\r\n`, 401],
      [`Authorization: Bearer ${key}\r\nContent-Length: ${small.length}\r\n`, 200],  // sent after 100 Continue
    ]) {
      const { answer, continued } = await ask(headers, small);
      assert.equal(continued, status === 200, 'a refusal comes instead of 100 Continue');
      assert.match(answer, new RegExp(`^HTTP/1\\.1 ${status} `), answer.slice(0, 200));
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
      assert.ok(status === 200 ? body.choices : typeof body.error.message === 'string', answer.slice(0, 300));
    }
  },

  async 'unknown routes are 404 in the same shape'() {
    const r = await fetch(`${base}/v1/nothing`, { headers: auth });
    assert.equal(r.status, 404);
    assert.ok((await r.json()).error);
  },

  async '/tokenize and /detokenize answer in the same shape'() {
    // This model has no tokenizer: 400, as its text prompts are.
    await expect_error('/tokenize', { prompt: 'x' }, 400, null, {});
    await expect_error('/detokenize', { tokens: [1, 2] }, 400, null, {});
    await expect_error('/tokenize', { model: 'other', prompt: 'x' }, 404, 'model', {});
    await expect_error('/tokenize', { prompt: 5 }, 400, 'prompt', {});
    await expect_error('/tokenize', { messages: [] }, 400, 'messages', {});
    await expect_error('/detokenize', { tokens: [-1] }, 400, 'tokens', {});
    await expect_error('/detokenize', '{"tokens": [1,', 400, undefined, {});
  },

  async 'GET /v1/models lists the served model'() {
    const r = await (await fetch(`${base}/v1/models`, { headers: auth })).json();
    assert.equal(r.object, 'list');
    assert.deepEqual(r.data.map((m) => m.id), [model]);
    // created: when this server started (unix seconds), not 0
    const now = Date.now() / 1000;
    assert.ok(r.data[0].created > now - 3600 && r.data[0].created <= now + 1, `created ${r.data[0].created}`);
  },

  async 'any value in any field gets 200 or a 4xx, never a crash'() {
    const values = [null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 63, '', 'x', [], {}, [[]], ['a'], [1, 'a'], { a: 1 }, [-5], '\u0000\ud800'];
    const fields = ['model', 'prompt', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'min_p',
      'presence_penalty', 'frequency_penalty', 'repetition_penalty', 'seed', 'stop', 'stop_token_ids', 'n', 'logprobs',
      'logit_bias', 'stream', 'stream_options', 'response_format', 'ignore_eos', 'return_token_ids', 'best_of', 'echo', 'suffix', 'user', 'min_tokens',
      'include_stop_str_in_output', 'skip_special_tokens', 'truncate_prompt_tokens',
      'guided_json', 'guided_choice', 'guided_regex', 'guided_grammar', 'grammar', 'structured_outputs'];
    for (const f of fields)
      for (const v of values) {
        const r = await post('/v1/completions', { ...ok, [f]: v, stream: f === 'stream' ? v : false });
        assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `${f}=${JSON.stringify(v)} -> ${r.status}`);
        assert.ok(r.json || (f === 'stream' && r.text.endsWith('data: [DONE]\n\n')), `${f}=${JSON.stringify(v)}: ${r.text.slice(0, 100)}`);
      }
    for (const f of ['messages', 'tools', 'chat_template_kwargs', 'logprobs', 'top_logprobs', 'add_generation_prompt',
      'continue_final_message', 'echo', 'reasoning_effort', 'truncate_prompt_tokens'])
      for (const v of values) {
        const r = await post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, [f]: v });
        assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `chat ${f}=${JSON.stringify(v)} -> ${r.status}`);
      }
    const deep = '['.repeat(30000) + ']'.repeat(30000);
    assert.equal((await post('/v1/completions', `{"prompt": ${deep}}`)).status, 400);
    assert.equal((await post('/v1/completions', '\u0000\xff{')).status, 400);
  },

  async 'the server still answers after all of that'() {
    // ok samples with no seed: without ignore_eos an EOS drawn first ends it at 1 token.
    const r = await post('/v1/completions', { ...ok, ignore_eos: true });
    assert.equal(r.status, 200);
    assert.equal(r.json.usage.completion_tokens, 2);
  },
});
