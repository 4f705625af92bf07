// Structured output through the official OpenAI client: response_format json_schema and
// json_object on chat and text completions, sampled and greedy, streamed and not. Every choice
// that ends with "stop" must parse and satisfy its schema; a schema the server cannot hold is
// refused with a 400 naming response_format.
// Usage: node structured_client.js BASE_URL MODEL
const OpenAI = require('openai');
const { assert, run, idle_blocks } = require('./check.js');

const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    age: { type: 'integer' },
    tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 },
    ok: { type: 'boolean' },
  },
  required: ['name', 'age', 'ok'],
  additionalProperties: false,
};

// The checks the schema above asks for, key order included (properties come in schema order).
function check_person(text) {
  const v = JSON.parse(text);
  const keys = Object.keys(v);
  assert.deepEqual(keys, ['name', 'age', 'tags', 'ok'].filter((k) => k in v), text);
  assert.ok(typeof v.name === 'string' && [...v.name].length <= 10, text);
  assert.ok(Number.isInteger(v.age), text);
  assert.ok(typeof v.ok === 'boolean', text);
  if ('tags' in v) assert.ok(Array.isArray(v.tags) && v.tags.length <= 3 && v.tags.every((t) => t === 'a' || t === 'b'), text);
}

const format = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };

run({
  async 'chat, json_schema, sampled: every finished choice satisfies the schema'() {
    const r = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Who was Abraham?' }], response_format: format,
      n: 6, temperature: 1.0, seed: 5, max_tokens: 120,
    });
    const done = r.choices.filter((c) => c.finish_reason === 'stop');
    assert.ok(done.length >= 2, `${done.length} of 6 finished`);
    for (const c of done) check_person(c.message.content);
    for (const c of r.choices.filter((c) => c.finish_reason === 'length'))
      assert.ok(c.message.content.trimStart().startsWith('{'), c.message.content);
  },

  async 'text completion, json_schema, greedy: streamed equals whole'() {
    const params = { model, prompt: 'And the LORD said unto Moses', response_format: format, temperature: 0, max_tokens: 300 };
    const whole = await client.completions.create(params);
    assert.equal(whole.choices[0].finish_reason, 'stop', whole.choices[0].text);
    check_person(whole.choices[0].text);
    let text = '';
    let finish = null;
    for await (const chunk of await client.completions.create({ ...params, stream: true })) {
      for (const c of chunk.choices) {
        text += c.text;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'stop');
  },

  async 'json_object: an object, even where the model would write prose'() {
    const r = await client.completions.create({
      model, prompt: 'In the beginning', response_format: { type: 'json_object' }, temperature: 0.7, seed: 2, n: 4, max_tokens: 80,
    });
    let parsed = 0;
    for (const c of r.choices) {
      if (c.finish_reason !== 'stop') continue;
      const v = JSON.parse(c.text);
      assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), c.text);
      parsed++;
    }
    assert.ok(parsed >= 1, 'no choice finished');
  },

  async "vLLM's forms: guided_choice, structured_outputs, guided_json"() {
    const labels = ['light', 'darkness', 'the firmament'];
    const chat = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'What did God divide?' }], guided_choice: labels, n: 4, temperature: 1.0, seed: 3, max_tokens: 20,
    });
    for (const c of chat.choices) {
      assert.ok(labels.includes(c.message.content), c.message.content);
      assert.equal(c.finish_reason, 'stop');
    }
    const text = await client.completions.create({
      model, prompt: 'And God called the', structured_outputs: { choice: labels }, temperature: 0, max_tokens: 20,
    });
    assert.ok(labels.includes(text.choices[0].text), text.choices[0].text);
    const j = await client.completions.create({
      model, prompt: 'And God said', guided_json: JSON.stringify(person), temperature: 0, max_tokens: 300,
    });
    assert.equal(j.choices[0].finish_reason, 'stop');
    check_person(j.choices[0].text);
    await assert.rejects(
      client.completions.create({ model, prompt: 'x', guided_choice: ['a'], response_format: { type: 'json_object' } }),
      (e) => e.status === 400 && e.param === 'guided_choice',
    );
  },

  async "grammars and patterns: llama.cpp's GBNF grammar, vLLM's structured_outputs.grammar, guided_regex, regex"() {
    const grammar = 'root ::= verse (", " verse){0,2}\nverse ::= [1-9] [0-9]? ":" [1-9] [0-9]?';
    for (const extra of [{ grammar }, { structured_outputs: { grammar } }]) {
      const r = await client.completions.create({ model, prompt: 'And God said', temperature: 0.9, seed: 4, n: 3, max_tokens: 40, ...extra });
      for (const c of r.choices) {
        assert.equal(c.finish_reason, 'stop', c.text);
        assert.match(c.text, /^[1-9][0-9]?:[1-9][0-9]?(, [1-9][0-9]?:[1-9][0-9]?){0,2}$/);
      }
    }
    for (const extra of [{ guided_regex: '[A-Z][a-z]{2,8}( [a-z]{1,8}){0,3}\\.' }, { structured_outputs: { regex: '(yea|nay), [0-9]{1,2}' } }]) {
      const r = await client.completions.create({ model, prompt: 'And God said', temperature: 0.9, seed: 6, n: 3, max_tokens: 40, ...extra });
      const re = new RegExp(`^(?:${extra.guided_regex ?? extra.structured_outputs.regex})$`);
      for (const c of r.choices) {
        assert.equal(c.finish_reason, 'stop', c.text);
        assert.match(c.text, re);
      }
    }
    await assert.rejects(
      client.completions.create({ model, prompt: 'x', response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: '(a)\\1' } } } }),
      (e) => e.status === 400 && e.param === 'response_format' && e.message.includes('backreferences'),
    );
    // A pattern read in thousands of ways at once fails its own request (400), not the others.
    const [ambiguous, plain] = await Promise.allSettled([
      client.completions.create({ model, prompt: 'x', guided_regex: '(.?){3000}x', temperature: 1.0, max_tokens: 5 }),
      client.completions.create({ model, prompt: 'And God said', temperature: 0, max_tokens: 8 }),
    ]);
    assert.equal(ambiguous.status, 'rejected');
    assert.equal(ambiguous.reason.status, 400);
    assert.match(ambiguous.reason.message, /too ambiguous/);
    assert.equal(plain.status, 'fulfilled');
    assert.equal(plain.value.choices[0].finish_reason, 'length');
    await assert.rejects(
      client.completions.create({ model, prompt: 'x', grammar: 'root ::= undefined-rule' }),
      (e) => e.status === 400 && e.param === 'grammar' && e.message.includes("'undefined-rule' is used but not defined"),
    );
  },

  async 'a schema the server cannot hold is refused, naming response_format'() {
    for (const [response_format, why] of [
      [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', minimum: 0 } } }, "'minimum'"],
      [{ type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/none' } } }, 'names nothing'],
      [{ type: 'json_schema', json_schema: { name: 'x' } }, "'schema'"],
      [{ type: 'xml' }, 'type must be'],
    ]) {
      await assert.rejects(
        client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], response_format }),
        (e) => e.status === 400 && e.param === 'response_format' && e.message.includes(why),
      );
    }
    assert.equal(await idle_blocks(base), 0);
  },
});
