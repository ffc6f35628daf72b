// GGUF llama-family models: the IR built from metadata against an
// independent scalar forward pass, and KV-cache decode against prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "rlx/llm.h"
#include "support/testing.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

using testing::TinyLlm;

struct Loaded {
  std::string bytes;
  gguf::File file;
  llm::Config config;
  int64_t n_ctx = 0;  // GraphOptions::n_ctx
};

Loaded load(const TinyLlm& m) {
  Loaded l;
  l.bytes = m.gguf_bytes();
  l.file = gguf::read_bytes(l.bytes.data(), l.bytes.size(), "tiny-" + m.arch + ".gguf");
  l.config = llm::Config::from_gguf(l.file);
  l.n_ctx = m.n_ctx;
  return l;
}

Tensor all_logits(const Loaded& l, const std::vector<int32_t>& tokens, llm::Weights w) {
  Model m = llm::build_model(l.file, l.config,
                             {.kv_cache = false, .all_logits = true, .n_ctx = l.n_ctx}, w);
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

// Prefill 4 tokens, then the rest one at a time, against one pass over all of
// them without a cache; returns the largest logit difference.
double decode_against_prefill(const TinyLlm& m, DType kv, double tolerance) {
  Loaded l = load(m);
  Tensor full = all_logits(l, kTokens, llm::Weights::F32);
  Model model =
      llm::build_model(l.file, l.config, {.kv_dtype = kv, .n_ctx = l.n_ctx}, llm::Weights::F32);
  llm::Session s(Executable::compile(std::move(model.graph), model.weights), l.config);
  std::vector<std::vector<float>> got;
  got.push_back(s.feed(std::span(kTokens).first(4)));
  for (size_t i = 4; i < kTokens.size(); ++i)
    got.push_back(s.feed(std::span(kTokens).subspan(i, 1)));
  EXPECT_EQ(s.n_past(), int64_t(kTokens.size()));
  double worst = 0;
  for (size_t step = 0; step < got.size(); ++step) {
    const size_t t = step + 3;
    for (int64_t v = 0; v < m.n_vocab; ++v) {
      const double d = std::abs(got[step][size_t(v)] - full.data<float>()[t * m.n_vocab + v]);
      worst = std::max(worst, d);
      EXPECT_LE(d, tolerance) << "position " << t << " vocab " << v;
      if (d > tolerance) return worst;
    }
  }
  s.reset();
  EXPECT_EQ(s.n_past(), 0);
  std::vector<float> again = s.feed(std::span(kTokens).first(4));
  EXPECT_EQ(again, got[0]);
  return worst;
}

TEST_P(LlmArch, DecodeWithCacheMatchesPrefill) {
  decode_against_prefill(GetParam(), DType::F32, 2e-4);
}

// An f16 cache rounds every key and value once (relative 2^-11): on these
// models the logits moved by 6e-4 to 5.1e-3 (qwen3's q/k norms the most).
TEST_P(LlmArch, DecodeWithF16CacheStaysClose) {
  const double worst = decode_against_prefill(GetParam(), DType::F16, 1e-2);
  EXPECT_GT(worst, 0);  // the cache really is f16
}

TinyLlm arch(std::string a, bool tied = false, bool freqs = false) {
  TinyLlm m;
  m.arch = std::move(a);
  m.tied = tied;
  m.rope_freqs = freqs;
  return m;
}

// gemma2: a window of 4 keys on layer 0 (pattern 2) over 9 tokens, so the
// mask cuts; caps small enough that tanh bends the scores and logits.
TinyLlm gemma2() {
  TinyLlm m = arch("gemma2");
  m.n_swa = 4;
  m.swa_pattern = 2;
  m.attn_softcap = 1.5;
  m.final_softcap = 2.0;
  return m;
}

// gemma3: 3 layers, pattern 3 (layers 0 and 1 slide), the sliding layers on
// their own rope base, linear rope scaling on the global one.
TinyLlm gemma3() {
  TinyLlm m = arch("gemma3");
  m.n_layer = 3;
  m.n_swa = 3;
  m.swa_pattern = 3;
  m.rope_base = 1e6;
  m.rope_base_swa = 100;
  m.rope_scale = 4;
  return m;
}

// phi3 with LongRoPE on 6 of each head's 8 dims (partial rotary, as
// Phi-4-mini) and an attn factor: the long factors for the default context
// (the file's 256 passes the original 128), the short ones for a graph built
// for a context of 100.
TinyLlm longrope(int64_t n_ctx) {
  TinyLlm m = arch("phi3");
  m.n_rot = 6;
  m.n_ctx_orig = 128;
  m.rope_attn_factor = 1.3;
  m.n_ctx = n_ctx;
  return m;
}

// qwen2 with YaRN by 4 from an original context of 64: rotated pair 0 keeps
// its frequency, pair 1 takes half of each, pairs 2-3 are interpolated.
TinyLlm yarn() {
  TinyLlm m = arch("qwen2");
  m.rope_scale = 4;
  m.yarn_orig = 64;
  return m;
}

// mistral3: llama's interleaved rope under YaRN on its own betas, and query
// temperatures that step every 4 positions over the 9 tokens.
TinyLlm mistral3() {
  TinyLlm m = arch("mistral3");
  m.rope_scale = 4;
  m.yarn_orig = 4;
  m.yarn_beta_fast = 16;
  m.yarn_beta_slow = 0.25;
  m.attn_temp_scale = 0.5;
  return m;
}

// A mixture of 4 experts, 2 per token (llama: mixtral's layout).
TinyLlm moe(std::string a) {
  TinyLlm m = arch(std::move(a));
  m.n_expert = 4;
  return m;
}

std::string arch_name(const TinyLlm& m) {
  return m.arch + (m.tied ? "_tied" : "") + (m.rope_freqs ? "_freqs" : "") +
         (m.n_swa > 0 ? "_swa" : "") + (m.final_softcap > 0 ? "_softcap" : "") +
         (m.n_expert > 0 && m.arch != "qwen3moe" ? "_moe" : "") +
         (m.n_ctx_orig > 0 ? m.n_ctx > 0 ? "_shortrope" : "_longrope" : "") +
         (m.yarn_orig > 0 && m.arch != "mistral3" ? "_yarn" : "");
}

INSTANTIATE_TEST_SUITE_P(Archs, LlmArch,
                         ::testing::Values(arch("llama"), arch("llama", true, true), arch("qwen2"),
                                           arch("qwen3", true), arch("phi3"), arch("gemma2"),
                                           gemma2(), arch("gemma3"), gemma3(), moe("llama"),
                                           moe("qwen3moe"), longrope(0), longrope(100), yarn(),
                                           mistral3()),
                         [](const auto& info) { return arch_name(info.param); });

// A batched decode step gives each session the logits (and cache) its own
// feed would: caches of different lengths padded into one batch, sliding
// layers masked per sequence, a mixture of experts routed per token.
TEST(LlmBatch, BatchedDecodeMatchesEachSessionAlone) {
  for (const TinyLlm& m : {arch("llama"), gemma2(), moe("qwen3moe")}) {
    Loaded l = load(m);
    Model single = llm::build_model(l.file, l.config, {}, llm::Weights::Quantized);
    Model batched = llm::build_model(l.file, l.config, {.batch = true}, llm::Weights::Quantized);
    auto exe = Executable::compile(std::move(single.graph), single.weights);
    llm::BatchDecoder decoder(Executable::compile(std::move(batched.graph), batched.weights),
                              l.config);
    // Three sequences with 6, 2 and 4 tokens of prompt (gemma2's window is 4).
    const std::vector<std::vector<int32_t>> prompts{{3, 17, 42, 0, 8, 8}, {31, 49}, {5, 6, 7, 9}};
    std::vector<std::unique_ptr<llm::Session>> together, alone;
    for (const auto& p : prompts) {
      together.push_back(std::make_unique<llm::Session>(exe, l.config));
      alone.push_back(std::make_unique<llm::Session>(exe, l.config));
      together.back()->feed(p);
      alone.back()->feed(p);
    }
    std::vector<int32_t> next{11, 12, 13};
    for (int step = 0; step < 4; ++step) {
      std::vector<llm::Session*> s{together[0].get(), together[1].get(), together[2].get()};
      const auto got = decoder.feed(s, next);
      for (size_t i = 0; i < 3; ++i) {
        const std::vector<float> want = alone[i]->feed(std::span(&next[i], 1));
        ASSERT_EQ(got[i].size(), want.size());
        for (size_t v = 0; v < want.size(); ++v)
          ASSERT_NEAR(got[i][v], want[v], 1e-4)
              << m.arch << " step " << step << " sequence " << i << " vocab " << v;
        EXPECT_EQ(together[i]->tokens(), alone[i]->tokens());
        next[i] = int32_t(3 + (next[i] * 7 + step) % 40);
      }
    }
  }
}

// The experts kept in the file's blocks (moe_ffn on "f32" rows) give the
// logits of the dequantized graph, and the config reads the expert keys.
TEST(LlmMoe, QuantizedWeightsMatchF32AndKeysAreRead) {
  for (const char* a : {"llama", "qwen3moe"}) {
    Loaded l = load(moe(a));
    EXPECT_EQ(l.config.n_expert, 4) << a;
    EXPECT_EQ(l.config.n_expert_used, 2) << a;
    EXPECT_EQ(l.config.n_ff_exp, 48) << a;
    EXPECT_NE(l.config.summary().find("2 of 4 experts x ff 48"), std::string::npos)
        << l.config.summary();
    Tensor q = all_logits(l, kTokens, llm::Weights::Quantized),
           f = all_logits(l, kTokens, llm::Weights::F32);
    EXPECT_TRUE(testing::all_close(q, f, 1e-4, 1e-4)) << a;
  }
}

TEST(LlmConfig, NewArchitecturesReadTheirKeys) {
  Loaded phi = load(arch("phi3"));
  EXPECT_TRUE(phi.config.fused_qkv && phi.config.fused_gate_up);
  EXPECT_EQ(phi.config.rope_style, "neox");
  EXPECT_EQ(phi.config.n_swa, 0);
  EXPECT_FALSE(phi.config.long_rope || phi.config.long_context(100000));
  EXPECT_EQ(phi.config.n_ctx_orig, 256);  // the training context when the key is absent
  EXPECT_EQ(phi.config.rope_attn_factor, 1);

  const llm::Config lr = load(longrope(0)).config;
  EXPECT_TRUE(lr.long_rope);
  EXPECT_EQ(lr.n_ctx_orig, 128);
  EXPECT_FLOAT_EQ(float(lr.rope_attn_factor), 1.3f);
  EXPECT_TRUE(lr.long_context(0));  // the default context, 256
  EXPECT_TRUE(lr.long_context(129));
  EXPECT_FALSE(lr.long_context(128));
  EXPECT_NE(lr.summary().find("longrope (original context 128) attn factor 1.3"), std::string::npos)
      << lr.summary();

  // YaRN's magnitude gain 1 + 0.1 ln 4 on the rotated dims; mistral3's own keys.
  const llm::Config y = load(yarn()).config;
  EXPECT_TRUE(y.yarn);
  EXPECT_EQ(y.n_ctx_orig, 64);
  EXPECT_DOUBLE_EQ(y.rope_attn_factor, 1 + 0.1 * std::log(4.0));
  EXPECT_EQ(y.yarn_divisors(), (std::vector<float>{1, 1.6f, 4, 4}));
  const llm::Config m3 = load(mistral3()).config;
  EXPECT_EQ(m3.rope_style, "interleaved");
  EXPECT_EQ(m3.yarn_beta_fast, 16);
  EXPECT_EQ(m3.yarn_beta_slow, 0.25);
  EXPECT_EQ(m3.attn_temp_scale, 0.5);
  EXPECT_NE(m3.summary().find("x4 yarn (original context 4) attn factor 1.13863, query temperature "
                              "0.5"),
            std::string::npos)
      << m3.summary();

  // rope.scaling.type none: the factor is ignored, as llama.cpp ignores it.
  Loaded unscaled = load(gemma3());
  for (auto& [k, v] : unscaled.file.metadata)
    if (k == "gemma3.rope.scaling.type") v = gguf::Value::of_string("none");
  EXPECT_EQ(load(gemma3()).config.rope_scale, 4);
  EXPECT_EQ(llm::Config::from_gguf(unscaled.file).rope_scale, 1);

  Loaded g2 = load(gemma2());
  const llm::Config& c2 = g2.config;
  EXPECT_TRUE(c2.tied_output && c2.post_norms);
  EXPECT_EQ(c2.ffn_act, "gelu_tanh");
  EXPECT_DOUBLE_EQ(c2.embd_scale, std::sqrt(32.0));
  EXPECT_DOUBLE_EQ(c2.attn_softcap, 1.5);
  EXPECT_DOUBLE_EQ(c2.final_softcap, 2.0);
  EXPECT_TRUE(c2.is_swa(0));
  EXPECT_FALSE(c2.is_swa(1));
  EXPECT_NE(c2.summary().find("sliding window 4 (1 of 2 layers"), std::string::npos)
      << c2.summary();
  // Without the keys: llama.cpp's gemma2 defaults (window 4096, caps 50 / 30).
  Loaded d2 = load(arch("gemma2"));
  EXPECT_EQ(d2.config.n_swa, 4096);
  EXPECT_DOUBLE_EQ(d2.config.attn_softcap, 50);
  EXPECT_DOUBLE_EQ(d2.config.final_softcap, 30);

  Loaded g3 = load(gemma3());
  const llm::Config& c3 = g3.config;
  EXPECT_TRUE(c3.qk_norm && c3.post_norms);
  EXPECT_EQ(c3.attn_softcap, 0);
  EXPECT_EQ(c3.final_softcap, 0);
  EXPECT_TRUE(c3.is_swa(0) && c3.is_swa(1));
  EXPECT_FALSE(c3.is_swa(2));
  EXPECT_DOUBLE_EQ(c3.rope_base_swa, 100);
  EXPECT_DOUBLE_EQ(c3.rope_scale, 4);
  EXPECT_DOUBLE_EQ(c3.rope_scale_swa, 1);
  // No sliding_window key: every gemma3 layer is global.
  Loaded d3 = load(arch("gemma3"));
  EXPECT_FALSE(d3.config.is_swa(0));
  // A per-layer array for the pattern is ignored as llama.cpp does: default 6.
  for (auto& [k, v] : g3.file.metadata)
    if (k == "gemma3.attention.sliding_window_pattern")
      v = gguf::Value::of_array(gguf::ValueType::BOOL, {gguf::Value::of_bool(true)});
  EXPECT_EQ(llm::Config::from_gguf(g3.file).swa_pattern, 6);
}

// Final soft-capping bounds every logit by the cap: the logits are exactly
// cap * tanh(z / cap) of the same model's logits z under a cap so large that
// it is the identity (gemma2 always caps), and those go beyond the cap.
TEST(LlmGemma2, SoftCappingBoundsTheLogits) {
  TinyLlm m = gemma2();
  Tensor capped = all_logits(load(m), kTokens, llm::Weights::F32);
  m.final_softcap = 1000;  // effectively uncapped
  Tensor wide = all_logits(load(m), kTokens, llm::Weights::F32);
  float max_capped = 0, max_wide = 0;
  for (int64_t i = 0; i < capped.numel(); ++i) {
    max_capped = std::max(max_capped, std::abs(capped.data<float>()[i]));
    max_wide = std::max(max_wide, std::abs(wide.data<float>()[i]));
    // cap * tanh(z / cap) of the (nearly) uncapped logit z.
    EXPECT_NEAR(capped.data<float>()[i], 2.0 * std::tanh(wide.data<float>()[i] / 2.0), 1e-4);
  }
  EXPECT_LE(max_capped, 2.0f);
  EXPECT_GT(max_wide, 2.0f);
}

// The window is applied where the file leaves the pattern to llama.cpp's
// default (2: layer 0 slides): at the last of 9 tokens a 4-key window cuts,
// the windowed reference differs from an unwindowed one, and rlx follows the
// windowed one.
TEST(LlmGemma2, SlidingWindowIsApplied) {
  TinyLlm m = gemma2();
  m.swa_pattern = 0;  // not written: the default pattern 2 (layer 0 slides)
  Loaded l = load(m);
  EXPECT_TRUE(l.config.is_swa(0));
  EXPECT_FALSE(l.config.is_swa(1));
  TinyLlm wide = m;
  wide.n_swa = 100;
  auto want = m.reference_logits(kTokens), unwindowed = wide.reference_logits(kTokens);
  Tensor got = all_logits(l, kTokens, llm::Weights::F32);
  const size_t last = kTokens.size() - 1;
  double diff = 0, err = 0;
  for (int64_t v = 0; v < m.n_vocab; ++v) {
    diff = std::max(diff, std::abs(want[last][size_t(v)] - unwindowed[last][size_t(v)]));
    err = std::max(
        err, std::abs(double(got.data<float>()[last * m.n_vocab + v]) - want[last][size_t(v)]));
  }
  EXPECT_GT(diff, 1e-2);
  EXPECT_LT(err, 2e-4);
}

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

TEST(LlmConfig, NewArchitecturesNameMissingTensorsAndBadKeys) {
  auto error_of = [](const TinyLlm& m, const std::string& drop, const std::string& key = "",
                     const std::string& value = "yarn") -> std::string {
    std::string bytes = m.gguf_bytes();
    gguf::File f = gguf::read_bytes(bytes.data(), bytes.size(), "z.gguf");
    std::erase_if(f.tensors, [&](const gguf::TensorInfo& t) { return t.name == drop; });
    if (!key.empty())
      for (auto& [k, v] : f.metadata)
        if (k == key) v = gguf::Value::of_string(value);
    try {
      llm::Config::from_gguf(f);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(arch("phi3"), "blk.1.attn_qkv.weight")
                .find("z.gguf: tensor 'blk.1.attn_qkv.weight' is missing"),
            std::string::npos);
  EXPECT_NE(error_of(gemma2(), "blk.0.post_ffw_norm.weight")
                .find("'blk.0.post_ffw_norm.weight' is missing"),
            std::string::npos);
  EXPECT_NE(
      error_of(gemma3(), "blk.2.attn_k_norm.weight").find("'blk.2.attn_k_norm.weight' is missing"),
      std::string::npos);
  EXPECT_NE(error_of(moe("qwen3moe"), "blk.1.ffn_down_exps.weight")
                .find("'blk.1.ffn_down_exps.weight' is missing"),
            std::string::npos);
  TinyLlm dense_qwen3moe = arch("qwen3moe");
  EXPECT_NE(error_of(dense_qwen3moe, "").find("qwen3moe needs qwen3moe.expert_count"),
            std::string::npos);
  TinyLlm greedy = moe("llama");
  greedy.n_expert_used = 5;
  EXPECT_NE(error_of(greedy, "").find("bad expert counts: 5 used of 4"), std::string::npos);
  EXPECT_NE(error_of(longrope(0), "rope_factors_short.weight")
                .find("z.gguf: tensor 'rope_factors_short.weight' is missing (long-context rope "
                      "needs both)"),
            std::string::npos);
  TinyLlm phi_moe = moe("phi3");
  EXPECT_NE(error_of(phi_moe, "").find("phi3 with experts is not supported"), std::string::npos);
  const std::string e = error_of(gemma3(), "", "gemma3.rope.scaling.type", "longrope");
  EXPECT_NE(e.find("z.gguf: metadata key 'gemma3.rope.scaling.type': 'longrope' is not supported "
                   "(linear, yarn, none)"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of(gemma3(), "", "gemma3.rope.scaling.type")
                .find("z.gguf: YaRN rope scaling on gemma3 is not supported"),
            std::string::npos);
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
