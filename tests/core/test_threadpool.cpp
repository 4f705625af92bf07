#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/threadpool.h"

using namespace tessera;

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 3, 17, 1000}) {
    for (int64_t grain : {1, 4, 64}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain << " " << i;
    }
  }
}

TEST(ThreadPool, ManyRoundsDoNotDeadlock) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int r = 0; r < 2000; ++r) pool.run_on_all([&](int t) { sum += t + 1; });
  EXPECT_EQ(sum.load(), 2000 * 6);
}
