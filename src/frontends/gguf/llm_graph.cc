// The IR of a llama-family decoder, built from a Config and bound to the
// GGUF file's tensors. One graph serves prefill and decode: the KV cache is
// a pair of inputs per layer ([1, past, n_head_kv, head_dim]) and comes back,
// extended, as outputs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "frontends/gguf/llm_weights.h"
#include "rlx/builder.h"
#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx::llm {
namespace {

class LlmBuilder {
 public:
  LlmBuilder(const gguf::File& f, const Config& c, Weights w, Model& m)
      : c_(c), b_(m.graph), weights_(f, w, m.weights) {}

  void build(const GraphOptions& o) {
    RLX_CHECK(!o.batch || o.kv_cache, "llm graph: a batched decode graph needs the KV cache");
    batch_ = o.batch;
    RLX_CHECK(o.kv_dtype == DType::F32 || o.kv_dtype == DType::F16,
              "llm graph: the KV cache is f32 or f16, not ", dtype_name(o.kv_dtype));
    kv_dtype_ = o.kv_dtype;
    const Dim T = o.n_tokens > 0 ? Dim(o.n_tokens) : Dim::symbol("tokens");
    NodeId tokens = b_.input("tokens", Shape({T}, DType::I64));
    positions_ = b_.input("positions", Shape({T}, DType::I64));
    if (batch_) {
      const Shape keys({T, Dim(1), Dim(1), Dim::symbol("keys")}, DType::Bool);
      masks_[0] = b_.input("kv_mask", keys);
      bool sliding = false;
      for (int64_t l = 0; l < c_.n_layer; ++l) sliding = sliding || c_.is_swa(l);
      masks_[1] = sliding ? b_.input("kv_mask_swa", keys) : masks_[0];
    }
    if (c_.rope_freqs) freq_factors_ = weights_.dense(b_, "rope_freqs.weight");
    if (c_.long_rope)
      freq_factors_ = weights_.dense(
          b_, c_.long_context(o.n_ctx) ? "rope_factors_long.weight" : "rope_factors_short.weight");
    b_.set_origin("token_embd");
    NodeId x = weights_.embedding(b_, "token_embd.weight", tokens);
    if (c_.embd_scale != 1) x = scale(x, c_.embd_scale);
    for (int64_t l = 0; l < c_.n_layer; ++l) x = layer(x, l, o.kv_cache);
    b_.set_origin("output");
    x = norm(x, "output_norm.weight");
    if (!o.all_logits && !batch_)
      x = b_.op(Op::Slice, {x}, {{"axis", int64_t(0)}, {"start", int64_t(-1)}});
    NodeId logits = weights_.linear(b_, x, c_.tied_output ? "token_embd.weight" : "output.weight");
    if (c_.final_softcap > 0) logits = softcap(logits, c_.final_softcap);
    b_.graph().add_output("logits", logits);
  }

 private:
  const Config& c_;
  Builder b_;
  WeightBinder weights_;
  NodeId positions_ = -1, freq_factors_ = -1, temperature_ = -1;
  bool batch_ = false;
  DType kv_dtype_ = DType::F32;
  NodeId masks_[2] = {-1, -1};  // batch: the keys each sequence sees (global, sliding layers)
  // Rope frequency divisors per kind of layer (global, sliding): rope_freqs
  // times the linear scaling factor; -1 when neither applies.
  NodeId divisors_[2] = {-2, -2};

  NodeId scale(NodeId x, double s) { return b_.mul(x, b_.scalar(float(s))); }

  // cap * tanh(x / cap), in ggml's order.
  NodeId softcap(NodeId x, double cap) {
    return scale(b_.unary(Op::Tanh, scale(x, 1.0 / cap)), cap);
  }

  NodeId norm(NodeId x, const std::string& gamma) {
    return b_.op(Op::RmsNorm, {x, weights_.dense(b_, gamma)},
                 {{"naxes", int64_t(1)}, {"eps", c_.rms_eps}});
  }

  NodeId rope_divisors(bool swa) {
    NodeId& d = divisors_[swa];
    if (d != -2) return d;
    if (c_.yarn && !swa) {
      const int64_t pairs = c_.n_rot / 2;
      const NodeId y = b_.constant(Tensor::from_vector({pairs}, c_.yarn_divisors(), DType::F32));
      return d = freq_factors_ >= 0 ? b_.mul(freq_factors_, y) : y;
    }
    const double factor = swa ? c_.rope_scale_swa : c_.rope_scale;
    if (factor == 1) return d = freq_factors_;
    if (freq_factors_ >= 0) return d = scale(freq_factors_, factor);
    return d = b_.full({c_.n_rot / 2}, factor);
  }

