// Hyper-parameters of a llama-family GGUF model, checked against its tensors.
// Key names, defaults and per-architecture rules follow llama.cpp's loader
// (src/llama-model.cpp, src/models/<arch>.cpp) so a file means the same thing
// to both.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "rlx/checked.h"
#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx::llm {
namespace {

struct Meta {
  const gguf::File& f;
  std::string arch;

  const gguf::Value* find(const std::string& key) const { return f.find(arch + "." + key); }
  int64_t integer(const std::string& key) const {
    const gguf::Value* v = find(key);
    RLX_CHECK(v, f.source, ": metadata key '", arch, ".", key, "' is missing");
    try {
      return v->as_int();
    } catch (const Error& e) {
      throw make_error(f.source, ": metadata key '", arch, ".", key, "': ", e.what());
    }
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    return find(key) ? integer(key) : fallback;
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const gguf::Value* v = find(key);
    if (!v) return fallback;
    RLX_CHECK(v->type == gguf::ValueType::STRING, f.source, ": metadata key '", arch, ".", key,
              "' is not a string");
    return v->as_string();
  }
  // llama.cpp's get_key_or_arr into a scalar: an array value (per-layer
  // patterns some converters write) is ignored and the default kept.
  int64_t scalar_or_default(const std::string& key, int64_t fallback) const {
    const gguf::Value* v = find(key);
    return v && v->type == gguf::ValueType::ARRAY ? fallback : integer(key, fallback);
  }
  double real(const std::string& key, double fallback) const {
    const gguf::Value* v = find(key);
    if (!v) return fallback;
    try {
      return v->as_float();
    } catch (const Error& e) {
      throw make_error(f.source, ": metadata key '", arch, ".", key, "': ", e.what());
    }
  }
};

// The tensor's shape in PyTorch order must be `want`.
void expect_tensor(const gguf::File& f, const std::string& name, std::vector<int64_t> want) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  RLX_CHECK(t, f.source, ": tensor '", name, "' is missing");
  std::vector<int64_t> got(t->ne.rbegin(), t->ne.rend());
  auto str = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  RLX_CHECK(got == want, f.source, ": tensor '", name, "' has shape ", str(got), ", expected ",
            str(want), " from the metadata");
}

}  // namespace

