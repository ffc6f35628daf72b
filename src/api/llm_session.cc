// The LLM session (prefill / decode over the KV-cache graph) lives in the
// umbrella because it needs both the GGUF frontend and the runtime: the cache
// tensors returned by one run are the cache inputs of the next, so the prompt
// is never re-run.
#include <algorithm>

#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx::llm {

Session::Session(std::shared_ptr<const Executable> exe, Config c)
    : c_(std::move(c)), session_(std::move(exe)) {
  reset();
}

void Session::reset() {
  cache_.clear();
  for (int64_t l = 0; l < c_.n_layer; ++l)
    for (const char* kv : {"cache_k.", "cache_v."})
      cache_[kv + std::to_string(l)] = Tensor({1, c_.n_head_kv, 0, c_.head_dim}, DType::F32);
  tokens_.clear();
}

void Session::truncate(int64_t n) {
  RLX_CHECK(n >= 0 && n <= n_past(), "llm session: cannot keep ", n, " of ", n_past(), " tokens");
  if (n == n_past()) return;
  if (n == 0) return reset();
  for (auto& [name, t] : cache_) {  // [1, H, P, hd] -> [1, H, n, hd]
    const int64_t heads = t.dims()[1], past = t.dims()[2], hd = t.dims()[3];
    Tensor kept({1, heads, n, hd}, DType::F32);
    for (int64_t h = 0; h < heads; ++h)
      std::copy_n(t.data<float>() + h * past * hd, n * hd, kept.data<float>() + h * n * hd);
    t = kept;
  }
  tokens_.resize(size_t(n));
}

TensorMap token_inputs(std::span<const int32_t> tokens, int64_t first_position, int64_t n_vocab) {
  const int64_t n = int64_t(tokens.size());
  Tensor ids({n}, DType::I64), pos({n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = tokens[size_t(i)];
    RLX_CHECK(t >= 0 && t < n_vocab, "token ", t, " is outside the vocabulary of ", n_vocab);
    ids.data<int64_t>()[i] = t;
    pos.data<int64_t>()[i] = first_position + i;
  }
  return {{"tokens", ids}, {"positions", pos}};
}

std::vector<float> Session::feed(std::span<const int32_t> tokens) {
  const int64_t n = int64_t(tokens.size());
  RLX_CHECK(n > 0, "llm session: no tokens to feed");
  TensorMap in = token_inputs(tokens, n_past(), c_.n_vocab);
  in.insert(cache_.begin(), cache_.end());
  TensorMap out = session_.run(in);
  for (auto& [name, t] : cache_) t = out.at(name);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  const Tensor& logits = out.at("logits");
  const float* last = logits.data<float>() + (logits.numel() - c_.n_vocab);
  return std::vector<float>(last, last + c_.n_vocab);
}

}  // namespace rlx::llm
