#include "support/tiny_llm.h"

#include <cmath>
#include <map>
#include <random>

namespace rlx::testing {
namespace {

using Vec = std::vector<double>;

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
  w.add("token_embd.weight", {m.n_vocab, m.n_embd}, rng, 0, 1.0f);
  for (int64_t l = 0; l < m.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    w.add(b + "attn_norm.weight", {m.n_embd}, rng, 1, 0.1f);
    w.add(b + "attn_q.weight", {q, m.n_embd}, rng, 0, 0.2f);
    w.add(b + "attn_k.weight", {kv, m.n_embd}, rng, 0, 0.2f);
    w.add(b + "attn_v.weight", {kv, m.n_embd}, rng, 0, 0.2f);
    w.add(b + "attn_output.weight", {m.n_embd, q}, rng, 0, 0.2f);
    if (m.arch == "qwen2") {
      w.add(b + "attn_q.bias", {q}, rng, 0, 0.1f);
      w.add(b + "attn_k.bias", {kv}, rng, 0, 0.1f);
      w.add(b + "attn_v.bias", {kv}, rng, 0, 0.1f);
    }
    if (m.arch == "qwen3") {
      w.add(b + "attn_q_norm.weight", {m.head_dim}, rng, 1, 0.1f);
      w.add(b + "attn_k_norm.weight", {m.head_dim}, rng, 1, 0.1f);
    }
    w.add(b + "ffn_norm.weight", {m.n_embd}, rng, 1, 0.1f);
    w.add(b + "ffn_gate.weight", {m.n_ff, m.n_embd}, rng, 0, 0.2f);
    w.add(b + "ffn_up.weight", {m.n_ff, m.n_embd}, rng, 0, 0.2f);
    w.add(b + "ffn_down.weight", {m.n_embd, m.n_ff}, rng, 0, 0.2f);
  }
  w.add("output_norm.weight", {m.n_embd}, rng, 1, 0.1f);
  if (!m.tied) w.add("output.weight", {m.n_vocab, m.n_embd}, rng, 0, 0.2f);
  if (m.rope_freqs) w.add("rope_freqs.weight", {m.n_rot / 2}, rng, 1.5f, 0.3f);
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

void rope(double* v, int64_t pos, const TinyLlm& m, const Weights& w) {
  const bool neox = m.arch != "llama";
  for (int64_t i = 0; i < m.n_rot / 2; ++i) {
    double theta = double(pos) * std::pow(m.rope_base, -2.0 * double(i) / double(m.n_rot));
    if (m.rope_freqs) theta /= double(w.at("rope_freqs.weight")[size_t(i)]);
    int64_t a = neox ? i : 2 * i, b = neox ? i + m.n_rot / 2 : 2 * i + 1;
    double x0 = v[a], x1 = v[b];
    v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
    v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
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
      {arch + ".context_length", Value::of_u32(256)},
      {"tokenizer.ggml.model", Value::of_string("llama")},
      {"tokenizer.ggml.bos_token_id", Value::of_u32(1)},
      {"tokenizer.ggml.eos_token_id", Value::of_u32(2)},
  };
  // A SentencePiece vocabulary: <unk>, <s>, </s>, then "▁a", "▁b", ... and
  // "a", "b", ... so that any lowercase text encodes.
  std::vector<Value> text, scores, types;
  for (int64_t i = 0; i < n_vocab; ++i) {
    std::string t = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "";
    if (i >= 3) t = (i % 2 ? "\u2581" : "") + std::string(1, char('a' + (i - 3) / 2 % 26));
    if (i >= 3 + 52) t += std::to_string(i);  // past the alphabet: unique, never matched
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

std::vector<Vec> TinyLlm::reference_logits(const std::vector<int32_t>& tokens) const {
  Weights w = make_weights(*this);
  const size_t T = tokens.size();
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) {
    const float* e = w.at("token_embd.weight").data() + tokens[t] * n_embd;
    x[t].assign(e, e + n_embd);
  }
  const int64_t group = n_head / n_head_kv;
  for (int64_t l = 0; l < n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      Vec n1 = rms_norm(x[t], w.at(b + "attn_norm.weight").data(), eps);
      q[t] = matvec(w.at(b + "attn_q.weight"), n1);
      k[t] = matvec(w.at(b + "attn_k.weight"), n1);
      v[t] = matvec(w.at(b + "attn_v.weight"), n1);
      if (arch == "qwen2")
        for (auto [vec, nm] : {std::pair{&q[t], "attn_q"}, {&k[t], "attn_k"}, {&v[t], "attn_v"}})
          for (size_t i = 0; i < vec->size(); ++i) (*vec)[i] += w.at(b + nm + ".bias")[i];
      for (auto [vec, heads, nm] : {std::tuple{&q[t], n_head, "attn_q_norm"},
                                    std::tuple{&k[t], n_head_kv, "attn_k_norm"}}) {
        for (int64_t h = 0; h < heads; ++h) {
          double* hv = vec->data() + h * head_dim;
          if (arch == "qwen3") {
            Vec n = rms_norm(Vec(hv, hv + head_dim), w.at(b + nm + ".weight").data(), eps);
            std::copy(n.begin(), n.end(), hv);
          }
          rope(hv, int64_t(t), *this, w);
        }
      }
    }
    for (size_t t = 0; t < T; ++t) {
      Vec att(size_t(n_head * head_dim), 0.0);
      for (int64_t h = 0; h < n_head; ++h) {
        const int64_t kh = h / group;
        Vec s(t + 1);
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < head_dim; ++i)
            d += q[t][h * head_dim + i] * k[j][kh * head_dim + i];
          s[j] = d / std::sqrt(double(head_dim));
          mx = std::max(mx, s[j]);
        }
        for (double& sj : s) sum += sj = std::exp(sj - mx);
        for (size_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < head_dim; ++i)
            att[size_t(h * head_dim + i)] += s[j] / sum * v[j][kh * head_dim + i];
      }
      Vec o = matvec(w.at(b + "attn_output.weight"), att);
      for (int64_t i = 0; i < n_embd; ++i) x[t][i] += o[i];
      Vec n2 = rms_norm(x[t], w.at(b + "ffn_norm.weight").data(), eps);
      Vec g = matvec(w.at(b + "ffn_gate.weight"), n2), u = matvec(w.at(b + "ffn_up.weight"), n2);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      Vec d = matvec(w.at(b + "ffn_down.weight"), g);
      for (int64_t i = 0; i < n_embd; ++i) x[t][i] += d[i];
    }
  }
  std::vector<Vec> logits(T);
  for (size_t t = 0; t < T; ++t)
    logits[t] = matvec(w.at(tied ? "token_embd.weight" : "output.weight"),
                       rms_norm(x[t], w.at("output_norm.weight").data(), eps));
  return logits;
}

}  // namespace rlx::testing
