// Slots, the waiting queue and the scheduler thread behind `rlx serve`
// (llm_scheduler.h).
#include "rlx/llm_scheduler.h"

#include <algorithm>

#include "rlx/error.h"

namespace rlx::llm {

bool Ticket::push(std::string_view text) {
  {
    std::lock_guard lock(m_);
    pending_ += text;
  }
  cv_.notify_all();
  return !cancelled_;
}

void Ticket::close(GenerateResult r, std::string error) {
  {
    std::lock_guard lock(m_);
    result_ = std::move(r);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

bool Ticket::next(std::string& text, std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
  text = std::exchange(pending_, {});
  return !(done_ && text.empty());
}

void Ticket::wait() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return done_; });
}

Scheduler::Scheduler(const ChatModel& model, int n_slots, size_t max_waiting)
    : model_(model), max_waiting_(max_waiting) {
  RLX_CHECK(n_slots >= 1, "serve: the number of slots must be at least 1, got ", n_slots);
  slots_.resize(size_t(n_slots));
  for (Slot& s : slots_) s.session = std::make_unique<Session>(model.exe, model.config);
  if (model.batch_exe && n_slots > 1)
    batch_ = std::make_unique<BatchDecoder>(model.batch_exe, model.config);
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

std::shared_ptr<Ticket> Scheduler::submit(GenerateRequest r) {
  auto ticket = std::make_shared<Ticket>();
  {
    std::lock_guard lock(m_);
    if (stopping_ || in_flight_ >= slots_.size() + max_waiting_) return nullptr;
    ++in_flight_;
    waiting_.push_back(Job{std::move(r), ticket});
  }
  cv_.notify_all();
  return ticket;
}

void Scheduler::stop() {
  {
    std::lock_guard lock(m_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Scheduler::Slot* Scheduler::slot_for(const std::vector<int32_t>& prompt) {
  Slot* best = nullptr;
  size_t best_common = 0;
  for (Slot& s : slots_) {
    if (s.job) continue;
    const size_t common = shared_prefix(s.session->tokens(), prompt);
    if (!best || common > best_common) best = &s, best_common = common;
  }
  return best;
}

void Scheduler::start(Slot& slot, Job job) {
  slot.job = std::move(job);
  try {
    slot.generation.emplace(*slot.session, model_.tokenizer, slot.job->request);
  } catch (const std::exception& e) {
    slot.session->reset();
    std::shared_ptr<Ticket> t = std::move(slot.job->ticket);
    slot.job.reset();
    release();
    t->close({}, e.what());
  }
}

void Scheduler::step(Slot& slot, std::vector<float>* fed_logits) {
  Ticket& t = *slot.job->ticket;  // held by slot.job until the end
  bool more = false;
  std::string error;
  try {
    if (t.cancelled())
      slot.generation->cancel();
    else {
      const TextSink sink = [&t](std::string_view s) { return t.push(s); };
      more = fed_logits ? slot.generation->step(sink, std::move(*fed_logits))
                        : slot.generation->step(sink);
    }
  } catch (const std::exception& e) {
    error = e.what();
    slot.session->reset();
  }
  if (more) return;
  GenerateResult r = error.empty() ? slot.generation->result() : GenerateResult{};
  slot.generation.reset();
  std::shared_ptr<Ticket> ticket = std::move(slot.job->ticket);
  slot.job.reset();
  release();  // before close: whoever waits on the ticket may submit again at once
  ticket->close(std::move(r), std::move(error));
}

void Scheduler::release() {
  std::lock_guard lock(m_);
  --in_flight_;
}

size_t Scheduler::in_flight() const {
  std::lock_guard lock(m_);
  return in_flight_;
}

void Scheduler::run() {
  for (;;) {
    std::vector<Job> starting;
    bool stopping = false;
    {
      std::unique_lock lock(m_);
      const auto busy = [&] {
        return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return bool(s.job); });
      };
      cv_.wait(lock, [&] { return stopping_ || !waiting_.empty() || busy(); });
      stopping = stopping_;
      if (stopping) {
        for (Job& j : waiting_) j.ticket->cancel(), starting.push_back(std::move(j));
        waiting_.clear();
      } else {
        size_t free = size_t(
            std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.job; }));
        while (free-- > 0 && !waiting_.empty()) {
          starting.push_back(std::move(waiting_.front()));
          waiting_.pop_front();
        }
      }
    }
    if (stopping) {
      for (Job& j : starting) {
        GenerateResult r;
        r.finish = Finish::Cancelled;
        j.ticket->close(std::move(r), "");
      }
      for (Slot& s : slots_)
        if (s.job) s.job->ticket->cancel(), step(s, nullptr);
      std::lock_guard lock(m_);
      in_flight_ = 0;
      return;
    }
    for (Job& j : starting) {
      // The slot first: as one call's arguments, the job could be moved into
      // start's parameter before slot_for read its prompt (the order is
      // unspecified), and every request went to the first free slot.
      Slot& slot = *slot_for(j.request.prompt);
      start(slot, std::move(j));
    }
    step_all();
  }
}

void Scheduler::step_all() {
  // The slots whose next step feeds a token feed them in one batched step.
  std::vector<Slot*> batch;
  if (batch_)
    for (Slot& s : slots_)
      if (s.job && !s.job->ticket->cancelled() && s.generation->pending_feed() >= 0)
        batch.push_back(&s);
  std::vector<std::vector<float>> logits;
  if (batch.size() >= 2) {
    std::vector<Session*> sessions;
    std::vector<int32_t> tokens;
    for (Slot* s : batch) {
      sessions.push_back(s->session.get());
      tokens.push_back(s->generation->pending_feed());
    }
    try {
      logits = batch_->feed(sessions, tokens);
    } catch (const std::exception&) {
      logits.clear();  // the sessions are as they were: each slot feeds alone below
    }
  }
  if (logits.empty()) batch.clear();
  size_t next = 0;
  for (Slot& s : slots_) {
    if (!s.job) continue;
    const bool fed = next < batch.size() && batch[next] == &s;
    step(s, fed ? &logits[next++] : nullptr);
  }
}

}  // namespace rlx::llm
