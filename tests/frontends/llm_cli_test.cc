// The GGUF language-model commands end to end: run --tokens, generate,
// quantize, convert.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rlx/io.h"
#include "support/testing.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

class LlmCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::process_temp_dir("rlx_llm_cli_test");
    std::ofstream(path("tiny.gguf"), std::ios::binary) << model().gguf_bytes();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static const testing::TinyLlm& model() {
    static testing::TinyLlm m;
    return m;
  }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static double max_error(const Tensor& got, const std::vector<int32_t>& tokens) {
    auto want = model().reference_logits(tokens);
    double worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int64_t v = 0; v < model().n_vocab; ++v)
        worst = std::max(worst,
                         std::abs(double(got.data<float>()[t * model().n_vocab + v]) - want[t][v]));
    return worst;
  }
  static inline fs::path dir_;
};

TEST_F(LlmCli, RunWritesLogitsForEveryToken) {
  auto r =
      run_cli("run " + path("tiny.gguf") + " --tokens '1 5 7 9' --out " + path("l.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  Tensor logits = read_safetensors(path("l.safetensors")).at("logits");
  ASSERT_EQ(logits.dims(), (Dims{4, model().n_vocab}));
  EXPECT_LT(max_error(logits, {1, 5, 7, 9}), 2e-4);

  r = run_cli("run " + path("tiny.gguf"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("pass --tokens"), std::string::npos) << r.output;
  r = run_cli("run " + path("tiny.gguf") + " --tokens '1 x'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("'x' is not a token id"), std::string::npos) << r.output;
  r = run_cli("run " + path("tiny.gguf") + " --tokens '1 50'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("outside the vocabulary"), std::string::npos) << r.output;
  // The pass flags reach GGUF models too: the same logits with no passes.
  r = run_cli("run " + path("tiny.gguf") + " --tokens '1 5 7 9' -O0 --print-after-all --out " +
              path("l0.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("after fold"), std::string::npos) << r.output;
  EXPECT_LT(max_error(read_safetensors(path("l0.safetensors")).at("logits"), {1, 5, 7, 9}), 2e-4);
  r = run_cli("run " + path("tiny.gguf") + " --tokens '1 5' --print-after-all --disable-pass cse");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("after fold: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("after cse: "), std::string::npos) << r.output;
  r = run_cli("run " + path("tiny.gguf") + " --tokens '1 5' --disable-pass nope");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown pass 'nope'"), std::string::npos) << r.output;
}

TEST_F(LlmCli, GenerateStreamsAndReportsSpeed) {
  auto r = run_cli("generate " + path("tiny.gguf") + " -p 'ab ba' -n 6 --temp 0 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("prompt: 5 tokens"), std::string::npos) << r.output;  // <s> ▁a b ▁b a
  EXPECT_NE(r.output.find("decode: 6 tokens"), std::string::npos) << r.output;
  // Greedy decoding is deterministic; seeded sampling too.
  EXPECT_EQ(r.output.substr(0, r.output.find("prompt:")),
            run_cli("generate " + path("tiny.gguf") + " -p 'ab ba' -n 6 --temp 0 --ignore-eos")
                .output.substr(0, r.output.find("prompt:")));
  r = run_cli("generate " + path("tiny.gguf") + " --tokens '1 5' -p 'a' -n 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("exactly one of"), std::string::npos) << r.output;
}

// generate's context is the prompt plus -n: a LongRoPE model takes its long
// factors once that passes the original context, and says which it took.
// -j keeps the reply to a JSON schema (the model has JSON tokens; LlmGenerate.AGrammar* checks
// many replies); a schema with an unsupported keyword fails before the model loads.
TEST_F(LlmCli, GenerateKeepsToAJsonSchema) {
  testing::TinyLlm spec;
  spec.extra_tokens = testing::TinyLlm::json_tokens();
  spec.n_vocab = 50 + int64_t(spec.extra_tokens.size());
  std::ofstream(path("json.gguf"), std::ios::binary) << spec.gguf_bytes();
  std::ofstream(path("schema.json"))
      << R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})";
  auto r = run_cli("generate " + path("json.gguf") +
                   " -p 'ab' -n 100 --temp 0 --json-schema-file " + path("schema.json"));
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t end = r.output.find("\nprompt:");
  const size_t open = r.output.rfind('{', end);
  ASSERT_NE(open, std::string::npos) << r.output;
  const auto reply = nlohmann::json::parse(r.output.substr(open, end - open), nullptr, false);
  EXPECT_TRUE(reply.is_object() && reply.size() == 1 && reply["ok"].is_boolean()) << r.output;
  r = run_cli("generate " + path("json.gguf") + " -p 'ab' -j '{\"not\": {}}'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--json-schema: json schema: 1 problem"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'not' is not supported"), std::string::npos) << r.output;
}

// A GBNF grammar: a list of one to four digits or booleans, written as the grammar says.
TEST_F(LlmCli, GenerateKeepsToAGbnfGrammar) {
  testing::TinyLlm spec;
  spec.extra_tokens = testing::TinyLlm::json_tokens();
  spec.n_vocab = 50 + int64_t(spec.extra_tokens.size());
  std::ofstream(path("gbnf.gguf"), std::ios::binary) << spec.gguf_bytes();
  std::ofstream(path("list.gbnf")) << "root ::= \"[\" item (\",\" item){0,3} \"]\"\n"
                                      "item ::= [0-9] | \"true\" | \"false\"  # one value\n";
  auto r = run_cli("generate " + path("gbnf.gguf") + " -p 'ab' -n 40 --temp 0 --grammar-file " +
                   path("list.gbnf"));
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t end = r.output.find("\nprompt:"), open = r.output.rfind('[', end);
  ASSERT_NE(open, std::string::npos) << r.output;
  const auto reply = nlohmann::json::parse(r.output.substr(open, end - open), nullptr, false);
  ASSERT_TRUE(reply.is_array() && !reply.empty() && reply.size() <= 4) << r.output;
  for (const auto& v : reply) EXPECT_TRUE(v.is_boolean() || (v.is_number() && v.get<int>() < 10));
  r = run_cli("generate " + path("gbnf.gguf") + " -p 'ab' --grammar 'root ::= item'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--grammar: GBNF grammar: undefined rules: item (line 1)"),
            std::string::npos)
      << r.output;
}

TEST_F(LlmCli, GenerateTakesTheRopeFactorsOfItsContext) {
  testing::TinyLlm m;
  m.arch = "phi3";
  m.n_ctx_orig = 8;
  std::ofstream(path("longrope.gguf"), std::ios::binary) << m.gguf_bytes();
  auto r = run_cli("generate " + path("longrope.gguf") + " --tokens '1 5' -n 2 --temp 0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rope: the short factors for a context of 4 (original 8)"),
            std::string::npos)
      << r.output;
  r = run_cli("generate " + path("longrope.gguf") + " --tokens '1 5' -n 7 --temp 0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rope: the long factors for a context of 9 (original 8)"),
            std::string::npos)
      << r.output;
  r = run_cli("generate " + path("tiny.gguf") + " --tokens '1 5' -n 2 --temp 0");
  EXPECT_EQ(r.output.find("rope: the"), std::string::npos) << r.output;
}

TEST_F(LlmCli, ChatRepliesResetsAndReusesTheConversationsCache) {
  const std::string chat =
      std::string(RLX_CLI_PATH) + " chat " + path("tiny.gguf") + " --temp 0 -n 4 -v -s 'ba'";
  auto r = testing::run_command("printf 'ab\\n/reset\\nab\\nba ab\\n/exit\\nignored\\n' | " + chat);
  ASSERT_EQ(r.status, 0) << r.output;
  // The same message after /reset gets the same greedy reply, from scratch;
  // the next turn feeds only what the cache does not hold.
  size_t first = r.output.find("[prompt "), second = r.output.find("[prompt ", first + 1),
         third = r.output.find("[prompt ", second + 1);
  ASSERT_NE(third, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[prompt ", third + 1), std::string::npos) << "/exit did not stop it";
  // The line up to its speed.
  auto line = [&](size_t at) { return r.output.substr(at, r.output.find("length", at) - at); };
  EXPECT_NE(line(first).find(" 0 cached; reply 4 tokens, "), std::string::npos) << line(first);
  EXPECT_EQ(line(first), line(second));
  EXPECT_NE(r.output.find("(the conversation starts over)"), std::string::npos) << r.output;
  EXPECT_EQ(line(third).find(" 0 cached"), std::string::npos) << line(third);
  r = run_cli("chat " + path("tiny.gguf") + " --chat-template " + path("missing.jinja"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("missing.jinja: cannot open the chat template"), std::string::npos)
      << r.output;
}

TEST_F(LlmCli, BenchLlmPrintsLlamaBenchRows) {
  auto r = run_cli("bench-llm " + path("tiny.gguf") + " -p 16 -n 4 -d 8 -r 2 -t 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("| model | size | params | threads | test | t/s |"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("| 1 | pp16 @ d8 | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| 1 | tg4 @ d8 | "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" ± "), std::string::npos) << r.output;
  // Three sequences decoded as one batch, as rlx serve --parallel 3 steps them.
  r = run_cli("bench-llm " + path("tiny.gguf") + " -p 0 -n 4 -d 8 -r 1 -t 1 --parallel 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("| 1 | tg4 x3 @ d8 | "), std::string::npos) << r.output;
  r = run_cli("bench-llm " + path("tiny.gguf") + " -p 8 -n 0 -r 1 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\"prefill_tok_s\": "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("decode_tok_s"), std::string::npos) << r.output;
  r = run_cli("bench-llm " + path("tiny.gguf") + " -p 0 -n 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("nothing to time"), std::string::npos) << r.output;
}

TEST_F(LlmCli, QuantizeThenRunStaysClose) {
  auto r = run_cli("quantize " + path("tiny.gguf") + " " + path("q8.gguf") + " --type Q8_0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("to q8_0"), std::string::npos) << r.output;
  r = run_cli("run " + path("q8.gguf") + " --tokens '1 5 7 9' --out " + path("q.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  // Q8_0 weights and Q8_0-quantized activations each add ~0.5% relative
  // error per dot product; after 2 layers logits in [-3, 3] move by < 0.1
  // (0.065 seen). The kernels themselves are checked in dequant_matmul_test.
  EXPECT_LT(max_error(read_safetensors(path("q.safetensors")).at("logits"), {1, 5, 7, 9}), 0.1);
  r = run_cli("quantize " + path("tiny.gguf") + " " + path("bad.gguf") + " --type q9_9");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown ggml type name 'q9_9'"), std::string::npos) << r.output;
}

TEST_F(LlmCli, ConvertWritesTorchOrderF32) {
  auto r = run_cli("quantize " + path("tiny.gguf") + " " + path("q4.gguf") + " --type q4_0");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_cli("convert " + path("q4.gguf") + " -o " + path("w.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  TensorMap w = read_safetensors(path("w.safetensors"));
  ASSERT_TRUE(w.count("blk.0.attn_k.weight"));
  EXPECT_EQ(w.at("blk.0.attn_k.weight").dims(),
            (Dims{model().n_head_kv * model().head_dim, model().n_embd}));
  EXPECT_EQ(w.at("token_embd.weight").dtype(), DType::F32);
}

}  // namespace
}  // namespace rlx
