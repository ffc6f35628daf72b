// parallel_for called from inside a parallel_for chunk must run inline on
// every thread, including pool workers (it used to deadlock there); and many
// jobs in a row, with workers waking late, run every chunk of every job
// exactly once (the caller does not wait for workers that never claimed a
// chunk, so a late worker must not claim from a finished job).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

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

TEST(ThreadPool, BackToBackJobsRunEachChunkOnce) {
  set_num_threads(3);
  constexpr int kJobs = 20000, kItems = 64;
  std::vector<std::atomic<int>> hits(kItems);
  int64_t bad = 0;
  for (int job = 0; job < kJobs; ++job) {
    for (auto& h : hits) h.store(0, std::memory_order_relaxed);
    parallel_for(kItems, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
      if ((job + b) % 97 == 0) std::this_thread::yield();  // shuffle who is late
    });
    for (auto& h : hits) bad += h.load(std::memory_order_relaxed) != 1;
  }
  EXPECT_EQ(bad, 0);
  set_num_threads(0);
}

// The caller owns the first share of every job and claims it before stealing,
// so a kernel's first part runs where the previous kernel's first part ran
// (its L2). Each chunk sleeps, so no thief can finish its own share first.
TEST(ThreadPool, TheCallerRunsTheFirstShareOfEveryJob) {
  set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int64_t> elsewhere{0};
  for (int job = 0; job < 20; ++job)
    parallel_for(4, 1, [&](int64_t b, int64_t e) {
      // The worker's share is slow, so it cannot run out of its own chunks and
      // steal the caller's (which it may, by design, from a preempted caller).
      if (b >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (b < 2 && std::this_thread::get_id() != caller) elsewhere += e - b;
    });
  EXPECT_EQ(elsewhere.load(), 0);
  set_num_threads(0);
}

// Under a SerialScope every chunk runs on the calling thread (each one sleeps, so a free worker
// would take some), and parallel_for splits work over the pool again once it ends.
TEST(ThreadPool, ASerialScopeRunsEveryChunkOnTheCaller) {
  set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  auto chunks_elsewhere = [&] {
    std::atomic<int64_t> elsewhere{0};
    parallel_for(8, 1, [&](int64_t b, int64_t e) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (std::this_thread::get_id() != caller) elsewhere += e - b;
    });
    return elsewhere.load();
  };
  {
    SerialScope serial;
    EXPECT_EQ(chunks_elsewhere(), 0);
  }
  EXPECT_GT(chunks_elsewhere(), 0);
  set_num_threads(0);
}

}  // namespace
}  // namespace rlx
