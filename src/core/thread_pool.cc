#include "rlx/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace rlx {
namespace {

// True on pool workers and on a caller while it runs a job: parallel_for from
// there runs inline (a worker waiting on job_mu_ would deadlock the pool).
thread_local bool t_inside = false;

// A fixed pool. One job at a time: the caller publishes a job, workers and the
// caller pull chunk indices from an atomic counter until none are left.
// Workers and the waiting caller spin briefly before blocking: decoding runs
// hundreds of small jobs per token, and a futex sleep/wake per job costs more
// than the job (ggml's threads spin for the same reason).
class Pool {
 public:
  ~Pool() { resize(1); }

  void resize(int n) {
    n = std::max(1, n);
    {
      std::unique_lock lk(mu_);
      stop_ = true;
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    size_ = n;
    // Workers start from the current generation, so a job published before a
    // new thread first runs is still seen by it.
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, g = gen_.load()] { worker_loop(g); });
  }

  int size() const { return size_; }

  void run(int64_t chunks, const std::function<void(int64_t)>& chunk_fn) {
    bool& inside = t_inside;
    if (inside || size_ == 1 || chunks == 1) {  // nested or trivial: run inline
      for (int64_t c = 0; c < chunks; ++c) chunk_fn(c);
      return;
    }
    std::lock_guard job_lock(job_mu_);
    inside = true;
    job_ = &chunk_fn;
    chunks_ = chunks;
    next_.store(0);
    error_ = nullptr;
    pending_.store(int(workers_.size()));
    {
      std::unique_lock lk(mu_);
      gen_.fetch_add(1);
    }
    if (sleepers_.load() > 0) cv_.notify_all();
    work();
    if (!spin_until([&] { return pending_.load() == 0; })) {
      std::unique_lock lk(mu_);
      done_cv_.wait(lk, [&] { return pending_.load() == 0; });
    }
    job_ = nullptr;
    inside = false;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  template <typename Pred>
  static bool spin_until(Pred done) {
    for (int i = 0; i < kSpins; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    return done();
  }

  void work() {
    for (int64_t c; (c = next_.fetch_add(1)) < chunks_;) {
      try {
        (*job_)(c);
      } catch (...) {
        std::lock_guard lk(err_mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void worker_loop(uint64_t seen) {
    t_inside = true;
    for (;;) {
      if (!spin_until([&] { return gen_.load() != seen; })) {
        std::unique_lock lk(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lk, [&] { return gen_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
      seen = gen_.load();
      {
        std::lock_guard lk(mu_);  // stop_ is written under mu_
        if (stop_) return;
      }
      work();
      if (pending_.fetch_sub(1) == 1) {
        std::lock_guard lk(mu_);
        done_cv_.notify_one();
      }
    }
  }

  // ~20-50 us of pause instructions: covers the gap between the small jobs of
  // one decode step without burning a core while the pool is idle.
  static constexpr int kSpins = 4000;
  std::vector<std::thread> workers_;
  int size_ = 1;
  std::mutex mu_, job_mu_, err_mu_;
  std::condition_variable cv_, done_cv_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> sleepers_{0}, pending_{0};
  bool stop_ = false;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

int default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

Pool& pool() {
  static Pool p;
  static std::once_flag once;
  std::call_once(once, [] { p.resize(default_threads()); });
  return p;
}

}  // namespace

void set_num_threads(int n) { pool().resize(n <= 0 ? default_threads() : n); }
int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  Pool& p = pool();
  // A few chunks per thread balances uneven work without much overhead.
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t(p.size()) * 4);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  const int64_t step = (n + chunks - 1) / chunks;
  chunks = (n + step - 1) / step;
  p.run(chunks, [&](int64_t c) { fn(c * step, std::min(n, (c + 1) * step)); });
}

}  // namespace rlx
