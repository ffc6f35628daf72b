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
//
// Each thread owns a contiguous share of every job's chunks (the caller the
// first, worker i the (i+1)-th), claims from it first and steals from the
// others only when it is done: consecutive kernels split the same way then run
// the same part on the same core and read what that core wrote from its own
// cache. On the Zen 5 VM a core reads the other core's fresh data at half the
// speed of its own (32 vs 70 GB/s), and with first-come claims which thread
// took which part was a coin flip per node.
class Pool {
 public:
  ~Pool() { resize(1); }

  void resize(int n) {
    n = std::max(1, n);
    {
      std::unique_lock lk(mu_);
      stop_.store(true);
      wake_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_.store(false);
    size_ = n;
    // Workers start from the current wake count, so a job published before a
    // new thread first runs is still seen by it.
    shares_ = std::vector<Share>(size_t(n));
    for (int i = 1; i < n; ++i)
      workers_.emplace_back([this, i, w = wake_.load()] { worker_loop(i, w); });
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
    // Close the last job's claim words first: a worker still holding one
    // cannot claim from it after job_, chunks_ and the shares' ends change.
    const uint64_t job = ++job_id_;
    for (auto& s : shares_) s.claim.store(word(job, kClosed));
    job_.store(&chunk_fn, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    const int64_t n = size_;
    for (int64_t t = 0; t < n; ++t) {
      shares_[size_t(t)].end.store((t + 1) * chunks / n, std::memory_order_relaxed);
      shares_[size_t(t)].claim.store(word(job, uint64_t(t * chunks / n)),
                                     std::memory_order_release);
    }
    // No lock unless a worker sleeps: a sleeper counts itself before it
    // checks wake_ (both seq_cst), so it sees this bump or is seen here.
    wake_.fetch_add(1);
    if (sleepers_.load() > 0) {
      std::lock_guard lk(mu_);
      cv_.notify_all();
    }
    work(0);
    if (!spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; })) {
      std::unique_lock lk(mu_);
      caller_waits_.store(true);  // before the predicate reads done_: see work()
      done_cv_.wait(lk, [&] { return done_.load() == chunks; });
      caller_waits_.store(false);
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

  // One thread's share of the current job: chunks [claimed, end), on its own
  // cache line (its owner claims from it chunk by chunk).
  struct alignas(64) Share {
    std::atomic<uint64_t> claim{word(0, kClosed)};
    std::atomic<int64_t> end{0};
  };

  // Runs chunks of the current job: thread `self`'s own share in order, then
  // what is left of the others' shares. A claim is a compare-exchange on the
  // word it read, so it fails once the caller has closed that job; job_,
  // chunks_ and the share's end read after an acquire of the word are that
  // job's or a later one's (the caller changes them only after closing it,
  // and a later job's word fails the exchange). A thief takes half of what is
  // left of a share, its owner one chunk at a time.
  void work(int self) {
    const int n = size_;
    for (int i = 0; i < n; ++i) {
      Share& s = shares_[size_t((self + i) % n)];
      int64_t ran = 0;
      for (uint64_t v = s.claim.load(std::memory_order_acquire);;) {
        const int64_t c = int64_t(v & kClosed), end = s.end.load(std::memory_order_relaxed);
        if (c >= end) break;
        const int64_t take = i == 0 ? 1 : std::max<int64_t>(1, (end - c) / 2);
        if (!s.claim.compare_exchange_weak(v, v + uint64_t(take), std::memory_order_acq_rel))
          continue;
        const auto& fn = *job_.load(std::memory_order_relaxed);
        for (int64_t k = c; k < c + take; ++k) {
          try {
            fn(k);
          } catch (...) {
            std::lock_guard lk(err_mu_);
            if (!error_) error_ = std::current_exception();
          }
        }
        ran += take;
        v = s.claim.load(std::memory_order_acquire);
      }
      // Counted once per share: every done_ update moves a cache line between
      // cores. A job is not over before these are counted, so done_ is still
      // the job's whose chunks ran.
      if (ran > 0 && finish(ran)) return;
    }
  }

  // Counts `ran` finished chunks; true when they were the job's last.
  bool finish(int64_t ran) {
    if (done_.fetch_add(ran) + ran != chunks_.load(std::memory_order_relaxed)) return false;
    if (caller_waits_.load()) {
      std::lock_guard lk(mu_);  // the caller may be about to sleep on done_cv_
      done_cv_.notify_one();
    }
    return true;
  }

  void worker_loop(int self, uint64_t seen) {
    t_inside = true;
    for (;;) {
      if (!spin_until([&] { return wake_.load() != seen; })) {
        std::unique_lock lk(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lk, [&] { return wake_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
      seen = wake_.load();
      if (stop_.load()) return;
      work(self);
    }
  }

  // ~20-50 us of pause instructions: covers the gap between the small jobs of
  // one decode step without burning a core while the pool is idle.
  static constexpr int kSpins = 4000;
  std::vector<std::thread> workers_;
  int size_ = 1;
  std::vector<Share> shares_ = std::vector<Share>(1);
  std::mutex mu_, job_mu_, err_mu_;
  std::condition_variable cv_, done_cv_;
  // Each word both threads write gets its own cache line: a spinning worker
  // reading a line the caller claims from would pull it back and forth for
  // every chunk (about 250 ns per move between this VM's cores; it made every
  // node of a small CNN slower at 2 threads than at 1).
  alignas(64) std::atomic<uint64_t> wake_{0};
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<int64_t> chunks_{0};
  std::atomic<const std::function<void(int64_t)>*> job_{nullptr};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_waits_{false}, stop_{false};
  uint64_t job_id_ = 0;  // written only under job_mu_
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

SerialScope::SerialScope() : saved_(t_inside) { t_inside = true; }
SerialScope::~SerialScope() { t_inside = saved_; }

void parallel_tasks(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, fn);
}

}  // namespace rlx