Config Config::from_gguf(const gguf::File& f) {
  const gguf::Value* a = f.find("general.architecture");
  RLX_CHECK(a && a->type == gguf::ValueType::STRING, f.source,
            ": no general.architecture string; not a model file");
  Config c;
  c.arch = a->as_string();
  const std::string& arch = c.arch;
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  // mistral3 is llama's graph with YaRN keys of its own and temperature tuning.
  const bool llama_like = arch == "llama" || arch == "mistral3";
  RLX_CHECK(llama_like || arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" ||
                arch == "phi3" || gemma,
            f.source, ": architecture '", arch,
            "' is not supported (llama, mistral3, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3)");
  Meta m{f, arch};
  c.n_layer = m.integer("block_count");
  c.n_embd = m.integer("embedding_length");
  c.n_expert = m.integer("expert_count", 0);
  c.n_expert_used = m.integer("expert_used_count", 0);
  RLX_CHECK(arch != "qwen3moe" || (c.n_expert > 0 && c.n_expert_used > 0), f.source,
            ": qwen3moe needs ", arch, ".expert_count and ", arch, ".expert_used_count > 0");
  RLX_CHECK(c.n_expert >= 0 && c.n_expert <= 4096 && c.n_expert_used >= 0 &&
                c.n_expert_used <= c.n_expert && (c.n_expert == 0 || c.n_expert_used > 0),
            f.source, ": bad expert counts: ", c.n_expert_used, " used of ", c.n_expert);
  RLX_CHECK(c.n_expert == 0 || llama_like || arch == "qwen3moe", f.source, ": ", arch,
            " with experts is not supported (MoE: llama, mistral3, qwen3moe)");
  // MoE files may leave out the dense size (llama.cpp reads it as optional).
  c.n_ff = c.n_expert > 0 ? m.integer("feed_forward_length", 0) : m.integer("feed_forward_length");
  if (c.n_expert > 0) {
    // llama (mixtral) experts are n_ff wide; qwen3moe's have their own key,
    // n_ff / n_expert_used when absent, as llama.cpp reads it.
    c.n_ff_exp = arch == "qwen3moe" ? m.scalar_or_default("expert_feed_forward_length", 0) : c.n_ff;
    if (c.n_ff_exp == 0 && c.n_ff > 0) c.n_ff_exp = c.n_ff / c.n_expert_used;
    RLX_CHECK(c.n_ff_exp > 0, f.source, ": MoE model without a usable ", arch,
              ".expert_feed_forward_length or feed_forward_length");
    c.expert_weights_scale = m.real("expert_weights_scale", 0.0);
    RLX_CHECK(std::isfinite(c.expert_weights_scale), f.source, ": bad expert_weights_scale");
    if (c.n_ff <= 0) c.n_ff = c.n_ff_exp;
  }
  c.n_head = m.integer("attention.head_count");
  c.n_head_kv = m.integer("attention.head_count_kv", c.n_head);
  c.n_ctx_train = m.integer("context_length", 0);
  RLX_CHECK(c.n_layer > 0 && c.n_embd > 0 && c.n_ff > 0 && c.n_head > 0 && c.n_head_kv > 0 &&
                c.n_head % c.n_head_kv == 0,
            f.source, ": bad hyper-parameters: ", c.n_layer, " layers, d=", c.n_embd, ", ff ",
            c.n_ff, ", ", c.n_head, " heads, ", c.n_head_kv, " kv heads");
  c.head_dim = m.integer("attention.key_length", c.n_embd / c.n_head);
  int64_t v_dim = m.integer("attention.value_length", c.head_dim);
  RLX_CHECK(c.head_dim > 0 && v_dim == c.head_dim, f.source, ": key length ", c.head_dim,
            " and value length ", v_dim, " must be equal and positive");
  c.n_rot = m.integer("rope.dimension_count", c.head_dim);
  RLX_CHECK(c.n_rot > 0 && c.n_rot % 2 == 0 && c.n_rot <= c.head_dim, f.source,
            ": rope.dimension_count ", c.n_rot, " must be even and at most the head size ",
            c.head_dim);
  c.rope_base = m.real("rope.freq_base", 10000.0);
  c.rms_eps = m.real("attention.layer_norm_rms_epsilon", 1e-5);
  RLX_CHECK(c.rope_base > 0 && std::isfinite(c.rope_base) && c.rms_eps >= 0, f.source,
            ": bad rope.freq_base ", c.rope_base, " or rms epsilon ", c.rms_eps);
  // llama.cpp: the scaling type defaults to linear and the factor applies
  // whenever given (rope.scaling.factor, or the older rope.scale_linear),
  // except with type none.
  const std::string scaling = m.string("rope.scaling.type", "linear");
  RLX_CHECK(scaling == "linear" || scaling == "none" || scaling == "yarn" || scaling.empty(),
            f.source, ": metadata key '", arch, ".rope.scaling.type': '", scaling,
            "' is not supported (linear, yarn, none)");
  const double factor = m.real("rope.scaling.factor", m.real("rope.scale_linear", 0.0));
  RLX_CHECK(factor >= 0 && std::isfinite(factor), f.source, ": metadata key '", arch,
            ".rope.scaling.factor' is ", factor);
  c.rope_scale = factor == 0 || scaling == "none" ? 1.0 : factor;
  c.n_ctx_orig = m.integer("rope.scaling.original_context_length", c.n_ctx_train);
  c.rope_attn_factor = m.real("rope.scaling.attn_factor", 1.0);
  RLX_CHECK(c.n_ctx_orig >= 0 && c.rope_attn_factor > 0 && std::isfinite(c.rope_attn_factor),
            f.source, ": bad rope.scaling.original_context_length ", c.n_ctx_orig,
            " or rope.scaling.attn_factor ", c.rope_attn_factor);
  c.yarn = scaling == "yarn";
  if (c.yarn) {
    RLX_CHECK(!gemma, f.source, ": YaRN rope scaling on ", arch, " is not supported");
    RLX_CHECK(c.n_ctx_orig > 0, f.source, ": YaRN needs ", arch,
              ".rope.scaling.original_context_length or context_length");
    double log_mul = 0;
    if (arch == "mistral3") {  // the only family here whose loader reads these keys
      c.yarn_beta_fast = m.real("rope.scaling.yarn_beta_fast", 32.0);
      c.yarn_beta_slow = m.real("rope.scaling.yarn_beta_slow", 1.0);
      log_mul = m.real("rope.scaling.yarn_log_multiplier", 0.0);
    }
    RLX_CHECK(c.yarn_beta_fast > 0 && c.yarn_beta_slow > 0 && std::isfinite(c.yarn_beta_fast) &&
                  std::isfinite(c.yarn_beta_slow) && std::isfinite(log_mul),
              f.source, ": bad YaRN betas ", c.yarn_beta_fast, " / ", c.yarn_beta_slow,
              " or log multiplier ", log_mul);
    // ggml scales cos and sin by 1 + 0.1 ln(factor), which llama.cpp divides
    // back out and replaces by this (HF's get_mscale, mscale 1 over
    // mscale_all_dims = the log multiplier when one is given).
    auto mscale = [&](double mul) {
      return c.rope_scale <= 1 ? 1.0 : 0.1 * mul * std::log(c.rope_scale) + 1;
    };
    c.rope_attn_factor *= log_mul != 0 ? mscale(1) / mscale(log_mul) : mscale(1);
    RLX_CHECK(c.rope_attn_factor > 0 && std::isfinite(c.rope_attn_factor), f.source,
              ": YaRN log multiplier ", log_mul, " gives attention factor ", c.rope_attn_factor);
  }
  if (arch == "mistral3") {
    c.attn_temp_scale = m.real("attention.temperature_scale", 0.0);
    RLX_CHECK(std::isfinite(c.attn_temp_scale), f.source, ": bad attention.temperature_scale");
    RLX_CHECK(c.attn_temp_scale == 0 || c.n_ctx_orig > 0, f.source,
              ": attention temperature scaling needs ", arch,
              ".rope.scaling.original_context_length or context_length");
  }
  c.rope_style = llama_like ? "interleaved" : "neox";
  c.rope_base_swa = c.rope_base;
  c.rope_scale_swa = c.rope_scale;
  c.attn_scale = 1.0 / std::sqrt(double(c.head_dim));

  if (gemma) {
    c.ffn_act = "gelu_tanh";
    c.post_norms = true;
    c.embd_scale = std::sqrt(double(c.n_embd));
    // The GGUF holds no query_pre_attn_scalar: llama.cpp scales queries by
    // 1/sqrt(n_embd / n_head) for the 27B models (told apart by their layer
    // count: gemma2 46, gemma3 62) and by 1/sqrt(head_dim) otherwise, which is
    // what each model's config says.
    if (c.n_layer == (arch == "gemma2" ? 46 : 62))
      c.attn_scale = 1.0 / std::sqrt(double(c.n_embd / c.n_head));
  }
  if (arch == "gemma2") {
    c.n_swa = m.integer("attention.sliding_window", 4096);
    c.swa_pattern = m.scalar_or_default("attention.sliding_window_pattern", 2);
    c.attn_softcap = m.real("attn_logit_softcapping", 50.0);
    c.final_softcap = m.real("final_logit_softcapping", 30.0);
    c.rope_base_swa = m.real("rope.freq_base_swa", c.rope_base);
  } else if (arch == "gemma3") {
    // No sliding_window key (or 0): every layer is global.
    c.n_swa = m.integer("attention.sliding_window", 0);
    c.swa_pattern = m.scalar_or_default("attention.sliding_window_pattern", 6);
    c.final_softcap = m.real("final_logit_softcapping", 0.0);
    // Sliding layers keep llama.cpp's defaults: base 10000, no scaling.
    c.rope_base_swa = m.real("rope.freq_base_swa", 10000.0);
    c.rope_scale_swa = 1;
  }
  // phi3's sliding_window key is ignored as llama.cpp does (its SWA is
  // disabled there: the converters do not write a usable pattern).
  RLX_CHECK(c.n_swa >= 0 && c.swa_pattern >= 0, f.source, ": bad sliding window ", c.n_swa,
            " or pattern ", c.swa_pattern);
  RLX_CHECK(c.attn_softcap >= 0 && std::isfinite(c.attn_softcap) && c.final_softcap >= 0 &&
                std::isfinite(c.final_softcap),
            f.source, ": bad soft-capping: attention ", c.attn_softcap, ", final ",
            c.final_softcap);
  RLX_CHECK(c.rope_base_swa > 0 && std::isfinite(c.rope_base_swa), f.source,
            ": bad rope.freq_base_swa ", c.rope_base_swa);

  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  RLX_CHECK(emb && emb->ne.size() == 2, f.source, ": tensor 'token_embd.weight' is missing");
  c.n_vocab = emb->ne[1];
  expect_tensor(f, "token_embd.weight", {c.n_vocab, c.n_embd});
  // gemma2's head is always the embedding (llama.cpp ignores output.weight).
  c.tied_output = arch == "gemma2" || f.find_tensor("output.weight") == nullptr;
  if (!c.tied_output) expect_tensor(f, "output.weight", {c.n_vocab, c.n_embd});
  expect_tensor(f, "output_norm.weight", {c.n_embd});
  c.rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  if (c.rope_freqs) expect_tensor(f, "rope_freqs.weight", {c.n_rot / 2});
  // LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini) writes both sets or neither;
  // rope_freqs wins over them where a file has all three, as in llama.cpp.
  const bool has_long = f.find_tensor("rope_factors_long.weight") != nullptr,
             has_short = f.find_tensor("rope_factors_short.weight") != nullptr;
  RLX_CHECK(has_long == has_short, f.source, ": tensor 'rope_factors_", has_long ? "short" : "long",
            ".weight' is missing (long-context rope needs both)");
  c.long_rope = has_long && !c.rope_freqs;
  if (c.long_rope) {
    expect_tensor(f, "rope_factors_long.weight", {c.n_rot / 2});
    expect_tensor(f, "rope_factors_short.weight", {c.n_rot / 2});
  }
  c.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  c.fused_gate_up = arch == "phi3";
  c.qkv_bias = f.find_tensor(c.fused_qkv ? "blk.0.attn_qkv.bias" : "blk.0.attn_q.bias") != nullptr;
  // gemma3 always has q/k norms: a missing one is reported below.
  c.qk_norm = arch == "gemma3" || f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;

  // Checked: head counts and sizes are untrusted metadata.
  const int64_t q = checked_mul(c.n_head, c.head_dim, f.source + ": q size"),
                kv = checked_mul(c.n_head_kv, c.head_dim, f.source + ": kv size");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    expect_tensor(f, b + "attn_norm.weight", {c.n_embd});
    if (c.fused_qkv) {
      expect_tensor(f, b + "attn_qkv.weight", {q + 2 * kv, c.n_embd});
      if (c.qkv_bias) expect_tensor(f, b + "attn_qkv.bias", {q + 2 * kv});
    } else {
      expect_tensor(f, b + "attn_q.weight", {q, c.n_embd});
      expect_tensor(f, b + "attn_k.weight", {kv, c.n_embd});
      expect_tensor(f, b + "attn_v.weight", {kv, c.n_embd});
      if (c.qkv_bias) {
        expect_tensor(f, b + "attn_q.bias", {q});
        expect_tensor(f, b + "attn_k.bias", {kv});
        expect_tensor(f, b + "attn_v.bias", {kv});
      }
    }
    expect_tensor(f, b + "attn_output.weight", {c.n_embd, q});
    expect_tensor(f, b + "ffn_norm.weight", {c.n_embd});
    if (c.n_expert > 0) {
      expect_tensor(f, b + "ffn_gate_inp.weight", {c.n_expert, c.n_embd});
      expect_tensor(f, b + "ffn_gate_exps.weight", {c.n_expert, c.n_ff_exp, c.n_embd});
      expect_tensor(f, b + "ffn_up_exps.weight", {c.n_expert, c.n_ff_exp, c.n_embd});
      expect_tensor(f, b + "ffn_down_exps.weight", {c.n_expert, c.n_embd, c.n_ff_exp});
    } else if (c.fused_gate_up) {
      expect_tensor(f, b + "ffn_up.weight", {2 * c.n_ff, c.n_embd});
    } else {
      expect_tensor(f, b + "ffn_gate.weight", {c.n_ff, c.n_embd});
      expect_tensor(f, b + "ffn_up.weight", {c.n_ff, c.n_embd});
    }
    if (c.n_expert == 0) expect_tensor(f, b + "ffn_down.weight", {c.n_embd, c.n_ff});
    if (c.post_norms) {
      expect_tensor(f, b + "post_attention_norm.weight", {c.n_embd});
      expect_tensor(f, b + "post_ffw_norm.weight", {c.n_embd});
    }
    if (c.qk_norm) {
      expect_tensor(f, b + "attn_q_norm.weight", {c.head_dim});
      expect_tensor(f, b + "attn_k_norm.weight", {c.head_dim});
    }
  }
  return c;
}

