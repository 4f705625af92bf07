// Memory read bandwidth of this machine: the ceiling for weight-streaming decode.
#pragma once
#include "core/threadpool.h"

namespace tessera::bench {

// GB/s of summing a `bytes` buffer with AVX2 loads, split over the pool's threads (best of `reps`).
double read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t(1) << 30, int reps = 5);

}  // namespace tessera::bench
