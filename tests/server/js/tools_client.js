// The official OpenAI client reading tool calls and reasoning from a model that always answers
// <think>Checking the weather.</think><tool_call>{get_weather, Paris}</tool_call> (see
// test_e2e_tools.cpp). Usage: node tools_client.js BASE_URL MODEL [parsers-off | two-token-tag]
const OpenAI = require('openai');
const { assert, run } = require('./check.js');

const [base, model, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const call = { name: 'get_weather', arguments: { city: 'Paris' } };

// Folds a stream into a message, checking OpenAI's streaming shape of tool calls on the way.
async function streamed(params) {
  const stream = await client.chat.completions.create({ model, messages, tools, stream: true, ...params });
  const m = { role: null, content: null, reasoning_content: null, tool_calls: [], finish_reason: null };
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      const d = c.delta;
      if (d.role) m.role = d.role;
      if (d.content) m.content = (m.content ?? '') + d.content;
      if (d.reasoning_content) m.reasoning_content = (m.reasoning_content ?? '') + d.reasoning_content;
      for (const t of d.tool_calls ?? []) {
        if (t.index === m.tool_calls.length) {
          // A call's first delta: index, id, type and the function's name.
          assert.ok(t.id, 'the first delta of a call carries its id');
          assert.equal(t.type, 'function');
          assert.ok(t.function.name, 'the first delta of a call carries the name');
          m.tool_calls.push({ id: t.id, type: t.type, function: { name: t.function.name, arguments: t.function.arguments ?? '' } });
        } else {
          assert.equal(t.index, m.tool_calls.length - 1, 'argument fragments continue the last call');
          assert.equal(t.id, undefined);
          m.tool_calls[t.index].function.arguments += t.function.arguments ?? '';
        }
      }
      if (c.finish_reason) m.finish_reason = c.finish_reason;
    }
  }
  return m;
}

function whole(r) {
  const msg = r.choices[0].message;
  return {
    role: msg.role,
    content: msg.content || null, // a stream cannot tell "" from none
    reasoning_content: msg.reasoning_content ?? null,
    tool_calls: msg.tool_calls ?? [],
    finish_reason: r.choices[0].finish_reason,
  };
}

// Streamed equals non-streamed, except call ids (unique per request).
async function both(options) {
  const params = { temperature: 0, ...options };
  const w = whole(await client.chat.completions.create({ model, messages, tools, ...params }));
  const s = await streamed(params);
  const strip = (m) => ({ ...m, tool_calls: m.tool_calls.map((t) => ({ ...t, id: undefined })) });
  assert.deepEqual(strip(s), strip(w));
  for (let i = 0; i < w.tool_calls.length; i++) assert.notEqual(s.tool_calls[i].id, w.tool_calls[i].id);
  return w;
}

