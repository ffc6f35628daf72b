// The IR of a llama-family decoder, built from a Config and bound to the
// GGUF file's tensors. One graph serves prefill and decode: the KV cache is
// a pair of inputs per layer and comes back, extended, as outputs.
#include <cmath>

#include "frontends/gguf/llm_weights.h"
#include "rlx/builder.h"
#include "rlx/llm.h"

namespace rlx::llm {
namespace {

class LlmBuilder {
 public:
  LlmBuilder(const gguf::File& f, const Config& c, Weights w, Model& m)
      : c_(c), b_(m.graph), weights_(f, w, m.weights) {}

  void build(const GraphOptions& o) {
    const Dim T = o.n_tokens > 0 ? Dim(o.n_tokens) : Dim::symbol("tokens");
    NodeId tokens = b_.input("tokens", Shape({T}, DType::I64));
    positions_ = b_.input("positions", Shape({T}, DType::I64));
    if (c_.rope_freqs) freq_factors_ = weights_.dense(b_, "rope_freqs.weight");
    b_.set_origin("token_embd");
    NodeId x = weights_.embedding(b_, "token_embd.weight", tokens);
    for (int64_t l = 0; l < c_.n_layer; ++l) x = layer(x, l, o.kv_cache);
    b_.set_origin("output");
    x = norm(x, "output_norm.weight");
    if (!o.all_logits) x = b_.op(Op::Slice, {x}, {{"axis", int64_t(0)}, {"start", int64_t(-1)}});
    NodeId logits = weights_.linear(b_, x, c_.tied_output ? "token_embd.weight" : "output.weight");
    b_.graph().add_output("logits", logits);
  }

 private:
  const Config& c_;
  Builder b_;
  WeightBinder weights_;
  NodeId positions_ = -1, freq_factors_ = -1;

  NodeId norm(NodeId x, const std::string& gamma) {
    return b_.op(Op::RmsNorm, {x, weights_.dense(b_, gamma)},
                 {{"naxes", int64_t(1)}, {"eps", c_.rms_eps}});
  }

  // [T, H*hd] -> [1, H, T, hd], with the optional per-head rms-norm (qwen3)
  // and rope applied.
  NodeId heads(NodeId x, int64_t h, const std::string& qk_norm, bool rope) {
    x = b_.reshape(x, {1, -1, h, c_.head_dim});
    if (!qk_norm.empty()) x = norm(x, qk_norm);
    x = b_.transpose(x, {0, 2, 1, 3});
    if (!rope) return x;
    std::vector<NodeId> in{x, positions_};
    if (freq_factors_ >= 0) in.push_back(freq_factors_);
    return b_.op(Op::Rope, in,
                 {{"theta", c_.rope_base}, {"style", c_.rope_style}, {"rotary_dims", c_.n_rot}});
  }

  NodeId project(NodeId x, const std::string& blk, const std::string& what) {
    NodeId y = weights_.linear(b_, x, blk + what + ".weight");
    if (c_.qkv_bias && (what == "attn_q" || what == "attn_k" || what == "attn_v"))
      y = b_.add(y, weights_.dense(b_, blk + what + ".bias"));
    return y;
  }

  NodeId cached(NodeId fresh, const std::string& name, bool kv_cache) {
    if (!kv_cache) return fresh;
    Shape s({Dim(1), Dim(c_.n_head_kv), Dim::symbol("past"), Dim(c_.head_dim)}, DType::F32);
    NodeId all = b_.concat({b_.input(name, s), fresh}, 2);
    b_.graph().add_output(name, all);
    return all;
  }

  NodeId layer(NodeId x, int64_t l, bool kv_cache) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    b_.set_origin(blk.substr(0, blk.size() - 1));
    NodeId n1 = norm(x, blk + "attn_norm.weight");
    NodeId q = heads(project(n1, blk, "attn_q"), c_.n_head,
                     c_.qk_norm ? blk + "attn_q_norm.weight" : "", true);
    NodeId k = heads(project(n1, blk, "attn_k"), c_.n_head_kv,
                     c_.qk_norm ? blk + "attn_k_norm.weight" : "", true);
    NodeId v = heads(project(n1, blk, "attn_v"), c_.n_head_kv, "", false);
    k = cached(k, "cache_k." + std::to_string(l), kv_cache);
    v = cached(v, "cache_v." + std::to_string(l), kv_cache);
    NodeId a =
        b_.op(Op::Attention, {q, k, v},
              {{"mask", std::string("causal")}, {"scale", 1.0 / std::sqrt(double(c_.head_dim))}});
    a = b_.reshape(b_.transpose(a, {0, 2, 1, 3}), {-1, c_.n_head * c_.head_dim});
    x = b_.add(x, weights_.linear(b_, a, blk + "attn_output.weight"));
    NodeId n2 = norm(x, blk + "ffn_norm.weight");
    NodeId gate = b_.unary(Op::Silu, weights_.linear(b_, n2, blk + "ffn_gate.weight"));
    NodeId up = weights_.linear(b_, n2, blk + "ffn_up.weight");
    return b_.add(x, weights_.linear(b_, b_.mul(gate, up), blk + "ffn_down.weight"));
  }
};

}  // namespace

Model build_model(const gguf::File& f, const Config& c, const GraphOptions& o, Weights w) {
  Model m;
  m.source = f.source;
  m.format = "gguf-" + c.arch;
  LlmBuilder(f, c, w, m).build(o);
  return m;
}

}  // namespace rlx::llm
