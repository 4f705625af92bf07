// CPU time of this process's threads, grouped: the engine (its thread and the CPU backend's pool
// workers), the server's HTTP connection threads and SSE writer (told apart by the names the
// server gives them), and the rest (the bench's clients). Per-thread time does not depend on
// what else the machine runs, unlike wall time.
#pragma once
#include <set>

namespace tessera::bench {

struct CpuSplit {
  double engine = 0, http = 0, sse = 0, rest = 0;  // seconds
  double server() const { return http + sse; }
  CpuSplit operator-(const CpuSplit& o) const {
    return {engine - o.engine, http - o.http, sse - o.sse, rest - o.rest};
  }
};

// The thread ids of the CPU backend's pool workers (the calling thread is not one).
std::set<int> pool_worker_tids();
// Live threads now; `rest` is the whole process (exited threads included) minus the groups.
CpuSplit cpu_split(const std::set<int>& pool_tids);

}  // namespace tessera::bench
