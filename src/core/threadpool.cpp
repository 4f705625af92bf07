#include "core/threadpool.h"

#include <algorithm>
#include <memory>

namespace tessera {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  std::lock_guard caller(call_mu_);  // one job at a time: engines on several threads share the pool
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    pending_.store(num_threads_ - 1, std::memory_order_release);
    ++generation_;
  }
  wake_.notify_all();
  fn(0);
  // Workers finish within one op; spinning avoids a sleep/wake round trip per op.
  while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t units = (n + grain - 1) / grain;
  int threads = int(std::min<int64_t>(num_threads_, units));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  run_on_all([&](int t) {
    if (t >= threads) return;
    int64_t u0 = units * t / threads, u1 = units * (t + 1) / threads;
    int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e);
  });
}

namespace {
int g_threads = 0;
}

void ThreadPool::set_global_threads(int n) { g_threads = n; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_threads > 0 ? g_threads : int(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace tessera
