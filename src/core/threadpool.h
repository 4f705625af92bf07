// A fixed pool of worker threads. Ops parallelise inside themselves with parallel_for;
// the calling thread takes part, so a pool of N threads has N-1 workers.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n); chunks are multiples of `grain`
  // (except the last) and each thread gets at most one contiguous chunk.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // Calls fn(thread_index) once on every thread of the pool.
  void run_on_all(const std::function<void(int)>& fn);

  // The process-wide pool used by the CPU backend; sized on first use (set_threads before).
  static ThreadPool& global();
  static void set_global_threads(int n);

 private:
  void worker(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // held by the thread whose job the workers run
  std::mutex mu_;
  std::condition_variable wake_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

}  // namespace tessera
