// GGUF llama-family models: the IR built from metadata against an
// independent scalar forward pass, and KV-cache decode against prefill.
#include <gtest/gtest.h>

#include <cmath>

#include "rlx/llm.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

using testing::TinyLlm;

struct Loaded {
  std::string bytes;
  gguf::File file;
  llm::Config config;
};

Loaded load(const TinyLlm& m) {
  Loaded l;
  l.bytes = m.gguf_bytes();
  l.file = gguf::read_bytes(l.bytes.data(), l.bytes.size(), "tiny-" + m.arch + ".gguf");
  l.config = llm::Config::from_gguf(l.file);
  return l;
}

Tensor all_logits(const Loaded& l, const std::vector<int32_t>& tokens, llm::Weights w) {
  Model m = llm::build_model(l.file, l.config, {.kv_cache = false, .all_logits = true}, w);
  Session s(Executable::compile(std::move(m.graph), m.weights));
  return s.run(llm::token_inputs(tokens, 0, l.config.n_vocab)).at("logits");
}

const std::vector<int32_t> kTokens{3, 17, 42, 0, 8, 8, 31, 49, 5};

class LlmArch : public ::testing::TestWithParam<TinyLlm> {};

TEST_P(LlmArch, PrefillMatchesScalarReference) {
  const TinyLlm& m = GetParam();
  Loaded l = load(m);
  Tensor got = all_logits(l, kTokens, llm::Weights::F32);
  auto want = m.reference_logits(kTokens);
  ASSERT_EQ(got.dims(), (Dims{int64_t(kTokens.size()), m.n_vocab}));
  // f32 kernels vs a double reference over 2 layers: errors ~1e-6 relative to
  // logits of magnitude ~1-10.
  double worst = 0;
  for (size_t t = 0; t < kTokens.size(); ++t)
    for (int64_t v = 0; v < m.n_vocab; ++v)
      worst = std::max(worst, std::abs(double(got.data<float>()[t * m.n_vocab + v]) - want[t][v]));
  EXPECT_LT(worst, 2e-4) << l.config.summary();
}

TEST_P(LlmArch, DecodeWithCacheMatchesPrefill) {
  const TinyLlm& m = GetParam();
  Loaded l = load(m);
  Tensor full = all_logits(l, kTokens, llm::Weights::F32);
  Model model = llm::build_model(l.file, l.config, {}, llm::Weights::F32);
  llm::Session s(Executable::compile(std::move(model.graph), model.weights), l.config);
  // Prefill 4 tokens, then the rest one at a time.
  std::vector<std::vector<float>> got;
  got.push_back(s.feed(std::span(kTokens).first(4)));
  for (size_t i = 4; i < kTokens.size(); ++i)
    got.push_back(s.feed(std::span(kTokens).subspan(i, 1)));
  EXPECT_EQ(s.n_past(), int64_t(kTokens.size()));
  for (size_t step = 0; step < got.size(); ++step) {
    const size_t t = step + 3;
    for (int64_t v = 0; v < m.n_vocab; ++v)
      ASSERT_NEAR(got[step][size_t(v)], full.data<float>()[t * m.n_vocab + v], 2e-4)
          << "position " << t << " vocab " << v;
  }
  s.reset();
  EXPECT_EQ(s.n_past(), 0);
  std::vector<float> again = s.feed(std::span(kTokens).first(4));
  EXPECT_EQ(again, got[0]);
}

TinyLlm arch(std::string a, bool tied = false, bool freqs = false) {
  TinyLlm m;
  m.arch = std::move(a);
  m.tied = tied;
  m.rope_freqs = freqs;
  return m;
}

INSTANTIATE_TEST_SUITE_P(Archs, LlmArch,
                         ::testing::Values(arch("llama"), arch("llama", true, true), arch("qwen2"),
                                           arch("qwen3", true)),
                         [](const auto& info) {
                           return info.param.arch + (info.param.tied ? "_tied" : "") +
                                  (info.param.rope_freqs ? "_freqs" : "");
                         });

TEST(LlmConfig, RejectsUnsupportedArchAndMissingTensors) {
  TinyLlm m;
  m.arch = "gpt2";
  std::string bytes = m.gguf_bytes();
  gguf::File f = gguf::read_bytes(bytes.data(), bytes.size(), "x.gguf");
  try {
    llm::Config::from_gguf(f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'gpt2' is not supported"), std::string::npos) << e.what();
  }
  TinyLlm ok;
  bytes = ok.gguf_bytes();
  f = gguf::read_bytes(bytes.data(), bytes.size(), "y.gguf");
  std::erase_if(f.tensors,
                [](const gguf::TensorInfo& t) { return t.name == "blk.1.ffn_up.weight"; });
  try {
    llm::Config::from_gguf(f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.1.ffn_up.weight' is missing"), std::string::npos)
        << e.what();
  }
}

TEST(LlmSampler, GreedyTopKAndSeededDraws) {
  std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  llm::Sampler greedy({.temperature = 0});
  EXPECT_EQ(greedy.sample(logits, {}), 1);
  // Repetition penalty pushes the repeated best below the runner-up.
  llm::Sampler rep({.temperature = 0, .repeat_penalty = 1.5f});
  std::vector<int32_t> hist{1};
  EXPECT_EQ(rep.sample(logits, hist), 3);
  // top-k 2: only ids 1 and 3 are ever drawn; same seed, same sequence.
  llm::Sampler a({.temperature = 1, .top_k = 2, .top_p = 1, .seed = 7}),
      b({.temperature = 1, .top_k = 2, .top_p = 1, .seed = 7});
  int counts[5] = {};
  for (int i = 0; i < 2000; ++i) {
    int32_t x = a.sample(logits, {});
    EXPECT_EQ(x, b.sample(logits, {}));
    counts[x]++;
  }
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  // p(1) = 1 / (1 + e^-0.1) = 0.525: 2000 draws land within +-5 sigma.
  EXPECT_NEAR(counts[1] / 2000.0, 0.525, 0.06);
  // p(1) = 0.45 at temperature 1: top-p 0.4 keeps only the best.
  llm::Sampler p({.temperature = 1, .top_k = 0, .top_p = 0.4f, .seed = 1});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.sample(logits, {}), 1);
}

}  // namespace
}  // namespace rlx
