// The LLM session (prefill / decode over the KV-cache graph) lives in the
// umbrella because it needs both the GGUF frontend and the runtime: the cache
// tensors returned by one run are the cache inputs of the next, so the prompt
// is never re-run.
#include <algorithm>

#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx::llm {

namespace {

// The element type of the graph's KV cache inputs (f32 when it has none).
DType cache_dtype(const Executable& exe) {
  const Graph& g = exe.graph();
  for (NodeId id : g.inputs())
    if (g.node(id).name == "cache_k.0") return g.node(id).shape.dtype;
  return DType::F32;
}

// `cache` [1, n, H, hd] with one token's row (`size` bytes) after it: written
// into the buffer's headroom when the cache ends where the buffer's claim
// ends (its own last result, as Session::run appends), else into a copy
// with half as much again as headroom for the next steps.
Tensor appended(const Tensor& cache, const std::byte* row, size_t size) {
  Dims dims = cache.dims();
  ++dims[1];
  const auto* old = static_cast<const std::byte*>(cache.raw());
  std::optional<Tensor> grown = cache.grown_in_place(dims);
  if (!grown) {
    grown = Tensor(make_growable_buffer(cache.nbytes() + size), 0, dims, cache.dtype());
    std::copy_n(old, cache.nbytes(), static_cast<std::byte*>(grown->raw()));
  }
  std::copy_n(row, size, static_cast<std::byte*>(grown->raw()) + cache.nbytes());
  return *grown;
}

}  // namespace

Session::Session(std::shared_ptr<const Executable> exe, Config c)
    : c_(std::move(c)), kv_dtype_(cache_dtype(*exe)), session_(std::move(exe)) {
  reset();
}

void Session::reset() {
  cache_.clear();
  for (int64_t l = 0; l < c_.n_layer; ++l)
    for (const char* kv : {"cache_k.", "cache_v."})
      cache_[kv + std::to_string(l)] = Tensor({1, 0, c_.n_head_kv, c_.head_dim}, kv_dtype_);
  tokens_.clear();
}

void Session::truncate(int64_t n) {
  RLX_CHECK(n >= 0 && n <= n_past(), "llm session: cannot keep ", n, " of ", n_past(), " tokens");
  if (n == n_past()) return;
  if (n == 0) return reset();
  for (auto& [name, t] : cache_)  // [1, P, H, hd] -> its first n rows, a view
    t = Tensor(t.buffer(), t.offset(), {1, n, t.dims()[2], t.dims()[3]}, t.dtype());
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

namespace rlx::llm {

BatchDecoder::BatchDecoder(std::shared_ptr<const Executable> batched, Config c)
    : c_(std::move(c)), kv_dtype_(cache_dtype(*batched)), session_(std::move(batched)) {}

std::vector<std::vector<float>> BatchDecoder::feed(std::span<Session* const> sessions,
                                                   std::span<const int32_t> tokens) {
  const int64_t B = int64_t(sessions.size());
  RLX_CHECK(B > 0 && size_t(B) == tokens.size(), "llm batch: ", B, " sessions for ", tokens.size(),
            " tokens");
  for (const Session* s : sessions)
    RLX_CHECK(s->kv_dtype_ == kv_dtype_, "llm batch: a session's KV cache is ",
              dtype_name(s->kv_dtype_), " but the batched graph's is ", dtype_name(kv_dtype_));
  int64_t P = 0;  // the longest cache: every other is padded to it
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  for (const Session* s : sessions) P = std::max(P, s->n_past());
  TensorMap in = token_inputs(ids, 0, c_.n_vocab);
  int64_t* pos = in.at("positions").data<int64_t>();
  // Sequence b sees its own keys [0, n_past) and its new one at P; sliding
  // layers the last n_swa of those.
  Tensor mask({B, 1, 1, P + 1}, DType::Bool), mask_swa({B, 1, 1, P + 1}, DType::Bool);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = sessions[size_t(b)]->n_past();
    pos[b] = n;
    bool* m = mask.data<bool>() + b * (P + 1);
    bool* w = mask_swa.data<bool>() + b * (P + 1);
    for (int64_t j = 0; j <= P; ++j) {
      const bool own = j < n || j == P;
      const int64_t position = j == P ? n : j;
      m[j] = own;
      w[j] = own && (c_.n_swa <= 0 || n - position < c_.n_swa);
    }
  }
  in["kv_mask"] = mask;
  bool sliding = false;
  for (int64_t l = 0; l < c_.n_layer; ++l) sliding = sliding || c_.is_swa(l);
  if (sliding) in["kv_mask_swa"] = mask_swa;
  // One token's keys or values, in bytes.
  const DType kv = kv_dtype_;
  const size_t row = size_t(c_.n_head_kv * c_.head_dim) * dtype_size(kv);
  auto bytes = [](const Tensor& t) { return static_cast<std::byte*>(t.raw()); };
  // Padding keys are masked but multiplied by zero weights: they must be
  // finite (the tensor starts zeroed).
  for (const auto& [name, first] : sessions[0]->cache_) {
    Tensor batch({B, P, c_.n_head_kv, c_.head_dim}, kv);
    for (int64_t b = 0; b < B; ++b) {
      const Tensor& t = sessions[size_t(b)]->cache_.at(name);
      std::copy_n(bytes(t), t.nbytes(), bytes(batch) + size_t(b * P) * row);
    }
    in[name] = std::move(batch);
  }
  TensorMap out = session_.run(in);
  // [B, P + 1, H, hd]: each session's keys, then its new one at P, appended
  // to the session's own cache.
  for (auto& [name, grown] : out) {
    if (name == "logits") continue;
    for (int64_t b = 0; b < B; ++b) {
      Session& s = *sessions[size_t(b)];
      Tensor& cache = s.cache_[name];
      cache = appended(cache, bytes(grown) + size_t(b * (P + 1) + P) * row, row);
    }
  }
  std::vector<std::vector<float>> logits(static_cast<size_t>(B));
  const float* l = out.at("logits").data<float>();
  for (int64_t b = 0; b < B; ++b) {
    logits[size_t(b)].assign(l + b * c_.n_vocab, l + (b + 1) * c_.n_vocab);
    sessions[size_t(b)]->tokens_.push_back(tokens[size_t(b)]);
  }
  return logits;
}

}  // namespace rlx::llm
