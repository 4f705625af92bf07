// The same load on three paths: the engine alone (Engine::step in a loop), the engine thread
// (AsyncEngine) with one in-process client thread per stream, and the HTTP server with one
// streaming httplib client per stream. Every path records when each token reached its consumer.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "thread_cpu.h"

namespace tessera::bench {

// `rounds` requests in a row by each of `clients` concurrent clients.
struct Load {
  int clients, rounds, prompt_len, max_tokens;
};

struct Run {
  double wall_s = 0;
  int64_t tokens = 0;
  int errors = 0;
  std::vector<double> ttft, itl;              // seconds
  std::vector<std::vector<double>> arrivals;  // first round, per client: each token's arrival (s)
  CpuSplit cpu;                               // over the whole run
  double tok_per_s() const { return wall_s > 0 ? double(tokens) / wall_s : 0; }
  // Milliseconds per engine step while every first-round stream decodes: from the moment all
  // have their first token to the first one's last token, over the tokens it got in between
  // (one per step). 0 when that window is empty.
  double steady_step_ms() const;
};

// The clients' nice value (they stand for other machines: niced, they keep off the engine's
// cores as far as the scheduler allows, and what remains measured is the server).
void set_client_nice(int nice);

Request make_request(const Load& l, int i);
// Each round adds one request per client at once and steps until all finish.
Run run_engine(Engine& engine, const Load& l, const std::set<int>& pool_tids);
Run run_async(AsyncEngine& async, const Load& l, const std::set<int>& pool_tids);
// Streaming completions over HTTP ("stream": true, "return_token_ids": true).
Run run_clients(const std::string& host, int port, const Load& l, const std::set<int>& pool_tids);

}  // namespace tessera::bench
