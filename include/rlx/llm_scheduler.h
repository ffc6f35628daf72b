// Serving several completions at once from one model (`rlx serve`): requests
// queue for a fixed set of slots, each slot a Session with its own KV cache,
// and one scheduler thread steps every active slot a token in turn, so a long
// reply does not hold back a short one (continuous scheduling). A new request
// takes the free slot whose cache shares the longest prefix with its prompt.
//
// With the model's batched graph (ChatModel::batch_exe), the slots that
// decode in the same round feed their tokens as one batch (BatchDecoder), so
// every weight is read once per round instead of once per slot.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rlx/llm_generate.h"

namespace rlx::llm {

// One submitted request as its submitter sees it. Text arrives from the
// scheduler thread; any thread may wait on it or cancel it.
class Ticket {
 public:
  // Waits up to `timeout` for text or the end. Moves the text that came so far
  // into `text`; returns false once the request is over and nothing is left.
  bool next(std::string& text, std::chrono::milliseconds timeout);
  // Blocks until the request is over.
  void wait();
  // Stops the generation at its next token (a client went away).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Valid once over: the result, or the error that ended the request.
  const GenerateResult& result() const { return result_; }
  const std::string& error() const { return error_; }

 private:
  friend class Scheduler;
  bool push(std::string_view text);  // the scheduler's TextSink
  void close(GenerateResult r, std::string error);

  std::mutex m_;
  std::condition_variable cv_;
  std::string pending_;
  bool done_ = false;
  std::atomic<bool> cancelled_{false};
  GenerateResult result_;
  std::string error_;
};

class Scheduler {
 public:
  // n_slots sessions over the model's executable; at most max_waiting
  // requests wait for a slot beyond those being served.
  Scheduler(const ChatModel& model, int n_slots, size_t max_waiting);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; nullptr when every slot is busy and the queue is full.
  std::shared_ptr<Ticket> submit(GenerateRequest r);
  // Cancels everything in flight and joins the scheduler thread.
  void stop();
  int n_slots() const { return int(slots_.size()); }
  // Requests waiting or being served.
  size_t in_flight() const;

 private:
  struct Job {
    GenerateRequest request;
    std::shared_ptr<Ticket> ticket;
  };
  struct Slot {
    std::unique_ptr<Session> session;
    std::optional<Job> job;
    std::optional<Generation> generation;
  };
  void run();
  void start(Slot& slot, Job job);
  void step_all();
  // fed_logits: the slot's pending token was fed in a batch, with these logits.
  void step(Slot& slot, std::vector<float>* fed_logits);
  Slot* slot_for(const std::vector<int32_t>& prompt);
  void release();

  const ChatModel& model_;
  std::vector<Slot> slots_;
  std::unique_ptr<BatchDecoder> batch_;  // null: slots decode one after another
  size_t max_waiting_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<Job> waiting_;
  size_t in_flight_ = 0;  // waiting or in a slot
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rlx::llm