  // [1, T, 1, 1]: 1 + attn_temp_scale * ln(1 + floor(position / n_ctx_orig)), per token
  // (llama.cpp's attention temperature input, its float division included).
  NodeId query_temperature() {
    if (temperature_ >= 0) return temperature_;
    NodeId p = b_.cast(positions_, DType::F32);
    p = b_.unary(Op::Floor, b_.div(p, b_.scalar(float(c_.n_ctx_orig))));
    p = b_.unary(Op::Log, b_.add(p, b_.scalar(1.0f)));
    p = b_.add(scale(p, c_.attn_temp_scale), b_.scalar(1.0f));
    return temperature_ = b_.reshape(p, {1, -1, 1, 1});
  }

  // rope_attn_factor on the rotated dims of a head, 1 on the ones rope passes through.
  NodeId rotated_dims_scale() {
    if (c_.n_rot == c_.head_dim) return b_.scalar(float(c_.rope_attn_factor));
    std::vector<float> s(size_t(c_.head_dim), 1.0f);
    std::fill_n(s.begin(), c_.n_rot, float(c_.rope_attn_factor));
    return b_.constant(Tensor::from_vector({c_.head_dim}, s, DType::F32));
  }

  // [T, H*hd] -> [1, T, H, hd] (attention's bshd layout), with the optional
  // per-head rms-norm (qwen3, gemma3) and rope applied (the sliding layers'
  // base when swa; rope takes heads first). A batch's tokens are rotated the
  // same way (each at its own position), then become [B, 1, H, hd]: one query
  // per sequence.
  NodeId heads(NodeId x, int64_t h, const std::string& qk_norm, bool rope, bool swa,
               bool query = false) {
    x = b_.reshape(x, {1, -1, h, c_.head_dim});
    if (!qk_norm.empty()) x = norm(x, qk_norm);
    if (rope) {
      std::vector<NodeId> in{b_.transpose(x, {0, 2, 1, 3}), positions_};
      if (NodeId d = rope_divisors(swa); d >= 0) in.push_back(d);
      x = b_.op(Op::Rope, in,
                {{"theta", swa ? c_.rope_base_swa : c_.rope_base},
                 {"style", c_.rope_style},
                 {"rotary_dims", c_.n_rot}});
      x = b_.transpose(x, {0, 2, 1, 3});
      if (c_.rope_attn_factor != 1) x = b_.mul(x, rotated_dims_scale());
      if (query && c_.attn_temp_scale != 0) x = b_.mul(x, query_temperature());
    }
    return batch_ ? b_.reshape(x, {-1, 1, h, c_.head_dim}) : x;
  }

  NodeId project(NodeId x, const std::string& blk, const std::string& what) {
    NodeId y = weights_.linear(b_, x, blk + what + ".weight");
    if (c_.qkv_bias) y = b_.add(y, weights_.dense(b_, blk + what + ".bias"));
    return y;
  }

  // Columns [start, start + n) of x [T, N].
  NodeId columns(NodeId x, int64_t start, int64_t n) {
    return b_.op(Op::Slice, {x}, {{"axis", int64_t(1)}, {"start", start}, {"end", start + n}});
  }

  // The cache [B, past, H, hd] with the fresh keys or values appended: the
  // token axis comes first, so the past is a prefix of the result and the
  // runtime appends in place (Session::run) instead of copying the cache.
  NodeId cached(NodeId fresh, const std::string& name, bool kv_cache) {
    if (!kv_cache) return fresh;
    const Dim b = batch_ ? Dim::symbol("tokens") : Dim(1);
    Shape s({b, Dim::symbol("past"), Dim(c_.n_head_kv), Dim(c_.head_dim)}, kv_dtype_);
    if (kv_dtype_ != DType::F32) fresh = b_.cast(fresh, kv_dtype_);
    NodeId all = b_.concat({b_.input(name, s), fresh}, 1);
    b_.graph().add_output(name, all);
    return all;
  }

