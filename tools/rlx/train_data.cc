#include "train_data.h"

#include <unistd.h>

#include <cstring>
#include <random>

namespace rlx::cli {

DataSet load_data(const std::string& path, const train::Trainer& trainer) {
  DataSet d;
  d.path = path;
  TensorMap all = read_safetensors(path);
  std::string held;
  for (const auto& [name, t] : all) held += (held.empty() ? "" : ", ") + name;
  for (const std::string& name : trainer.data_inputs()) {
    auto it = all.find(name);
    RLX_CHECK(it != all.end(), path, ": no tensor for the model's input '", name,
              "' (the file holds ", held.empty() ? "nothing" : held, ")");
    const Tensor& t = it->second;
    RLX_CHECK(t.rank() >= 1, path, ": '", name, "' is ", t.shape().str(),
              "; data tensors need a leading sample dim");
    if (d.tensors.empty()) d.samples = t.dim(0);
    RLX_CHECK(t.dim(0) == d.samples, path, ": '", name, "' has ", t.dim(0), " samples but '",
              d.tensors.begin()->first, "' has ", d.samples, " (the leading dims must agree)");
    d.tensors[name] = t.contiguous();
    all.erase(it);
  }
  RLX_CHECK(all.empty(), path, ": '", all.empty() ? "" : all.begin()->first,
            "' is not an input of the model");
  RLX_CHECK(d.samples > 0, path, ": the data set has no samples");
  return d;
}

std::vector<int64_t> epoch_order(int64_t samples, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) order[size_t(i)] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch) + 1);
  for (int64_t i = samples - 1; i > 0; --i)
    std::swap(order[size_t(i)], order[size_t(rng() % uint64_t(i + 1))]);
  return order;
}

TensorMap gather_batch(const DataSet& d, const std::vector<int64_t>& order, int64_t begin,
                       int64_t end) {
  TensorMap batch;
  for (const auto& [name, t] : d.tensors) {
    Dims dims = t.dims();
    dims[0] = end - begin;
    Tensor b = Tensor::uninitialized(dims, t.dtype());
    const size_t row = t.nbytes() / size_t(d.samples);
    auto* dst = static_cast<std::byte*>(b.raw());
    const auto* src = static_cast<const std::byte*>(t.raw());
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(dst + size_t(i - begin) * row, src + size_t(order[size_t(i)]) * row, row);
    batch[name] = b;
  }
  return batch;
}

std::string label_input(const train::Trainer& trainer, const TensorMap& batch) {
  bool logits = false;
  for (const auto& o : trainer.model().graph.outputs()) logits = logits || o.name == "logits";
  if (!logits) return "";
  for (const char* name : {"target", "targets", "labels", "label"}) {
    auto it = batch.find(name);
    if (it != batch.end() && is_integer(it->second.dtype()) && it->second.rank() == 1) return name;
  }
  return "";
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  if (logits.rank() != 2 || logits.dim(0) != labels.numel()) return 0;
  const Tensor l = logits.to(DType::F32).contiguous();
  const float* p = l.data<float>();
  const int64_t c = l.dim(1);
  int64_t correct = 0;
  for (int64_t i = 0; i < l.dim(0); ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (p[i * c + j] > p[i * c + best]) best = j;
    correct += best == int64_t(labels.item_as_double(i));
  }
  return correct;
}

Progress::Progress(std::FILE* out, int64_t epoch, int64_t epochs, int64_t samples)
    : out_(out),
      tty_(out && isatty(fileno(out)) != 0),
      epoch_(epoch),
      epochs_(epochs),
      samples_(samples),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, double loss, double accuracy) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < samples_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double s = seconds(), rate = s > 0 ? double(done) / s : 0;
  const double eta = rate > 0 ? double(samples_ - done) / rate : 0;
  constexpr int kWidth = 24;
  const int fill = int(double(kWidth) * double(done) / double(std::max<int64_t>(samples_, 1)));
  std::string bar(size_t(fill), '#');
  bar.resize(kWidth, '.');
  std::string acc;
  if (accuracy >= 0) {
    char b[32];
    std::snprintf(b, sizeof b, "  acc %.2f%%", accuracy * 100);
    acc = b;
  }
  std::fprintf(out_,
               "\r\033[Kepoch %lld/%lld [%s] %lld/%lld  loss %.4f%s  %.0f samples/s  ETA %.1fs",
               (long long)epoch_, (long long)epochs_, bar.c_str(), (long long)done,
               (long long)samples_, loss, acc.c_str(), rate, eta);
  std::fflush(out_);
}

void Progress::finish(const std::string& line) {
  if (!out_) return;
  std::fprintf(out_, "%s%s\n", tty_ ? "\r\033[K" : "", line.c_str());
  std::fflush(out_);
}

}  // namespace rlx::cli
