#include "thread_cpu.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "core/threadpool.h"

namespace tessera::bench {
namespace {

// The first field of schedstat: nanoseconds spent running (finer than stat's clock ticks).
double task_seconds(const std::filesystem::path& task) {
  std::ifstream f(task / "schedstat");
  double ns = 0;
  f >> ns;
  return ns * 1e-9;
}

std::string task_name(const std::filesystem::path& task) {
  std::ifstream f(task / "comm");
  std::string name;
  std::getline(f, name);
  return name;
}

double process_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

std::set<int> pool_worker_tids() {
  std::set<int> tids;
  std::mutex mu;
  ThreadPool::global().run_on_all([&](int i) {
    std::lock_guard lk(mu);
    if (i > 0) tids.insert(int(gettid()));
  });
  return tids;
}

CpuSplit cpu_split(const std::set<int>& pool_tids) {
  CpuSplit s;
  double total = process_seconds();
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    int tid = std::stoi(task.path().filename().string());
    std::string name = task_name(task.path());
    double t = task_seconds(task.path());
    if (pool_tids.count(tid) || name == "tessera-engine")
      s.engine += t;
    else if (name == "tessera-http")
      s.http += t;
    else if (name == "tessera-sse")
      s.sse += t;
  }
  s.rest = total - s.engine - s.http - s.sse;
  return s;
}

}  // namespace tessera::bench
