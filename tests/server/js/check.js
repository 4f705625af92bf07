// Minimal assertions for the server's end-to-end scripts: a failed check prints and exits 1.
const assert = require('node:assert/strict');

async function run(tests) {
  let failed = 0;
  for (const [name, fn] of Object.entries(tests)) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

// Reads a Prometheus gauge or counter (without labels) from /metrics.
async function metric(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'));
  assert.ok(m, `metric ${name} not found`);
  return Number(m[1]);
}

// Waits until no sequence runs or waits, then returns the KV blocks still in use.
async function idle_blocks(base) {
  for (let i = 0; i < 200; i++) {
    const busy = (await metric(base, 'tessera_num_requests_running')) + (await metric(base, 'tessera_num_requests_waiting'));
    if (busy === 0) return metric(base, 'tessera_kv_blocks_used');
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the server did not go idle');
}

function prompt_ids(n, salt) {
  return Array.from({ length: n }, (_, i) => 3 + ((i * 37 + salt * 101) % 380));
}

module.exports = { assert, run, metric, idle_blocks, prompt_ids };
