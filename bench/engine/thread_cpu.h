// The calling thread's CPU time in seconds: the host benchmarks' clock, which other processes on
// a shared machine inflate less than wall time.
#pragma once
#include <time.h>

inline double thread_cpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}
