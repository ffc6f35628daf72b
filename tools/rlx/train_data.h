// `rlx train` helpers: the data set (tensors keyed by input name sharing a
// leading sample dim), seeded per-epoch shuffling, accuracy, and the
// per-epoch progress bar.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rlx/io.h"
#include "rlx/train.h"

namespace rlx::cli {

struct DataSet {
  std::string path;
  TensorMap tensors;  // contiguous, leading dim = samples
  int64_t samples = 0;
};
// Reads `path` and checks it against the trainer's inputs: one tensor per data
// input (no others), all with the same leading dim. Throws rlx::Error naming
// the file and the tensor.
DataSet load_data(const std::string& path, const train::Trainer& trainer);

// The sample order of `epoch`: a Fisher-Yates shuffle driven by a
// mt19937_64 seeded from (seed, epoch), so a resumed run reproduces it.
std::vector<int64_t> epoch_order(int64_t samples, uint64_t seed, int64_t epoch);
// The samples order[begin, end) of every tensor, as a batch.
TensorMap gather_batch(const DataSet& d, const std::vector<int64_t>& order, int64_t begin,
                       int64_t end);

// Accuracy rule: an output named `logits` of dims [B, C] and an integer input
// named `target`, `targets`, `labels` or `label` of dims [B]. Returns the label
// input's name, or "" when the model has no such pair.
std::string label_input(const train::Trainer& trainer, const TensorMap& batch);
// Samples of `batch` whose argmax over `logits` equals the label.
int64_t count_correct(const Tensor& logits, const Tensor& labels);

// One epoch's progress: a redrawn bar on a terminal, nothing until the
// epoch's summary line otherwise (logs stay readable); nothing at all when
// `out` is null (the other processes of a data-parallel run).
class Progress {
 public:
  Progress(std::FILE* out, int64_t epoch, int64_t epochs, int64_t samples);
  void update(int64_t done, double loss, double accuracy);  // accuracy < 0: none
  double seconds() const;
  void finish(const std::string& line);

 private:
  std::FILE* out_;
  bool tty_;
  int64_t epoch_, epochs_, samples_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace rlx::cli
