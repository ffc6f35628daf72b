#include "support/tiny_llm.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace rlx::testing {
namespace {

using Vec = std::vector<double>;
constexpr int64_t kContext = 256;  // every file's context_length

struct Weights {
  std::map<std::string, std::vector<float>> data;
  std::map<std::string, std::vector<int64_t>> dims;  // PyTorch order

  void add(const std::string& name, std::vector<int64_t> d, std::mt19937_64& rng, float mean,
           float stdev) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    std::normal_distribution<float> dist(mean, stdev);
    auto& w = data[name];
    for (int64_t i = 0; i < n; ++i) w.push_back(dist(rng));
    dims[name] = std::move(d);
  }
  const std::vector<float>& at(const std::string& n) const { return data.at(n); }
};

Weights make_weights(const TinyLlm& m) {
  std::mt19937_64 rng(m.seed);
  Weights w;
  const int64_t q = m.n_head * m.head_dim, kv = m.n_head_kv * m.head_dim;
  const bool gemma = m.arch == "gemma2" || m.arch == "gemma3";
  // gemma scales embeddings by sqrt(d): keep its inputs of unit size.
  w.add("token_embd.weight", {m.n_vocab, m.n_embd}, rng, 0,
        gemma ? float(1 / std::sqrt(double(m.n_embd))) : 1.0f);
  for (int64_t l = 0; l < m.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    w.add(b + "attn_norm.weight", {m.n_embd}, rng, 1, 0.1f);
    if (m.arch == "phi3") {
      w.add(b + "attn_qkv.weight", {q + 2 * kv, m.n_embd}, rng, 0, 0.2f);
    } else {
      w.add(b + "attn_q.weight", {q, m.n_embd}, rng, 0, 0.2f);
      w.add(b + "attn_k.weight", {kv, m.n_embd}, rng, 0, 0.2f);
      w.add(b + "attn_v.weight", {kv, m.n_embd}, rng, 0, 0.2f);
    }
    w.add(b + "attn_output.weight", {m.n_embd, q}, rng, 0, 0.2f);
    if (gemma) {
      w.add(b + "post_attention_norm.weight", {m.n_embd}, rng, 1, 0.1f);
      w.add(b + "post_ffw_norm.weight", {m.n_embd}, rng, 1, 0.1f);
    }
    if (m.arch == "qwen2") {
      w.add(b + "attn_q.bias", {q}, rng, 0, 0.1f);
      w.add(b + "attn_k.bias", {kv}, rng, 0, 0.1f);
      w.add(b + "attn_v.bias", {kv}, rng, 0, 0.1f);
    }
    if (m.arch == "qwen3" || m.arch == "qwen3moe" || m.arch == "gemma3") {
      w.add(b + "attn_q_norm.weight", {m.head_dim}, rng, 1, 0.1f);
      w.add(b + "attn_k_norm.weight", {m.head_dim}, rng, 1, 0.1f);
    }
    w.add(b + "ffn_norm.weight", {m.n_embd}, rng, 1, 0.1f);
    if (m.n_expert > 0) {  // router logits of std ~5: no near-ties in the top-k
      w.add(b + "ffn_gate_inp.weight", {m.n_expert, m.n_embd}, rng, 0, 1.0f);
      w.add(b + "ffn_gate_exps.weight", {m.n_expert, m.n_ff, m.n_embd}, rng, 0, 0.2f);
      w.add(b + "ffn_up_exps.weight", {m.n_expert, m.n_ff, m.n_embd}, rng, 0, 0.2f);
      w.add(b + "ffn_down_exps.weight", {m.n_expert, m.n_embd, m.n_ff}, rng, 0, 0.2f);
    } else if (m.arch == "phi3") {  // gate rows, then up rows
      w.add(b + "ffn_up.weight", {2 * m.n_ff, m.n_embd}, rng, 0, 0.2f);
    } else {
      w.add(b + "ffn_gate.weight", {m.n_ff, m.n_embd}, rng, 0, 0.2f);
      w.add(b + "ffn_up.weight", {m.n_ff, m.n_embd}, rng, 0, 0.2f);
    }
    if (m.n_expert == 0) w.add(b + "ffn_down.weight", {m.n_embd, m.n_ff}, rng, 0, 0.2f);
  }
  w.add("output_norm.weight", {m.n_embd}, rng, 1, 0.1f);
  if (!m.tied && m.arch != "gemma2") w.add("output.weight", {m.n_vocab, m.n_embd}, rng, 0, 0.2f);
  if (m.rope_freqs) w.add("rope_freqs.weight", {m.n_rot / 2}, rng, 1.5f, 0.3f);
  if (m.n_ctx_orig > 0) {
    w.add("rope_factors_long.weight", {m.n_rot / 2}, rng, 4.0f, 1.0f);
    w.add("rope_factors_short.weight", {m.n_rot / 2}, rng, 1.2f, 0.1f);
  }
  return w;
}

