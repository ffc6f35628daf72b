// The serving scheduler: requests served together give exactly what each
// gives alone, a full queue refuses, cancelling ends a request at its next
// token and frees its slot, and a bad prompt fails only its own request.
#include <gtest/gtest.h>

#include <fstream>

#include "rlx/llm_scheduler.h"
#include "support/greedy_request.h"
#include "support/testing.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

using namespace std::chrono_literals;

const llm::ChatModel& tiny_model() {
  static const llm::ChatModel m = [] {
    const auto path = testing::process_temp_dir("rlx_llm_scheduler_test") / "tiny.gguf";
    std::ofstream(path, std::ios::binary) << testing::TinyLlm{}.gguf_bytes();
    // With the batched graph: slots decoding together feed one batch.
    return llm::ChatModel::load(path.string(), llm::Weights::F32, "", true);
  }();
  return m;
}

using testing::greedy_request;

TEST(LlmScheduler, RequestsServedTogetherGiveWhatEachGivesAlone) {
  const llm::ChatModel& m = tiny_model();
  const std::vector<std::vector<int32_t>> prompts{
      {1, 5, 7, 9}, {1, 5, 7, 20}, {1, 30}, {1, 9, 9, 9, 9, 4}, {1, 5}};
  std::vector<llm::GenerateResult> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    llm::Session fresh(m.exe, m.config);
    alone.push_back(llm::generate(fresh, m.tokenizer, greedy_request(prompts[i], 6 + int64_t(i))));
  }
  llm::Scheduler s(m, 2, 8);
  std::vector<std::shared_ptr<llm::Ticket>> tickets;
  for (size_t i = 0; i < prompts.size(); ++i) {
    tickets.push_back(s.submit(greedy_request(prompts[i], 6 + int64_t(i))));
    ASSERT_NE(tickets.back(), nullptr);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string streamed, piece;
    while (tickets[i]->next(piece, 1000ms)) streamed += piece;
    const llm::GenerateResult& r = tickets[i]->result();
    EXPECT_EQ(tickets[i]->error(), "");
    EXPECT_EQ(r.tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(r.text, alone[i].text);
    EXPECT_EQ(streamed, r.text);
    EXPECT_EQ(r.finish, llm::Finish::Length);
  }
  // A prompt that extends the last conversation of one slot goes to that slot
  // and reuses its cache: {1, 5} and 4 of its completion's tokens.
  std::vector<int32_t> extended{1, 5};
  extended.insert(extended.end(), alone[4].tokens.begin(), alone[4].tokens.begin() + 4);
  extended.push_back(12);
  auto again = s.submit(greedy_request(extended, 2));
  again->wait();
  EXPECT_EQ(again->result().cached_tokens, 6);
  EXPECT_EQ(s.in_flight(), 0u);
}

TEST(LlmScheduler, AFullQueueRefusesAndCancellingFreesTheSlot) {
  const llm::ChatModel& m = tiny_model();
  llm::Scheduler s(m, 1, 0);
  // Long enough that it is still running when the next one comes.
  auto running = s.submit(greedy_request({1, 5, 7}, 3000));
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(s.submit(greedy_request({1, 5}, 2)), nullptr);
  std::string piece;
  ASSERT_TRUE(running->next(piece, 5000ms));
  running->cancel();
  running->wait();
  EXPECT_EQ(running->result().finish, llm::Finish::Cancelled);
  EXPECT_LT(running->result().tokens.size(), 3000u);
  auto next = s.submit(greedy_request({1, 5}, 2));
  ASSERT_NE(next, nullptr);
  next->wait();
  EXPECT_EQ(next->result().tokens.size(), 2u);
}

TEST(LlmScheduler, ABadPromptFailsOnlyItsRequest) {
  const llm::ChatModel& m = tiny_model();
  llm::Scheduler s(m, 2, 4);
  auto bad = s.submit(greedy_request({1, 999}, 2));
  auto good = s.submit(greedy_request({1, 5}, 3));
  bad->wait();
  good->wait();
  EXPECT_NE(bad->error().find("999"), std::string::npos) << bad->error();
  EXPECT_EQ(good->error(), "");
  EXPECT_EQ(good->result().tokens.size(), 3u);
  // Stopping with requests in flight ends them as cancelled.
  auto left = s.submit(greedy_request({1, 5}, 3000));
  s.stop();
  left->wait();
  EXPECT_EQ(left->result().finish, llm::Finish::Cancelled);
  EXPECT_EQ(s.submit(greedy_request({1, 5}, 2)), nullptr);
}

}  // namespace
}  // namespace rlx
