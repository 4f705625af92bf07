#include "engine/async_engine.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace tessera {

RequestStream::RequestStream(int num_requests, std::function<void()> on_event)
    : size_(num_requests),
      on_event_(std::move(on_event)),
      cancelled_(new std::atomic<bool>[size_t(num_requests)]) {
  for (int i = 0; i < num_requests; ++i) cancelled_[size_t(i)] = false;
}

std::vector<StreamEvent> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
  std::vector<StreamEvent> out(std::make_move_iterator(events_.begin()),
                               std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void RequestStream::cancel(int index) {
  if (index >= 0)
    cancelled_[size_t(index)] = true;
  else
    for (int i = 0; i < size_; ++i) cancelled_[size_t(i)] = true;
}

void RequestStream::push(StreamEvent e) {
  std::lock_guard lk(mu_);
  events_.push_back(std::move(e));
}

void RequestStream::notify() {
  cv_.notify_one();
  if (on_event_) on_event_();
}

void RequestStream::fail(int index, std::string why) {
  StreamEvent e;
  e.index = index;
  e.error = std::move(why);
  push(std::move(e));
  notify();
}

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  publish_stats();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  stop();
}

std::shared_ptr<RequestStream> AsyncEngine::submit(std::vector<Request> reqs,
                                                   std::function<void()> on_event) {
  auto stream = std::make_shared<RequestStream>(int(reqs.size()), std::move(on_event));
  {
    std::lock_guard lk(mu_);
    if (stopping_) {
      for (int i = 0; i < int(reqs.size()); ++i) stream->fail(i, "the server is shutting down");
      return stream;
    }
    for (int i = 0; i < int(reqs.size()); ++i) incoming_.push_back({stream, i, std::move(reqs[size_t(i)])});
    in_flight_ += int(reqs.size());
    stats_.waiting += int(reqs.size());
  }
  cv_.notify_one();
  return stream;
}

AsyncEngineStats AsyncEngine::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void AsyncEngine::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void AsyncEngine::loop() {
  pthread_setname_np(pthread_self(), "tessera-engine");  // for top -H, perf and the server bench
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || !incoming_.empty() || engine_->has_work(); });
    if (stopping_) break;
    std::vector<Pending> pending = std::move(incoming_);
    incoming_.clear();
    lk.unlock();
    admit(pending);
    drop_cancelled();
    if (engine_->has_work()) run_step();
    lk.lock();
    publish_stats();
  }
  std::vector<Pending> pending = std::move(incoming_);
  incoming_.clear();
  lk.unlock();
  for (auto& p : pending) {
    p.stream->fail(p.index, "the server is shutting down");
    --in_flight_;
  }
  fail_all("the server is shutting down");
}

void AsyncEngine::admit(std::vector<Pending>& pending) {
  for (auto& p : pending) {
    if (p.stream->cancelled(p.index)) {
      --in_flight_;
      continue;
    }
    try {
      int64_t id = engine_->add_request(std::move(p.req));
      active_[id] = {std::move(p.stream), p.index};
    } catch (const std::exception& e) {
      p.stream->fail(p.index, e.what());
      --in_flight_;
    }
  }
}

void AsyncEngine::drop_cancelled() {
  std::vector<int64_t> gone;
  for (auto& [id, a] : active_)
    if (a.stream->cancelled(a.index)) gone.push_back(id);
  for (int64_t id : gone) finish_active(id);
}

void AsyncEngine::finish_active(int64_t seq_id) {
  engine_->release(seq_id);  // aborts it first when still running, freeing its blocks
  active_.erase(seq_id);
  --in_flight_;
}

void AsyncEngine::run_step() {
  std::vector<TokenOutput> outs;
  try {
    outs = engine_->step();
  } catch (const std::exception& e) {
    // A failed step leaves the batch's state unknown: fail its requests rather than the server.
    std::fprintf(stderr, "engine step failed: %s\n", e.what());
    fail_all(std::string("engine error: ") + e.what());
    return;
  }
  // Readers are notified once per step, after all its tokens are queued: a reader serving many
  // streams (the SSE writer) then finds the whole step at its first wake-up.
  std::vector<RequestStream*> touched;
  std::vector<int64_t> finished;
  for (auto& o : outs) {
    auto it = active_.find(o.seq_id);
    if (it == active_.end()) continue;
    const Sequence* s = engine_->sequence(o.seq_id);
    StreamEvent e;
    e.index = it->second.index;
    e.token = o.token;
    e.sample = std::move(o.sample);
    e.finished = o.finished;
    e.finish_reason = o.finish_reason;
    e.num_cached_tokens = s ? s->num_cached_tokens : 0;
    e.prompt_scores = std::move(o.prompt_scores);
    e.error = std::move(o.error);
    e.input_error = !e.error.empty();
    it->second.stream->push(std::move(e));
    touched.push_back(it->second.stream.get());
    if (o.finished) finished.push_back(o.seq_id);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (RequestStream* t : touched) t->notify();
  for (int64_t id : finished) finish_active(id);  // may drop the last reference to a stream
}

void AsyncEngine::fail_all(const std::string& why) {
  std::vector<int64_t> ids;
  for (auto& [id, a] : active_) {
    a.stream->fail(a.index, why);
    ids.push_back(id);
  }
  for (int64_t id : ids) finish_active(id);
}

void AsyncEngine::publish_stats() {
  const BlockManager& b = engine_->blocks();
  stats_.waiting = engine_->scheduler().num_waiting() + int(incoming_.size());
  stats_.running = engine_->scheduler().num_running();
  stats_.used_blocks = b.num_used_blocks();
  stats_.free_blocks = b.num_free_blocks();
  stats_.cached_blocks = b.num_cached_blocks();
  stats_.total_blocks = b.num_blocks();
  stats_.preemptions = engine_->scheduler().num_preemptions();
  ++stats_.steps;
}

}  // namespace tessera
