#include "server/metrics.h"

#include <cstdio>

namespace tessera::server {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string& out, const std::string& name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  out += name + " " + num(v) + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cum += counts_[i];
    std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_(
          {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
            0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1,    2.5}),
      latency_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480}) {}

void Metrics::count_request(int status) {
  std::lock_guard lk(mu_);
  requests_[status]++;
}

void Metrics::add_tokens(int64_t prompt, int64_t cached, int64_t generated) {
  std::lock_guard lk(mu_);
  prompt_tokens_ += prompt;
  cached_tokens_ += cached;
  generated_tokens_ += generated;
}

void Metrics::observe_ttft(double s) {
  std::lock_guard lk(mu_);
  ttft_.observe(s);
}

void Metrics::observe_itl(double s) {
  std::lock_guard lk(mu_);
  itl_.observe(s);
}

void Metrics::observe_latency(double s) {
  std::lock_guard lk(mu_);
  latency_.observe(s);
}

std::string Metrics::render(const AsyncEngineStats* e) const {
  std::lock_guard lk(mu_);
  std::string out;
  header(out, "tessera_requests_total", "counter", "HTTP requests to the API by response status.");
  for (auto [status, n] : requests_)
    out += "tessera_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  scalar(out, "tessera_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         double(prompt_tokens_));
  scalar(out, "tessera_generation_tokens_total", "counter", "Generated tokens.", double(generated_tokens_));
  scalar(out, "tessera_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens served from the prefix cache.", double(cached_tokens_));
  if (e) {
    scalar(out, "tessera_num_requests_waiting", "gauge", "Sequences waiting to run.", e->waiting);
    scalar(out, "tessera_num_requests_running", "gauge", "Sequences running.", e->running);
    scalar(out, "tessera_kv_blocks_used", "gauge", "KV cache blocks in use by sequences.", e->used_blocks);
    scalar(out, "tessera_kv_blocks_free", "gauge", "KV cache blocks free or evictable.", e->free_blocks);
    scalar(out, "tessera_kv_blocks_total", "gauge", "KV cache blocks.", e->total_blocks);
    scalar(out, "tessera_prefix_cache_blocks", "gauge", "Blocks findable in the prefix cache.",
           e->cached_blocks);
    scalar(out, "tessera_preemptions_total", "counter", "Sequences preempted for memory.",
           double(e->preemptions));
  }
  header(out, "tessera_time_to_first_token_seconds", "histogram", "Time from request to first token.");
  ttft_.render("tessera_time_to_first_token_seconds", out);
  header(out, "tessera_inter_token_latency_seconds", "histogram",
         "Time between consecutive tokens of a sequence.");
  itl_.render("tessera_inter_token_latency_seconds", out);
  header(out, "tessera_request_latency_seconds", "histogram", "Time from request to its last token.");
  latency_.render("tessera_request_latency_seconds", out);
  return out;
}

}  // namespace tessera::server
