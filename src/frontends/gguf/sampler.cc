// Token sampling in llama.cpp's order: repetition penalty, top-k, top-p,
// min-p, temperature, then a seeded draw (argmax when greedy).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "rlx/error.h"
#include "rlx/llm.h"

namespace rlx::llm {

Sampler::Sampler(SamplerOptions o) : o_(o), state_(o.seed * 0x9E3779B97F4A7C15ull + 1) {
  RLX_CHECK(o.top_p > 0, "sampler: top-p must be > 0, got ", o.top_p);
  RLX_CHECK(o.repeat_penalty > 0, "sampler: repeat penalty must be > 0, got ", o.repeat_penalty);
}

// splitmix64: small, seedable and the same on every platform.
double Sampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

std::vector<float> Sampler::penalized(std::span<const float> logits,
                                      std::span<const int32_t> history) const {
  const int64_t n = int64_t(logits.size());
  RLX_CHECK(n > 0, "sampler: empty logits");
  std::vector<float> l(logits.begin(), logits.end());
  if (o_.repeat_penalty != 1.0f && o_.repeat_last_n != 0) {
    size_t from = o_.repeat_last_n < 0 || size_t(o_.repeat_last_n) >= history.size()
                      ? 0
                      : history.size() - size_t(o_.repeat_last_n);
    std::unordered_set<int32_t> seen(history.begin() + long(from), history.end());
    for (int32_t t : seen)
      if (t >= 0 && t < n)
        l[size_t(t)] =
            l[size_t(t)] > 0 ? l[size_t(t)] / o_.repeat_penalty : l[size_t(t)] * o_.repeat_penalty;
  }
  return l;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const std::vector<float> l = penalized(logits, history);
  if (o_.temperature <= 0) return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  // Candidates sorted by logit, cut by top-k.
  std::vector<int32_t> idx(l.size());
  std::iota(idx.begin(), idx.end(), 0);
  size_t k = o_.top_k > 0 ? std::min<size_t>(size_t(o_.top_k), idx.size()) : idx.size();
  auto by_logit = [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; };
  std::partial_sort(idx.begin(), idx.begin() + long(k), idx.end(), by_logit);
  idx.resize(k);
  return draw(l, std::move(idx));
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                        const TokenFilter& allowed) {
  if (!allowed) return sample(logits, history);
  const std::vector<float> l = penalized(logits, history);
  const size_t want = o_.temperature <= 0 ? 1 : o_.top_k > 0 ? size_t(o_.top_k) : l.size();
  std::vector<int32_t> order, kept;
  for (size_t t = 0; t < l.size(); ++t)
    if (l[t] != -INFINITY) order.push_back(int32_t(t));
  // Sorted a block at a time, each twice the last, so the usual case (the first few
  // candidates pass) costs one selection over the vocabulary.
  auto by_logit = [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; };
  for (size_t sorted = 0; sorted < order.size() && kept.size() < want;) {
    const size_t upto = std::min(order.size(), std::max<size_t>(64, 2 * sorted));
    std::nth_element(order.begin() + long(sorted), order.begin() + long(upto - 1), order.end(),
                     by_logit);
    std::sort(order.begin() + long(sorted), order.begin() + long(upto), by_logit);
    for (; sorted < upto && kept.size() < want; ++sorted)
      if (allowed(order[sorted])) kept.push_back(order[sorted]);
  }
  if (kept.empty()) return -1;
  if (o_.temperature <= 0) return kept[0];
  return draw(l, std::move(kept));
}

// idx: candidates in falling logit order (at least one).
int32_t Sampler::draw(const std::vector<float>& l, std::vector<int32_t> idx) {
  // Probabilities at temperature 1 decide the top-p / min-p cuts (as llama.cpp
  // applies them before the temperature).
  auto softmax = [&](float temp) {
    std::vector<double> p(idx.size());
    double mx = l[size_t(idx[0])], sum = 0;
    for (size_t i = 0; i < idx.size(); ++i) sum += p[i] = std::exp((l[size_t(idx[i])] - mx) / temp);
    for (double& v : p) v /= sum;
    return p;
  };
  std::vector<double> p = softmax(1.0f);
  if (o_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = p.size();
    for (size_t i = 0; i < p.size(); ++i)
      if ((cum += p[i]) >= o_.top_p) {
        keep = i + 1;
        break;
      }
    idx.resize(keep);
  }
  if (o_.min_p > 0) {
    size_t keep = 1;
    while (keep < idx.size() && p[keep] >= o_.min_p * p[0]) ++keep;
    idx.resize(keep);
  }
  p = softmax(o_.temperature);
  double r = uniform(), cum = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if ((cum += p[i]) > r) return idx[i];
  return idx.back();
}

}  // namespace rlx::llm
