// Server metrics in Prometheus text format (GET /metrics). Updated by the HTTP threads;
// engine gauges come from the AsyncEngine's published stats.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/async_engine.h"

namespace tessera::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends the _bucket/_sum/_count lines of metric `name`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(int status);
  void add_tokens(int64_t prompt, int64_t cached, int64_t generated);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_latency(double seconds);
  // engine: null while the model is loading.
  std::string render(const AsyncEngineStats* engine) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> requests_;  // by HTTP status
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
  Histogram ttft_, itl_, latency_;
};

}  // namespace tessera::server
