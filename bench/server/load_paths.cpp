#include "load_paths.h"

#include <httplib.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
int g_client_nice = 0;

double since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

std::vector<int32_t> prompt_for(int i, int len) {
  std::vector<int32_t> p;
  for (int k = 0; k < len; ++k) p.push_back(3 + (k * 37 + i * 101) % 250);
  return p;
}

// Runs client(c, mine) on `clients` named threads and merges their runs, timing the whole.
Run run_threads(int clients, const std::set<int>& pool_tids, const std::function<void(int, Run&)>& client) {
  Run run;
  run.arrivals.resize(size_t(clients));
  std::mutex mu;
  std::vector<std::thread> threads;
  CpuSplit cpu0 = cpu_split(pool_tids);
  auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      pthread_setname_np(pthread_self(), "bench-client");
      setpriority(PRIO_PROCESS, id_t(gettid()), g_client_nice);
      Run mine;
      mine.arrivals.resize(1);
      client(c, mine);
      std::lock_guard lk(mu);
      run.tokens += mine.tokens;
      run.errors += mine.errors;
      run.ttft.insert(run.ttft.end(), mine.ttft.begin(), mine.ttft.end());
      run.itl.insert(run.itl.end(), mine.itl.begin(), mine.itl.end());
      for (double& t : mine.arrivals[0]) t -= since(Clock::time_point(), t0);
      run.arrivals[size_t(c)] = std::move(mine.arrivals[0]);
    });
  for (auto& t : threads) t.join();
  run.wall_s = since(t0, Clock::now());
  run.cpu = cpu_split(pool_tids) - cpu0;
  return run;
}

double epoch_seconds(Clock::time_point t) {
  return since(Clock::time_point(), t);
}

}  // namespace

void set_client_nice(int nice) {
  g_client_nice = nice;
}

double Run::steady_step_ms() const {
  double all_started = 0, first_done = 1e300;
  size_t first = 0;
  for (size_t c = 0; c < arrivals.size(); ++c) {
    if (arrivals[c].empty()) return 0;
    all_started = std::max(all_started, arrivals[c].front());
    if (arrivals[c].back() < first_done) first_done = arrivals[c].back(), first = c;
  }
  const auto& a = arrivals[first];
  auto steps =
      std::count_if(a.begin(), a.end(), [&](double t) { return t > all_started && t <= first_done; });
  return steps > 0 ? (first_done - all_started) * 1e3 / double(steps) : 0;
}

Request make_request(const Load& l, int i) {
  Request r;
  r.prompt = prompt_for(i, l.prompt_len);
  r.max_tokens = l.max_tokens;
  r.params.temperature = 0.8f;
  r.seed = uint64_t(i);
  return r;
}

Run run_engine(Engine& engine, const Load& l, const std::set<int>& pool_tids) {
  Run run;
  run.arrivals.resize(size_t(l.clients));
  // On its own thread, as the engine thread is.
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "tessera-engine");
    CpuSplit cpu0 = cpu_split(pool_tids);  // this thread is alive for both samples
    auto t0 = Clock::now();
    for (int round = 0; round < l.rounds; ++round) {
      std::unordered_map<int64_t, std::pair<int, Clock::time_point>> last;  // seq -> (client, last token)
      auto start = Clock::now();
      for (int c = 0; c < l.clients; ++c)
        last[engine.add_request(make_request(l, round * l.clients + c))] = {c, start};
      while (engine.has_work()) {
        auto outs = engine.step();
        auto now = Clock::now();
        for (auto& o : outs) {
          auto& [c, t] = last[o.seq_id];
          (t == start ? run.ttft : run.itl).push_back(since(t, now));
          if (round == 0) run.arrivals[size_t(c)].push_back(since(t0, now));
          t = now;
          ++run.tokens;
          if (o.finished) engine.release(o.seq_id);
        }
      }
    }
    run.wall_s = since(t0, Clock::now());
    run.cpu = cpu_split(pool_tids) - cpu0;
  });
  t.join();
  return run;
}

Run run_async(AsyncEngine& async, const Load& l, const std::set<int>& pool_tids) {
  return run_threads(l.clients, pool_tids, [&](int c, Run& mine) {
    for (int round = 0; round < l.rounds; ++round) {
      auto start = Clock::now(), last = start;
      auto stream = async.submit({make_request(l, round * l.clients + c)});
      for (bool done = false; !done;)
        for (auto& e : stream->wait(std::chrono::milliseconds(100))) {
          auto now = Clock::now();
          (mine.tokens % l.max_tokens == 0 ? mine.ttft : mine.itl).push_back(since(last, now));
          if (round == 0) mine.arrivals[0].push_back(epoch_seconds(now));
          last = now;
          ++mine.tokens;
          done = e.finished || !e.error.empty();
          mine.errors += !e.error.empty();
        }
    }
  });
}

Run run_clients(const std::string& host, int port, const Load& l, const std::set<int>& pool_tids) {
  return run_threads(l.clients, pool_tids, [&](int c, Run& mine) {
    httplib::Client cli(host, port);
    cli.set_read_timeout(600);
    for (int round = 0; round < l.rounds; ++round) {
      Request r = make_request(l, round * l.clients + c);
      nlohmann::json body = {{"prompt", r.prompt},      {"max_tokens", l.max_tokens}, {"temperature", 0.8},
                             {"seed", *r.seed},         {"ignore_eos", true},         {"stream", true},
                             {"return_token_ids", true}};
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      auto start = Clock::now(), last = start;
      int64_t got = 0;
      std::string buf;
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        buf.append(data, n);
        auto now = Clock::now();
        size_t at;
        while ((at = buf.find("\n\n")) != std::string::npos) {
          // Tokens in this event: the ids in its "token_ids":[...] (counted, not parsed).
          size_t ids = buf.find("\"token_ids\":[");
          int k = 0;
          if (ids != std::string::npos && ids < at) {
            size_t end = buf.find(']', ids);
            if (end > ids + 13)
              k = 1 + int(std::count(buf.begin() + long(ids), buf.begin() + long(end), ','));
          }
          for (int i = 0; i < k; ++i) {
            bool first = got == 0 && i == 0;
            (first ? mine.ttft : mine.itl).push_back(first ? since(start, now) : since(last, now) / k);
            if (round == 0) mine.arrivals[0].push_back(epoch_seconds(now));
            ++got;
          }
          if (k) last = now;
          buf.erase(0, at + 2);
        }
        return true;
      };
      httplib::Response res;
      httplib::Error err;
      if (!cli.send(req, res, err) || res.status != 200 || got != l.max_tokens) ++mine.errors;
      mine.tokens += got;
    }
  });
}

}  // namespace tessera::bench