int64_t Config::default_context() const {
  return n_ctx_train > 0 ? std::min<int64_t>(n_ctx_train, 4096) : 4096;
}

bool Config::long_context(int64_t n_ctx) const {
  return long_rope && (n_ctx > 0 ? n_ctx : default_context()) > n_ctx_orig;
}

// ggml's rope_yarn: pair i's angle is theta_interp (1 - r_i) + theta_extrap r_i,
// theta_interp = theta_extrap / rope_scale, with the ramp r_i falling from 1
// to 0 between the pairs ggml_rope_yarn_corr_dims gives (in float, as ggml).
std::vector<float> Config::yarn_divisors() const {
  if (!yarn) return {};
  auto corr_dim = [&](double beta) {
    return float(n_rot) * logf(float(n_ctx_orig) / (float(beta) * 2 * float(M_PI))) /
           (2 * logf(float(rope_base)));
  };
  const float low = std::max(0.f, std::floor(corr_dim(yarn_beta_fast)));
  const float high = std::min(float(n_rot - 1), std::ceil(corr_dim(yarn_beta_slow)));
  const float freq_scale = float(1 / rope_scale);
  std::vector<float> d(size_t(n_rot / 2));
  for (size_t i = 0; i < d.size(); ++i) {
    const float y = (float(i) - low) / std::max(0.001f, high - low);
    const float ramp = 1 - std::min(1.f, std::max(0.f, y));
    d[i] = 1 / (freq_scale * (1 - ramp) + ramp);
  }
  return d;
}