Vec rms_norm(const Vec& x, const float* g, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double inv = 1 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
  return y;
}

// W [out, in] times x [in].
Vec matvec(const std::vector<float>& w, const Vec& x) {
  Vec y(w.size() / x.size(), 0.0);
  for (size_t o = 0; o < y.size(); ++o)
    for (size_t i = 0; i < x.size(); ++i) y[o] += double(w[o * x.size() + i]) * x[i];
  return y;
}

// llama.cpp's rule: layer l slides when l % pattern < pattern - 1; the
// pattern defaults to 2 (gemma2) or 6 (gemma3) when the file has none.
bool is_swa(const TinyLlm& m, int64_t l) {
  const int64_t p = m.swa_pattern > 0 ? m.swa_pattern : m.arch == "gemma2" ? 2 : 6;
  return m.n_swa > 0 && l % p < p - 1;
}

void rope(double* v, int64_t pos, const TinyLlm& m, const Weights& w, bool swa) {
  const bool neox = m.arch != "llama" && m.arch != "mistral3";
  // gemma3's sliding layers: their own base (10000 by default), no scaling.
  const double base = swa ? (m.rope_base_swa > 0  ? m.rope_base_swa
                             : m.arch == "gemma3" ? 10000.0
                                                  : m.rope_base)
                          : m.rope_base;
  const double scale = m.rope_scale > 0 && !(swa && m.arch == "gemma3") ? m.rope_scale : 1.0;
  // YaRN (the YaRN paper's ramp as ggml places it): pair i keeps its original
  // frequency below `low`, takes the interpolated one above `high`, and a
  // linear blend between; cos and sin grow by 1 + 0.1 ln(scale).
  double low = 0, high = 0, yarn_gain = 1;
  if (m.yarn_orig > 0) {
    auto corr = [&](double beta) {
      return double(m.n_rot) * std::log(double(m.yarn_orig) / (beta * 2 * M_PI)) /
             (2 * std::log(base));
    };
    low = std::max(0.0, std::floor(corr(m.yarn_beta_fast > 0 ? m.yarn_beta_fast : 32)));
    high =
        std::min(double(m.n_rot - 1), std::ceil(corr(m.yarn_beta_slow > 0 ? m.yarn_beta_slow : 1)));
    yarn_gain = 1 + 0.1 * std::log(scale);
  }
  for (int64_t i = 0; i < m.n_rot / 2; ++i) {
    double theta = double(pos) * std::pow(base, -2.0 * double(i) / double(m.n_rot)) / scale;
    if (m.yarn_orig > 0) {
      const double r = 1 - std::clamp((double(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
      theta = theta * (1 - r) + theta * scale * r;
    }
    if (m.rope_freqs) theta /= double(w.at("rope_freqs.weight")[size_t(i)]);
    if (m.n_ctx_orig > 0) {
      const bool long_set = (m.n_ctx > 0 ? m.n_ctx : kContext) > m.n_ctx_orig;
      theta /= double(
          w.at(long_set ? "rope_factors_long.weight" : "rope_factors_short.weight")[size_t(i)]);
    }
    // ggml scales cos and sin by the attn factor: the rotated dims only.
    const double f = (m.rope_attn_factor > 0 ? m.rope_attn_factor : 1.0) * yarn_gain;
    int64_t a = neox ? i : 2 * i, b = neox ? i + m.n_rot / 2 : 2 * i + 1;
    double x0 = v[a], x1 = v[b];
    v[a] = f * (x0 * std::cos(theta) - x1 * std::sin(theta));
    v[b] = f * (x0 * std::sin(theta) + x1 * std::cos(theta));
  }
}

}  // namespace

std::string TinyLlm::gguf_bytes() const {
  Weights w = make_weights(*this);
  using gguf::Value;
  std::vector<std::pair<std::string, Value>> meta{
      {"general.architecture", Value::of_string(arch)},
      {arch + ".block_count", Value::of_u32(uint32_t(n_layer))},
      {arch + ".embedding_length", Value::of_u32(uint32_t(n_embd))},
      {arch + ".feed_forward_length", Value::of_u32(uint32_t(n_ff))},
      {arch + ".attention.head_count", Value::of_u32(uint32_t(n_head))},
      {arch + ".attention.head_count_kv", Value::of_u32(uint32_t(n_head_kv))},
      {arch + ".attention.key_length", Value::of_u32(uint32_t(head_dim))},
      {arch + ".attention.value_length", Value::of_u32(uint32_t(head_dim))},
      {arch + ".rope.dimension_count", Value::of_u32(uint32_t(n_rot))},
      {arch + ".rope.freq_base", Value::of_f32(float(rope_base))},
      {arch + ".attention.layer_norm_rms_epsilon", Value::of_f32(float(eps))},
      {arch + ".context_length", Value::of_u32(uint32_t(kContext))},
      {"tokenizer.ggml.model", Value::of_string("llama")},
      {"tokenizer.ggml.bos_token_id", Value::of_u32(1)},
      {"tokenizer.ggml.eos_token_id", Value::of_u32(2)},
  };
  if (n_expert > 0) {
    meta.emplace_back(arch + ".expert_count", Value::of_u32(uint32_t(n_expert)));
    meta.emplace_back(arch + ".expert_used_count", Value::of_u32(uint32_t(n_expert_used)));
    if (arch == "qwen3moe")
      meta.emplace_back(arch + ".expert_feed_forward_length", Value::of_u32(uint32_t(n_ff)));
  }
  if (n_swa > 0)
    meta.emplace_back(arch + ".attention.sliding_window", Value::of_u32(uint32_t(n_swa)));
  if (swa_pattern > 0)
    meta.emplace_back(arch + ".attention.sliding_window_pattern",
                      Value::of_u32(uint32_t(swa_pattern)));
  if (attn_softcap > 0)
    meta.emplace_back(arch + ".attn_logit_softcapping", Value::of_f32(float(attn_softcap)));
  if (final_softcap > 0)
    meta.emplace_back(arch + ".final_logit_softcapping", Value::of_f32(float(final_softcap)));
  if (rope_base_swa > 0)
    meta.emplace_back(arch + ".rope.freq_base_swa", Value::of_f32(float(rope_base_swa)));
  if (n_ctx_orig > 0)
    meta.emplace_back(arch + ".rope.scaling.original_context_length",
                      Value::of_u32(uint32_t(n_ctx_orig)));
  if (rope_attn_factor > 0)
    meta.emplace_back(arch + ".rope.scaling.attn_factor", Value::of_f32(float(rope_attn_factor)));
  if (yarn_orig > 0)
    meta.emplace_back(arch + ".rope.scaling.original_context_length",
                      Value::of_u32(uint32_t(yarn_orig)));
  if (yarn_beta_fast > 0)
    meta.emplace_back(arch + ".rope.scaling.yarn_beta_fast", Value::of_f32(float(yarn_beta_fast)));
  if (yarn_beta_slow > 0)
    meta.emplace_back(arch + ".rope.scaling.yarn_beta_slow", Value::of_f32(float(yarn_beta_slow)));
  if (attn_temp_scale != 0)
    meta.emplace_back(arch + ".attention.temperature_scale", Value::of_f32(float(attn_temp_scale)));
  if (rope_scale > 0) {
    meta.emplace_back(arch + ".rope.scaling.type",
                      Value::of_string(yarn_orig > 0 ? "yarn" : "linear"));
    meta.emplace_back(arch + ".rope.scaling.factor", Value::of_f32(float(rope_scale)));
  }
  // A SentencePiece vocabulary: <unk>, <s>, </s>, then "▁a", "▁b", ... and
  // "a", "b", ... so that any lowercase text encodes.
  std::vector<Value> text, scores, types;
  for (int64_t i = 0; i < n_vocab; ++i) {
    std::string t = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "";
    if (i >= 3) t = (i % 2 ? "\u2581" : "") + std::string(1, char('a' + (i - 3) / 2 % 26));
    if (i >= 3 + 52) t += std::to_string(i);  // past the alphabet: unique, never matched
    if (const size_t from = size_t(n_vocab) - extra_tokens.size(); size_t(i) >= from)
      t = extra_tokens[size_t(i) - from];
    text.push_back(Value::of_string(t));
    scores.push_back(Value::of_f32(-float(i)));
    types.push_back(Value::of_i32(i == 0 ? 2 : i < 3 ? 3 : 1));
  }
  meta.emplace_back("tokenizer.ggml.tokens", Value::of_array(gguf::ValueType::STRING, text));
  meta.emplace_back("tokenizer.ggml.scores", Value::of_array(gguf::ValueType::F32, scores));
  meta.emplace_back("tokenizer.ggml.token_type", Value::of_array(gguf::ValueType::I32, types));
  std::vector<gguf::WriteTensor> tensors;
  for (const auto& [name, d] : w.dims) {
    const auto& v = w.at(name);
    tensors.push_back({name, quant::GgmlType::F32, std::vector<int64_t>(d.rbegin(), d.rend()),
                       std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
  }
  return gguf::serialize(meta, tensors);
}

std::vector<std::string> TinyLlm::json_tokens() {
  return {"{",     "}",    "[",   "]",   "\"",  ":",        ",",           "\u2581",
          "\n",    "\\",   "-",   ".",   "_",   "0",        "1",           "2",
          "3",     "4",    "5",   "6",   "7",   "8",        "9",           "true",
          "false", "null", "{\"", "\":", "\",", "\u2581\"", "<tool_call>", "</tool_call>",
          "y",     "z"};
}

static double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double cap(double x, double c) { return c > 0 ? c * std::tanh(x / c) : x; }

// A mixture-of-experts FFN: the n_expert_used experts of highest softmax
// probability, weighted by their probabilities renormalized to sum 1.
static Vec mixture(const TinyLlm& m, const Weights& w, const std::string& b, const Vec& x) {
  Vec p = matvec(w.at(b + "ffn_gate_inp.weight"), x);
  const double mx = *std::max_element(p.begin(), p.end());
  for (double& v : p) v = std::exp(v - mx);
  std::vector<int64_t> order(size_t(m.n_expert));
  for (int64_t e = 0; e < m.n_expert; ++e) order[size_t(e)] = e;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t c) { return p[size_t(a)] > p[size_t(c)]; });
  double chosen = 0;
  for (int64_t j = 0; j < m.n_expert_used; ++j) chosen += p[size_t(order[size_t(j)])];
  // Expert e's [n_ff, n_embd] (gate, up) or [n_embd, n_ff] (down) block.
  auto slice = [&](const char* what, int64_t e) {
    const auto& all = w.at(b + what);
    const int64_t n = m.n_ff * m.n_embd;
    return std::vector<float>(all.begin() + e * n, all.begin() + (e + 1) * n);
  };
  Vec y(size_t(m.n_embd), 0.0);
  for (int64_t j = 0; j < m.n_expert_used; ++j) {
    const int64_t e = order[size_t(j)];
    Vec g = matvec(slice("ffn_gate_exps.weight", e), x),
        u = matvec(slice("ffn_up_exps.weight", e), x);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    const Vec d = matvec(slice("ffn_down_exps.weight", e), g);
    for (int64_t i = 0; i < m.n_embd; ++i) y[size_t(i)] += p[size_t(e)] / chosen * d[size_t(i)];
  }
  return y;
}

std::vector<Vec> TinyLlm::reference_logits(const std::vector<int32_t>& tokens) const {
  Weights w = make_weights(*this);
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  const size_t T = tokens.size();
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) {
    const float* e = w.at("token_embd.weight").data() + tokens[t] * n_embd;
    x[t].assign(e, e + n_embd);
    if (gemma)
      for (double& v : x[t]) v *= std::sqrt(double(n_embd));
  }
  const int64_t group = n_head / n_head_kv, qn = n_head * head_dim, kvn = n_head_kv * head_dim;
  // gemma2 caps attention scores at 50 unless the file says otherwise.
  const double acap = arch == "gemma2" ? (attn_softcap > 0 ? attn_softcap : 50.0) : 0.0;
  const double fcap = arch == "gemma2" ? (final_softcap > 0 ? final_softcap : 30.0) : final_softcap;
  auto add_norm = [&](Vec& acc, const Vec& y, const std::string& post) {
    const Vec z = gemma ? rms_norm(y, w.at(post).data(), eps) : y;
    for (int64_t i = 0; i < n_embd; ++i) acc[size_t(i)] += z[size_t(i)];
  };
  for (int64_t l = 0; l < n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    const bool swa = is_swa(*this, l);
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      Vec n1 = rms_norm(x[t], w.at(b + "attn_norm.weight").data(), eps);
      if (arch == "phi3") {
        Vec qkv = matvec(w.at(b + "attn_qkv.weight"), n1);
        q[t].assign(qkv.begin(), qkv.begin() + qn);
        k[t].assign(qkv.begin() + qn, qkv.begin() + qn + kvn);
        v[t].assign(qkv.begin() + qn + kvn, qkv.end());
      } else {
        q[t] = matvec(w.at(b + "attn_q.weight"), n1);
        k[t] = matvec(w.at(b + "attn_k.weight"), n1);
        v[t] = matvec(w.at(b + "attn_v.weight"), n1);
      }
      if (arch == "qwen2")
        for (auto [vec, nm] : {std::pair{&q[t], "attn_q"}, {&k[t], "attn_k"}, {&v[t], "attn_v"}})
          for (size_t i = 0; i < vec->size(); ++i) (*vec)[i] += w.at(b + nm + ".bias")[i];
      for (auto [vec, heads, nm] : {std::tuple{&q[t], n_head, "attn_q_norm"},
                                    std::tuple{&k[t], n_head_kv, "attn_k_norm"}}) {
        for (int64_t h = 0; h < heads; ++h) {
          double* hv = vec->data() + h * head_dim;
          if (arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3") {
            Vec n = rms_norm(Vec(hv, hv + head_dim), w.at(b + nm + ".weight").data(), eps);
            std::copy(n.begin(), n.end(), hv);
          }
          rope(hv, int64_t(t), *this, w, swa);
          // mistral3's query temperature: steps every yarn_orig positions.
          if (vec == &q[t] && attn_temp_scale != 0) {
            const double s =
                1 + attn_temp_scale * std::log(1 + std::floor(double(t) / double(yarn_orig)));
            for (int64_t i = 0; i < head_dim; ++i) hv[i] *= s;
          }
        }
      }
    }
    for (size_t t = 0; t < T; ++t) {
      // Keys j in (t - n_swa, t] on sliding layers, [0, t] otherwise.
      const size_t j0 = swa && int64_t(t) >= n_swa ? t - size_t(n_swa) + 1 : 0;
      Vec att(size_t(qn), 0.0);
      for (int64_t h = 0; h < n_head; ++h) {
        const int64_t kh = h / group;
        Vec s(t + 1);
        double mx = -1e300, sum = 0;
        for (size_t j = j0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < head_dim; ++i)
            d += q[t][h * head_dim + i] * k[j][kh * head_dim + i];
          s[j] = cap(d / std::sqrt(double(head_dim)), acap);
          mx = std::max(mx, s[j]);
        }
        for (size_t j = j0; j <= t; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (size_t j = j0; j <= t; ++j)
          for (int64_t i = 0; i < head_dim; ++i)
            att[size_t(h * head_dim + i)] += s[j] / sum * v[j][kh * head_dim + i];
      }
      add_norm(x[t], matvec(w.at(b + "attn_output.weight"), att), b + "post_attention_norm.weight");
      Vec n2 = rms_norm(x[t], w.at(b + "ffn_norm.weight").data(), eps);
      if (n_expert > 0) {
        add_norm(x[t], mixture(*this, w, b, n2), "");
        continue;
      }
      Vec g, u;
      if (arch == "phi3") {
        Vec gu = matvec(w.at(b + "ffn_up.weight"), n2);
        g.assign(gu.begin(), gu.begin() + n_ff);
        u.assign(gu.begin() + n_ff, gu.end());
      } else {
        g = matvec(w.at(b + "ffn_gate.weight"), n2);
        u = matvec(w.at(b + "ffn_up.weight"), n2);
      }
      for (size_t i = 0; i < g.size(); ++i)
        g[i] = (gemma ? gelu_tanh(g[i]) : g[i] / (1 + std::exp(-g[i]))) * u[i];
      add_norm(x[t], matvec(w.at(b + "ffn_down.weight"), g), b + "post_ffw_norm.weight");
    }
  }
  const bool head_is_embd = tied || arch == "gemma2";
  std::vector<Vec> logits(T);
  for (size_t t = 0; t < T; ++t) {
    logits[t] = matvec(w.at(head_is_embd ? "token_embd.weight" : "output.weight"),
                       rms_norm(x[t], w.at("output_norm.weight").data(), eps));
    for (double& z : logits[t]) z = cap(z, fcap);
  }
  return logits;
}

}  // namespace rlx::testing
