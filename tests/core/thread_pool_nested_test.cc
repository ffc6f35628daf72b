// parallel_for called from inside a parallel_for chunk must run inline on
// every thread, including pool workers (it used to deadlock there).
#include <gtest/gtest.h>

#include <atomic>

#include "rlx/thread_pool.h"

namespace rlx {
namespace {

TEST(ThreadPool, NestedParallelForRunsInlineOnWorkers) {
  set_num_threads(3);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 20; ++rep)
    parallel_for(16, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        parallel_for(10, 1, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
    });
  EXPECT_EQ(sum.load(), 20 * 16 * 10);
  set_num_threads(0);
}

}  // namespace
}  // namespace rlx