std::string Config::summary() const {
  std::ostringstream s;
  s << arch << ": " << n_layer << " layers, d=" << n_embd << ", " << n_head << "/" << n_head_kv
    << " heads x " << head_dim << ", ff " << n_ff << ", vocab " << n_vocab << ", rope "
    << rope_style << " base " << rope_base
    << (rope_scale == 1 ? ""
        : yarn          ? " x"
                        : " linear x");
  if (rope_scale != 1) s << rope_scale;
  if (long_rope) s << " longrope (original context " << n_ctx_orig << ")";
  if (yarn) s << " yarn (original context " << n_ctx_orig << ")";
  if (rope_attn_factor != 1) s << " attn factor " << rope_attn_factor;
  if (attn_temp_scale != 0) s << ", query temperature " << attn_temp_scale;
  s << (tied_output ? ", tied output" : "") << (qkv_bias ? ", qkv bias" : "")
    << (qk_norm ? ", q/k norm" : "") << (fused_qkv ? ", fused qkv" : "")
    << (fused_gate_up ? ", fused gate/up" : "") << (ffn_act != "silu" ? ", " + ffn_act : "")
    << (post_norms ? ", post norms" : "");
  if (n_swa > 0) {
    s << ", sliding window " << n_swa << " (";
    if (swa_pattern == 0)
      s << "every layer";
    else
      s << swa_pattern - 1 << " of " << swa_pattern << " layers";
    s << ", rope base " << rope_base_swa << ")";
  }
  if (n_expert > 0)
    s << ", " << n_expert_used << " of " << n_expert << " experts x ff " << n_ff_exp;
  if (attn_softcap > 0) s << ", attention softcap " << attn_softcap;
  if (final_softcap > 0) s << ", final softcap " << final_softcap;
  return s.str();
}

}  // namespace rlx::llm
