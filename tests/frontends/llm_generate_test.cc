// The generation loop shared by generate/chat/serve: stop strings held back
// across pieces, cache truncation and prompt-prefix reuse against a fresh
// session, and the token budget and context limit.
#include <gtest/gtest.h>

#include "rlx/llm_generate.h"
#include "support/greedy_request.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

TEST(StopStrings, HoldsBackAPossibleStartAndCutsAtTheMatch) {
  llm::StopStrings s({"</end>", "", "XY"});
  EXPECT_EQ(s.push("hello <"), "hello ");  // "<" may begin "</end>"
  EXPECT_EQ(s.push("/e"), "");
  EXPECT_EQ(s.push("x"), "</ex");  // no longer a prefix: released
  EXPECT_EQ(s.push("ab</en"), "ab");
  EXPECT_EQ(s.push("d> tail"), "");  // matched: the stop string and the rest go
  EXPECT_TRUE(s.matched());
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.finish(), "");

  llm::StopStrings t({"XY"});
  EXPECT_EQ(t.push("aX"), "a");
  EXPECT_EQ(t.finish(), "X");  // the end of the stream releases what is held
  EXPECT_FALSE(t.matched());
  llm::StopStrings none({});
  EXPECT_EQ(none.push("anything"), "anything");
}

struct TinyModel {
  std::string bytes = testing::TinyLlm{}.gguf_bytes();
  gguf::File file = gguf::read_bytes(bytes.data(), bytes.size(), "tiny.gguf");
  llm::Config config = llm::Config::from_gguf(file);
  Tokenizer tok = Tokenizer::from_gguf(file);
  std::shared_ptr<const Executable> exe = [&] {
    Model m = llm::build_model(file, config, {}, llm::Weights::F32);
    return Executable::compile(std::move(m.graph), m.weights);
  }();
};

using testing::greedy_request;

TEST(LlmGenerate, ReusedPrefixGivesTheSameTokensAsAFreshSession) {
  TinyModel m;
  const std::vector<int32_t> a{1, 5, 7, 9, 11, 3}, b{1, 5, 7, 20, 21};
  llm::Session fresh(m.exe, m.config), reused(m.exe, m.config);
  // The reused session has seen `a` and its completion; `b` parts at index 3.
  llm::GenerateResult first = llm::generate(reused, m.tok, greedy_request(a, 4));
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_EQ(reused.n_past(), int64_t(a.size() + 3));  // the last sampled token is not fed
  llm::GenerateResult want = llm::generate(fresh, m.tok, greedy_request(b, 6));
  llm::GenerateResult got = llm::generate(reused, m.tok, greedy_request(b, 6));
  EXPECT_EQ(got.cached_tokens, 3);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  // The same prompt again: everything but its last token comes from the cache.
  got = llm::generate(reused, m.tok, greedy_request(b, 6));
  EXPECT_EQ(got.cached_tokens, int64_t(b.size() - 1));
  EXPECT_EQ(got.tokens, want.tokens);

  EXPECT_THROW(reused.truncate(reused.n_past() + 1), Error);
  reused.truncate(2);
  EXPECT_EQ(reused.tokens(), (std::vector<int32_t>{1, 5}));
}

TEST(LlmGenerate, StopsAtTheBudgetTheContextAndACancellingSink) {
  TinyModel m;
  llm::Session s(m.exe, m.config);
  llm::GenerateResult r = llm::generate(s, m.tok, greedy_request({1, 5, 7}, 5));
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(r.finish, llm::Finish::Length);
  EXPECT_EQ(r.prompt_tokens, 3);

  llm::GenerateRequest ctx = greedy_request({1, 5, 7}, 100);
  ctx.n_ctx = 6;  // room for 3 completion tokens at positions 3, 4, 5
  r = llm::generate(s, m.tok, ctx);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.finish, llm::Finish::Length);
  ctx.prompt = {1, 2, 3, 4, 5, 6};
  EXPECT_THROW(llm::generate(s, m.tok, ctx), Error);
  EXPECT_THROW(llm::generate(s, m.tok, greedy_request({}, 1)), Error);

  int pieces = 0;
  r = llm::generate(s, m.tok, greedy_request({1, 5, 7}, 50),
                    [&](std::string_view) { return ++pieces < 2; });
  EXPECT_EQ(r.finish, llm::Finish::Cancelled);
  EXPECT_EQ(pieces, 2);
  EXPECT_LT(r.tokens.size(), 50u);
}

}  // namespace
}  // namespace rlx