const parsed = {
  async 'a reasoned tool call, streamed equals non-streamed'() {
    const m = await both({ max_tokens: 20 });
    assert.equal(m.role, 'assistant');
    assert.equal(m.reasoning_content, 'Checking the weather.');
    assert.equal(m.content, null);
    assert.equal(m.tool_calls.length, 1);
    assert.ok(m.tool_calls[0].id.startsWith('call_'));
    assert.equal(m.tool_calls[0].type, 'function');
    assert.equal(m.tool_calls[0].function.name, call.name);
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), call.arguments);
    assert.equal(m.finish_reason, 'tool_calls');
  },

  async 'echo (vLLM): the final assistant message opens the content; reasoning and calls are parsed as ever'() {
    const begun = [...messages, { role: 'assistant', content: 'Let me look. ' }];
    const m = await both({ messages: begun, echo: true, max_tokens: 20 });
    assert.equal(m.content, 'Let me look. ');
    assert.equal(m.reasoning_content, 'Checking the weather.');
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.finish_reason, 'tool_calls');
  },

  async 'n > 1: each choice has its own call, ids unique'() {
    const r = await client.chat.completions.create({ model, messages, tools, temperature: 0, n: 2 });
    assert.equal(r.choices.length, 2);
    const ids = r.choices.map((c) => c.message.tool_calls[0].id);
    assert.notEqual(ids[0], ids[1]);
    for (const c of r.choices) assert.equal(c.finish_reason, 'tool_calls');
  },

  async 'tool_choice required: a grammar makes the model write its calls as a JSON array'() {
    // After </think> the model would write <tool_call>; held to [{"name", "arguments"}] it
    // writes the vocabulary's "[" (the only token that may start the array), its JSON call,
    // then "]" and its EOS.
    for (const parallel_tool_calls of [true, false]) {
      const m = await both({ tool_choice: 'required', parallel_tool_calls });
      assert.equal(m.reasoning_content, 'Checking the weather.');
      assert.equal(m.content, null);
      assert.equal(m.tool_calls.length, 1);
      assert.ok(m.tool_calls[0].id.startsWith('call_'));
      assert.equal(m.tool_calls[0].function.name, call.name);
      assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), call.arguments);
      assert.equal(m.finish_reason, 'tool_calls');
    }
    // The tokens drawn were the grammar's, not the model's own <tool_call> markers.
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', temperature: 0, logprobs: true });
    const drawn = r.choices[0].logprobs.content.map((t) => t.token);
    assert.ok(drawn.includes('[') && drawn.includes(']') && !drawn.includes('<tool_call>'), drawn.join(' '));
  },

  async 'a named function: what the model writes are that function\'s arguments'() {
    // record_call takes the very object the model writes, so the grammar lets it through.
    const record = {
      type: 'function',
      function: {
        name: 'record_call',
        parameters: {
          type: 'object',
          properties: { name: { type: 'string' }, arguments: { type: 'object', minProperties: 1 } },
          required: ['name', 'arguments'],
        },
      },
    };
    const m = await both({ tools: [...tools, record], tool_choice: { type: 'function', function: { name: 'record_call' } } });
    assert.equal(m.reasoning_content, 'Checking the weather.');
    assert.equal(m.content, null);
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].function.name, 'record_call');
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), call);
    assert.equal(m.finish_reason, 'tool_calls');
  },

  async 'forced calls that cannot be held are refused, naming tool_choice'() {
    const named = (name) => ({ type: 'function', function: { name } });
    for (const [params, why] of [
      [{ tool_choice: named('get_time') }, "names 'get_time', which is not among the tools"],
      [{ tools: undefined, tool_choice: 'required' }, "needs a non-empty 'tools'"],
      [{ tool_choice: 'required', response_format: { type: 'json_object' } }, 'cannot be combined with response_format'],
    ]) {
      await assert.rejects(
        client.chat.completions.create({ model, messages, tools, ...params }),
        (e) => e.status === 400 && e.param === 'tool_choice' && e.message.includes(why),
      );
    }
  },

  async 'tool_choice none: the call stays text, reasoning is still split off'() {
    const m = await both({ tool_choice: 'none' });
    assert.equal(m.tool_calls.length, 0);
    assert.equal(m.reasoning_content, 'Checking the weather.');
    // The markers are special tokens: like any other, they do not show in the content.
    assert.equal(m.content, '{"name": "get_weather", "arguments": {"city": "Paris"}}');
    assert.equal(m.finish_reason, 'stop');
  },

  async 'max_tokens inside the reasoning: no content leaks'() {
    const m = await both({ max_tokens: 2 });
    assert.equal(m.reasoning_content, 'Checking the weather.');
    assert.equal(m.content, null);
    assert.equal(m.finish_reason, 'length');
  },

  async 'a stop string inside the reasoning: no content leaks'() {
    const m = await both({ stop: ['weather'] });
    assert.equal(m.reasoning_content, 'Checking the'); // reasoning is trimmed
    assert.equal(m.content, null);
    assert.equal(m.tool_calls.length, 0);
    assert.equal(m.finish_reason, 'stop');
  },

  async 'response_format on a reasoning model: the reasoning stays free, the JSON follows it'() {
    // The first token opens the reasoning block (allowed only as the first); the grammar holds
    // what follows </think>, where <tool_call> (the model's choice) is not JSON.
    const schema = { type: 'object', properties: { name: { type: 'string' }, arguments: { type: 'object' } }, required: ['name', 'arguments'] };
    for (const response_format of [{ type: 'json_object' }, { type: 'json_schema', json_schema: { name: 'call', schema } }]) {
      const m = await both({ response_format, max_tokens: 20 });
      assert.equal(m.reasoning_content, 'Checking the weather.');
      assert.deepEqual(JSON.parse(m.content), call);
      assert.equal(m.tool_calls.length, 0);
      assert.equal(m.finish_reason, 'stop');
    }
  },

  async 'max_tokens inside the call: the call is dropped, finish_reason length'() {
    const m = await both({ max_tokens: 5 }); // ends after '{"name": "get_weather", '
    assert.equal(m.reasoning_content, 'Checking the weather.');
    assert.equal(m.tool_calls.length, 0);
    assert.equal(m.finish_reason, 'length');
  },
};

const off = {
  async 'without parsers the output is plain content, special tokens skipped'() {
    const m = await both({});
    assert.equal(m.reasoning_content, null);
    assert.equal(m.tool_calls.length, 0);
    assert.equal(m.content, 'Checking the weather.' + '{"name": "get_weather", "arguments": {"city": "Paris"}}');
    assert.equal(m.finish_reason, 'stop');
  },

  async 'skip_special_tokens false (vLLM): the special tokens\' text stays in the content'() {
    const m = await both({ skip_special_tokens: false });
    assert.equal(m.content, '<think>Checking the weather.</think><tool_call>' +
                 '{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>');
  },

  async 'without parsers, tool_choice required still yields the call, held from the first token'() {
    const m = await both({ tool_choice: 'required' });
    assert.equal(m.reasoning_content, null);
    assert.equal(m.content, null);
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].function.name, call.name);
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), call.arguments);
    assert.equal(m.finish_reason, 'tool_calls');
  },

  async 'without a reasoning parser, response_format holds the output from its first token'() {
    const m = await both({ response_format: { type: 'json_object' } });
    assert.equal(m.reasoning_content, null);
    assert.deepEqual(JSON.parse(m.content), call);
    assert.equal(m.finish_reason, 'stop');
  },
};

// A model whose reasoning opens with a tag of two tokens (<|channel> then "thought"): the same
// reasoned call, and structured output after the reasoning.
const twoTokenTag = Object.fromEntries(
  ['a reasoned tool call, streamed equals non-streamed', 'response_format on a reasoning model: the reasoning stays free, the JSON follows it']
    .map((name) => [name, parsed[name]]),
);

run({ 'parsers-off': off, 'two-token-tag': twoTokenTag }[mode] ?? parsed);
