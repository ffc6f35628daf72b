// One process-wide pool of worker threads. Kernels split work with
// parallel_for; nested calls run inline so kernels may call each other.
#pragma once
#include <cstdint>
#include <functional>

namespace rlx {

// Sets the number of threads (including the caller). 0 = all cores.
void set_num_threads(int n);
int num_threads();

// Calls fn(begin, end) over [0, n) in chunks of at least `grain` items,
// spread over the pool; returns when all chunks are done. Exceptions thrown by
// fn are rethrown on the caller.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Calls fn(i) for every i in [0, n), each its own chunk: for a few coarse,
// uneven tasks (a conv's GEMM tiles), where parallel_for's few chunks per
// thread would leave one thread with a whole extra chunk of them at the end.
void parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn);

// While one lives, parallel_for and parallel_tasks called from this thread
// run inline: for a kernel too small to pay for a second core.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool saved_;
};

}  // namespace rlx
