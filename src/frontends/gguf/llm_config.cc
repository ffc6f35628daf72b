// Hyper-parameters of a llama-family GGUF model, checked against its tensors.
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
  RLX_CHECK(c.arch == "llama" || c.arch == "qwen2" || c.arch == "qwen3", f.source,
            ": architecture '", c.arch, "' is not supported (llama, qwen2, qwen3)");
  Meta m{f, c.arch};
  c.n_layer = m.integer("block_count");
  c.n_embd = m.integer("embedding_length");
  c.n_ff = m.integer("feed_forward_length");
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
  if (const gguf::Value* s = m.find("rope.scaling.type"); s && s->type == gguf::ValueType::STRING)
    RLX_CHECK(s->as_string() == "none" || s->as_string() == "", f.source, ": rope scaling '",
              s->as_string(), "' is not supported");
  c.rope_style = c.arch == "llama" ? "interleaved" : "neox";

  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  RLX_CHECK(emb && emb->ne.size() == 2, f.source, ": tensor 'token_embd.weight' is missing");
  c.n_vocab = emb->ne[1];
  expect_tensor(f, "token_embd.weight", {c.n_vocab, c.n_embd});
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (!c.tied_output) expect_tensor(f, "output.weight", {c.n_vocab, c.n_embd});
  expect_tensor(f, "output_norm.weight", {c.n_embd});
  c.rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  if (c.rope_freqs) expect_tensor(f, "rope_freqs.weight", {c.n_rot / 2});
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;

  // Checked: head counts and sizes are untrusted metadata.
  const int64_t q = checked_mul(c.n_head, c.head_dim, f.source + ": q size"),
                kv = checked_mul(c.n_head_kv, c.head_dim, f.source + ": kv size");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    expect_tensor(f, b + "attn_norm.weight", {c.n_embd});
    expect_tensor(f, b + "attn_q.weight", {q, c.n_embd});
    expect_tensor(f, b + "attn_k.weight", {kv, c.n_embd});
    expect_tensor(f, b + "attn_v.weight", {kv, c.n_embd});
    expect_tensor(f, b + "attn_output.weight", {c.n_embd, q});
    expect_tensor(f, b + "ffn_norm.weight", {c.n_embd});
    expect_tensor(f, b + "ffn_gate.weight", {c.n_ff, c.n_embd});
    expect_tensor(f, b + "ffn_up.weight", {c.n_ff, c.n_embd});
    expect_tensor(f, b + "ffn_down.weight", {c.n_embd, c.n_ff});
    if (c.qkv_bias) {
      expect_tensor(f, b + "attn_q.bias", {q});
      expect_tensor(f, b + "attn_k.bias", {kv});
      expect_tensor(f, b + "attn_v.bias", {kv});
    }
    if (c.qk_norm) {
      expect_tensor(f, b + "attn_q_norm.weight", {c.head_dim});
      expect_tensor(f, b + "attn_k_norm.weight", {c.head_dim});
    }
  }
  return c;
}

std::string Config::summary() const {
  std::ostringstream s;
  s << arch << ": " << n_layer << " layers, d=" << n_embd << ", " << n_head << "/" << n_head_kv
    << " heads x " << head_dim << ", ff " << n_ff << ", vocab " << n_vocab << ", rope "
    << rope_style << " base " << rope_base << (tied_output ? ", tied output" : "")
    << (qkv_bias ? ", qkv bias" : "") << (qk_norm ? ", q/k norm" : "");
  return s.str();
}

}  // namespace rlx::llm