  NodeId attention(NodeId n1, int64_t l, const std::string& blk, bool kv_cache) {
    const int64_t qn = c_.n_head * c_.head_dim, kvn = c_.n_head_kv * c_.head_dim;
    NodeId q, k, v;
    if (c_.fused_qkv) {  // phi3: rows q, then k, then v
      NodeId qkv = project(n1, blk, "attn_qkv");
      q = columns(qkv, 0, qn);
      k = columns(qkv, qn, kvn);
      v = columns(qkv, qn + kvn, kvn);
    } else {
      q = project(n1, blk, "attn_q");
      k = project(n1, blk, "attn_k");
      v = project(n1, blk, "attn_v");
    }
    const bool swa = c_.is_swa(l);
    q = heads(q, c_.n_head, c_.qk_norm ? blk + "attn_q_norm.weight" : "", true, swa, true);
    k = heads(k, c_.n_head_kv, c_.qk_norm ? blk + "attn_k_norm.weight" : "", true, swa);
    v = heads(v, c_.n_head_kv, "", false, swa);
    k = cached(k, "cache_k." + std::to_string(l), kv_cache);
    v = cached(v, "cache_v." + std::to_string(l), kv_cache);
    Attrs a{{"mask", std::string(batch_ ? "bias"
                                 : swa  ? "sliding"
                                        : "causal")},
            {"scale", c_.attn_scale},
            {"layout", std::string("bshd")}};
    if (swa && !batch_) a.set("window", c_.n_swa);
    if (c_.attn_softcap > 0) a.set("softcap", c_.attn_softcap);
    std::vector<NodeId> qkv{q, k, v};
    if (batch_) qkv.push_back(masks_[swa]);
    NodeId o = b_.op(Op::Attention, qkv, a);
    o = b_.reshape(o, {-1, qn});  // [B, S, H, hd]: rows of heads
    return weights_.linear(b_, o, blk + "attn_output.weight");
  }

  NodeId ffn(NodeId n2, const std::string& blk) {
    NodeId gate, up;
    if (c_.fused_gate_up) {  // phi3: rows gate, then up
      NodeId gu = weights_.linear(b_, n2, blk + "ffn_up.weight");
      gate = columns(gu, 0, c_.n_ff);
      up = columns(gu, c_.n_ff, c_.n_ff);
    } else {
      gate = weights_.linear(b_, n2, blk + "ffn_gate.weight");
      up = weights_.linear(b_, n2, blk + "ffn_up.weight");
    }
    gate = b_.unary(c_.ffn_act == "gelu_tanh" ? Op::GeluTanh : Op::Silu, gate);
    return weights_.linear(b_, b_.mul(gate, up), blk + "ffn_down.weight");
  }

  // A mixture of experts, routed as llama.cpp's build_moe_ffn does for
  // llama and qwen3moe: softmax over the router's logits, the top
  // n_expert_used, their probabilities renormalized (the sum clamped to f16's
  // smallest normal).
  NodeId moe(NodeId x, const std::string& blk) {
    NodeId probs = b_.softmax(weights_.linear(b_, x, blk + "ffn_gate_inp.weight"));
    std::vector<NodeId> top = b_.results(Op::TopK, {probs}, {{"k", c_.n_expert_used}});
    NodeId sum =
        b_.op(Op::Clamp, {b_.reduce(Op::ReduceSum, top[0], {-1}, true)}, {{"min", 6.103515625e-5}});
    NodeId w = b_.div(top[0], sum);
    if (c_.expert_weights_scale != 0 && c_.expert_weights_scale != 1)
      w = scale(w, c_.expert_weights_scale);
    std::string gs, us, ds;
    NodeId gate = weights_.experts(b_, blk + "ffn_gate_exps.weight", gs);
    NodeId up = weights_.experts(b_, blk + "ffn_up_exps.weight", us);
    NodeId down = weights_.experts(b_, blk + "ffn_down_exps.weight", ds);
    return b_.op(Op::MoeFfn, {x, top[1], w, gate, up, down},
                 {{"experts", c_.n_expert},
                  {"gate_scheme", gs},
                  {"up_scheme", us},
                  {"down_scheme", ds},
                  {"activation", std::string(c_.ffn_act)}});
  }

  NodeId layer(NodeId x, int64_t l, bool kv_cache) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    b_.set_origin(blk.substr(0, blk.size() - 1));
    NodeId a = attention(norm(x, blk + "attn_norm.weight"), l, blk, kv_cache);
    if (c_.post_norms) a = norm(a, blk + "post_attention_norm.weight");
    x = b_.add(x, a);
    NodeId n2 = norm(x, blk + "ffn_norm.weight");
    NodeId f = c_.n_expert > 0 ? moe(n2, blk) : ffn(n2, blk);
    if (c_.post_norms) f = norm(f, blk + "post_ffw_norm.weight");
    return b_.add(x, f);
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
