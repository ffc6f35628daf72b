// ONNX Einsum against a reference written here: every assignment of the labels visited and the
// products summed, in double. Explicit and implicit outputs, traces and diagonals, ellipses
// that broadcast, three operands, and equations that must be refused.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "io/io_testing.h"
#include "io/onnx_writer.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {
using namespace testing::onnx_writer;

std::string einsum_model(const std::string& eq, const std::vector<Dims>& shapes) {
  Pb g;
  std::vector<std::string> names;
  for (size_t i = 0; i < shapes.size(); ++i) names.push_back("x" + std::to_string(i));
  g.msg(1, node("Einsum", names, {"y"}, {str_attr("equation", eq)})).bytes(2, "g");
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<std::string> d;
    for (int64_t v : shapes[i]) d.push_back(std::to_string(v));
    g.msg(11, value_info(names[i], kF32, d));
  }
  g.msg(12, value_info("y", kF32, {}));
  return model(g, 12);
}

// The reference: labels are letters; "..." is spelt out by the caller as capital letters
// (right-aligned, so broadcasting dims of size 1 are written as such).
Tensor einsum_reference(const std::vector<std::string>& in, const std::string& out,
                        const std::vector<Tensor>& x) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t k = 0; k < in[i].size(); ++k)
      size[in[i][k]] = std::max(size[in[i][k]], x[i].dims()[k]);
  std::vector<char> all;
  for (const auto& [ch, n] : size) all.push_back(ch);
  Dims od;
  for (char ch : out) od.push_back(size[ch]);
  Tensor y(od, DType::F64);
  std::fill(y.data<double>(), y.data<double>() + y.numel(), 0.0);
  std::map<char, int64_t> at;
  for (char ch : all) at[ch] = 0;
  for (;;) {
    double p = 1;
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t off = 0;
      for (size_t k = 0; k < in[i].size(); ++k) {
        const int64_t n = x[i].dims()[k];
        off = off * n + (n == 1 ? 0 : at[in[i][k]]);
      }
      p *= double(x[i].data<float>()[off]);
    }
    int64_t o = 0;
    for (char ch : out) o = o * size[ch] + at[ch];
    y.data<double>()[o] += p;
    size_t k = all.size();
    while (k > 0 && ++at[all[k - 1]] == size[all[k - 1]]) at[all[--k]] = 0;
    if (k == 0) break;
  }
  return y;
}

struct EinsumCase {
  std::string eq;          // as the model holds it
  std::vector<Dims> dims;  // the inputs' shapes
  std::vector<std::string> ref_in;
  std::string ref_out;
};

class OnnxEinsum : public ::testing::Test {
 protected:
  testing::ScratchDir dir_{"onnx_einsum"};
};

TEST_F(OnnxEinsum, MatchesTheSumOverEveryLabel) {
  const std::vector<EinsumCase> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"},
      {"ij,jk", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"},  // implicit
      {"ba,ca", {{2, 3}, {4, 3}}, {"ba", "ca"}, "bc"},  // implicit sorts
      {"ii->i", {{4, 4}}, {"ii"}, "i"},                 // diagonal
      {"ii", {{4, 4}}, {"ii"}, ""},                     // trace
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {"bij", "bjk"}, "bik"},
      {"bhqd,bhkd->bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}}, {"bhqd", "bhkd"}, "bhqk"},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}, {"ABij", "Bjk"}, "ABik"},  // broadcast
      {"i,j->ij", {{3}, {4}}, {"i", "j"}, "ij"},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {"ij", "jk", "kl"}, "il"},
      {"abc->cb", {{2, 3, 4}}, {"abc"}, "cb"},    // sum and transpose
      {"...ii->...", {{2, 3, 3}}, {"Aii"}, "A"},  // batched trace
      {"i,i", {{5}, {5}}, {"i", "i"}, ""},
      {"ij->", {{3, 4}}, {"ij"}, ""},
  };
  uint64_t seed = 1;
  for (const EinsumCase& k : cases) {
    SCOPED_TRACE(k.eq);
    const std::string p = dir_.path("e.onnx");
    testing::write_file_bytes(p, einsum_model(k.eq, k.dims));
    const Model m = load_model(p);
    Session s(Executable::compile(m.graph, m.weights));
    TensorMap feed;
    std::vector<Tensor> xs;
    for (size_t i = 0; i < k.dims.size(); ++i) {
      xs.push_back(testing::random_tensor(k.dims[i], DType::F32, seed++));
      feed["x" + std::to_string(i)] = xs.back();
    }
    const Tensor got = s.run(feed).at("y");
    EXPECT_TRUE(testing::all_close(got.to(DType::F64), einsum_reference(k.ref_in, k.ref_out, xs),
                                   1e-5, 1e-5));
  }
}

TEST_F(OnnxEinsum, BadEquationsAreErrors) {
  auto error = [&](const std::string& eq, const std::vector<Dims>& dims) {
    const std::string p = dir_.path("bad.onnx");
    testing::write_file_bytes(p, einsum_model(eq, dims));
    try {
      load_model(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error("ij,jk->ik", {{3, 4}}).find("2 terms for 1 inputs"), std::string::npos);
  EXPECT_NE(error("ijk->i", {{3, 4}}).find("does not fit an input of rank 2"), std::string::npos);
  EXPECT_NE(error("ij->iz", {{3, 4}}).find("in no input"), std::string::npos);
  EXPECT_NE(error("i1->i", {{3, 4}}).find("bad character"), std::string::npos);
  EXPECT_NE(error("ij,jk->ik", {{3, 4}, {5, 6}}).find("do not broadcast"), std::string::npos);
  EXPECT_NE(error("......->", {{3, 4}}).find("more than one ellipsis"), std::string::npos);
}

}  // namespace
}  // namespace rlx
