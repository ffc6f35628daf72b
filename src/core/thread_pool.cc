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
// caller claim chunk indices until none are left, and the caller returns once
// every claimed chunk is done. It never waits for a worker that has not woken
// up: on a loaded machine a sleeping worker can take milliseconds to get a
// core, and waiting for it to check in made small models 3x slower at 2
// threads than at 1 (a late worker finds the job closed and goes back to
// sleep). Workers and the waiting caller spin briefly before blocking:
// decoding runs hundreds of small jobs per token, and a futex sleep/wake per
// job costs more than the job (ggml's threads spin for the same reason).
class Pool {
 public:
  ~Pool() { resize(1); }

  void resize(int n) {
    n = std::max(1, n);
    {
      std::unique_lock lk(mu_);
      stop_ = true;
      wake_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    size_ = n;
    // Workers start from the current wake count, so a job published before a
    // new thread first runs is still seen by it.
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, w = wake_.load()] { worker_loop(w); });
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
    // Close the last job's claim word first: a worker still holding that
    // word cannot claim from it after job_ and chunks_ change.
    const uint64_t job = ++job_id_;
    claim_.store(word(job, kClosed));
    job_.store(&chunk_fn, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    claim_.store(word(job, 0), std::memory_order_release);
    {
      std::unique_lock lk(mu_);
      wake_.fetch_add(1);
    }
    if (sleepers_.load() > 0) cv_.notify_all();
    work();
    if (!spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; })) {
      std::unique_lock lk(mu_);
      done_cv_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == chunks; });
    }
    inside = false;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // The claim word: the job's id in the high 32 bits, the next chunk index in the low.
  static constexpr uint64_t kClosed = 0xFFFFFFFFull;
  static uint64_t word(uint64_t job, uint64_t index) { return (job << 32) | index; }

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

  // Claims and runs chunks of the current job until none is left. A claim is
  // a compare-exchange on the word it read, so it fails once the caller has
  // closed that job; chunks_ and job_ read after an acquire of the word are
  // that job's (the caller changes them only after closing it).
  void work() {
    for (uint64_t v = claim_.load(std::memory_order_acquire);;) {
      const int64_t c = int64_t(v & kClosed), chunks = chunks_.load(std::memory_order_relaxed);
      if (c >= chunks) return;
      if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
      try {
        (*job_.load(std::memory_order_relaxed))(c);
      } catch (...) {
        std::lock_guard lk(err_mu_);
        if (!error_) error_ = std::current_exception();
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard lk(mu_);  // the caller may be about to sleep on done_cv_
        done_cv_.notify_one();
      }
      v = claim_.load(std::memory_order_acquire);
    }
  }

  void worker_loop(uint64_t seen) {
    t_inside = true;
    for (;;) {
      if (!spin_until([&] { return wake_.load() != seen; })) {
        std::unique_lock lk(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lk, [&] { return wake_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
      seen = wake_.load();
      {
        std::lock_guard lk(mu_);  // stop_ is written under mu_
        if (stop_) return;
      }
      work();
    }
  }

  // ~20-50 us of pause instructions: covers the gap between the small jobs of
  // one decode step without burning a core while the pool is idle.
  static constexpr int kSpins = 4000;
  std::vector<std::thread> workers_;
  int size_ = 1;
  std::mutex mu_, job_mu_, err_mu_;
  std::condition_variable cv_, done_cv_;
  std::atomic<uint64_t> wake_{0}, claim_{word(0, kClosed)};
  std::atomic<int> sleepers_{0};
  std::atomic<int64_t> chunks_{0}, done_{0};
  std::atomic<const std::function<void(int64_t)>*> job_{nullptr};
  uint64_t job_id_ = 0;  // written only under job_mu_
  bool stop_ = false;
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

void parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, fn);
}

}  // namespace rlx
