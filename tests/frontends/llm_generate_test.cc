// The generation loop shared by generate/chat/serve: stop strings held back
// across pieces, cache truncation and prompt-prefix reuse against a fresh
// session, and the token budget and context limit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
  explicit TinyModel(testing::TinyLlm spec = {}) : bytes(spec.gguf_bytes()) {}
  std::string bytes;
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

// A vocabulary that can spell JSON, so a grammar has tokens to choose from.
testing::TinyLlm json_llm() {
  testing::TinyLlm spec;
  spec.extra_tokens = testing::TinyLlm::json_tokens();
  spec.n_vocab = 50 + int64_t(spec.extra_tokens.size());
  return spec;
}

// Every document of this schema is at most a few hundred bytes, so a constrained reply must
// end (with the end token) long before its budget.
const char* kBoundedSchema = R"({"type": "object", "properties": {
  "id": {"type": "integer", "minimum": 0},
  "ok": {"type": "boolean"},
  "tag": {"enum": ["red", "blue"]},
  "name": {"type": "string", "maxLength": 6},
  "list": {"type": "array", "items": {"type": "null"}, "maxItems": 3}},
  "required": ["id", "tag", "name"]})";

// The reply parsed and checked against kBoundedSchema by hand; "" when it holds.
std::string bounded_schema_problem(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object";
  if (!j.contains("id") || !j["id"].is_number_unsigned()) return "id";
  if (j.value("tag", "") != "red" && j.value("tag", "") != "blue") return "tag";
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().size() > 6)
    return "name";
  if (j.contains("ok") && !j["ok"].is_boolean()) return "ok";
  if (j.contains("list") && (!j["list"].is_array() || j["list"].size() > 3)) return "list";
  for (const auto& [k, v] : j.items())
    if (k != "id" && k != "ok" && k != "tag" && k != "name" && k != "list") return "key " + k;
  return "";
}

TEST(LlmGenerate, AGrammarKeepsEveryReplyToItsSchema) {
  TinyModel m(json_llm());
  const auto grammar = llm::Grammar::from_json_schema(kBoundedSchema);
  llm::Session s(m.exe, m.config);
  // Free, the random model writes no JSON: what the grammar changes is visible.
  llm::GenerateRequest r = greedy_request({1, 5, 7}, 400);
  r.ignore_eos = false;
  EXPECT_NE(bounded_schema_problem(llm::generate(s, m.tok, r).text), "");
  r.grammar = grammar;
  for (float temp : {0.0f, 0.7f, 1.5f})
    for (int top_k : {0, 40})
      for (uint64_t seed = 0; seed < (temp > 0 ? 6u : 1u); ++seed) {
        r.sampling.temperature = temp;
        r.sampling.top_k = top_k;
        r.sampling.seed = seed;
        const llm::GenerateResult got = llm::generate(s, m.tok, r);
        SCOPED_TRACE("temp " + std::to_string(temp) + " top_k " + std::to_string(top_k) + " seed " +
                     std::to_string(seed) + ": " + got.text);
        EXPECT_EQ(got.finish, llm::Finish::Stop);
        EXPECT_LT(got.tokens.size(), 400u);
        EXPECT_EQ(bounded_schema_problem(got.text), "");
      }
  // A reply that starts in the prompt: the grammar takes it first, the model writes the rest.
  r.sampling.temperature = 0;
  r.grammar_prefix = "{\"id\": 12";
  const llm::GenerateResult cont = llm::generate(s, m.tok, r);
  EXPECT_EQ(bounded_schema_problem(r.grammar_prefix + cont.text), "") << cont.text;
  r.grammar_prefix = "[";
  EXPECT_THROW(llm::generate(s, m.tok, r), Error);
}

// With a trigger the reply is free until the trigger appears; from there it keeps to the
// grammar. Sampled hot, some replies write "<tool_call>" on their own; each of those goes on
// as a whole, valid call.
TEST(LlmGenerate, AGrammarWithATriggerHoldsFromTheTriggerOn) {
  TinyModel m(json_llm());
  llm::Session s(m.exe, m.config);
  llm::GenerateRequest r = greedy_request({1, 5, 7}, 200);
  r.ignore_eos = false;
  r.grammar = llm::Grammar::tool_calls(
      llm::ToolCallFormat::hermes,
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"a": {"type": "boolean"}}, "required": ["a"]}}}])");
  r.grammar_trigger = "<tool_call>";
  r.sampling.temperature = 2.0f;
  r.sampling.top_k = 0;
  int triggered = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    r.sampling.seed = seed;
    const llm::GenerateResult got = llm::generate(s, m.tok, r);
    const size_t at = got.text.find("<tool_call>");
    if (at == std::string::npos) continue;
    ++triggered;
    const llm::ToolCallReply calls = llm::parse_tool_calls(got.text.substr(at));
    EXPECT_EQ(got.finish, llm::Finish::Stop) << got.text;
    ASSERT_FALSE(calls.calls.empty()) << got.text;
    for (const auto& c : calls.calls) {
      EXPECT_EQ(c.name, "f");
      EXPECT_TRUE(nlohmann::json::parse(c.arguments)["a"].is_boolean()) << c.arguments;
    }
  }
  EXPECT_GT(triggered, 0);
}

}  // namespace
}  // namespace rlx
