// The engine on its own thread. Client threads submit requests and read their tokens from a
// RequestStream; the engine thread takes new requests and cancellations between steps, sleeps
// when there is nothing to do, and never does HTTP, JSON or text work.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace tessera {

// One generated token (or the failure) of one of a stream's sequences.
struct StreamEvent {
  int index = 0;  // which of the stream's requests
  int32_t token = 0;
  SampleResult sample;
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  int num_cached_tokens = 0;  // prompt tokens that came from the prefix cache
  std::vector<SampleResult> prompt_scores;  // TokenOutput::prompt_scores
  std::string error;          // non-empty: the engine refused or lost the request
  bool input_error = false;   // with error: the request's own input caused it (a 400, not a 500)
};

// The outputs of one client request: one or more sequences (n > 1, several prompts). The
// engine thread pushes; the client's thread waits and drains.
class RequestStream {
 public:
  // on_event: called by the engine thread after queueing events (for a reader that serves many
  // streams from one thread); the stream's own wait() works either way.
  explicit RequestStream(int num_requests, std::function<void()> on_event = {});
  int size() const { return size_; }
  // Events queued so far, waiting up to `timeout` for the first one.
  std::vector<StreamEvent> wait(std::chrono::milliseconds timeout);
  // Stops sequence `index` (every one when -1); the engine frees its blocks at its next step.
  void cancel(int index = -1);
  bool cancelled(int index) const { return cancelled_[size_t(index)].load(std::memory_order_relaxed); }

 private:
  friend class AsyncEngine;
  // Queues an event; readers learn of it at notify(), once per engine step for all its events.
  void push(StreamEvent e);
  void notify();
  // Pushes request `index`'s failure and notifies.
  void fail(int index, std::string why);

  int size_;
  std::function<void()> on_event_;
  std::unique_ptr<std::atomic<bool>[]> cancelled_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
};

// A consistent-enough snapshot for metrics, published after every step.
struct AsyncEngineStats {
  int waiting = 0;  // submitted, not yet running
  int running = 0;
  int used_blocks = 0;
  int free_blocks = 0;
  int cached_blocks = 0;
  int total_blocks = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
};

class AsyncEngine {
 public:
  // Takes the engine over: from now on only the engine thread touches it.
  explicit AsyncEngine(std::unique_ptr<Engine> engine);
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Queues the requests as one stream; their tokens arrive in order per index.
  std::shared_ptr<RequestStream> submit(std::vector<Request> reqs, std::function<void()> on_event = {});
  // Sequences submitted and not finished yet (queued, waiting or running).
  int in_flight() const { return in_flight_.load(); }
  AsyncEngineStats stats() const;
  // Finishes every request with an error and joins the thread.
  void stop();

 private:
  struct Pending {
    std::shared_ptr<RequestStream> stream;
    int index;
    Request req;
  };
  struct Active {
    std::shared_ptr<RequestStream> stream;
    int index;
  };
  void loop();
  void admit(std::vector<Pending>& pending);
  void drop_cancelled();
  void run_step();
  void finish_active(int64_t seq_id);
  void fail_all(const std::string& why);
  void publish_stats();

  std::unique_ptr<Engine> engine_;
  std::unordered_map<int64_t, Active> active_;  // engine thread only
  std::atomic<int> in_flight_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> incoming_;
  bool stopping_ = false;
  AsyncEngineStats stats_;
  std::thread thread_;
};

}  // namespace tessera
