// gather, gather_elements, gather_nd, one_hot, embedding: scalar references
// (indexing_ref.h), PyTorch goldens, every dtype (pure copies, so exact),
// negative axes and indices, empty tensors, threaded sizes, error paths.
#include <gtest/gtest.h>

#include "backends/cpu/indexing_ref.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_equal;
using testing::ints;
using testing::kAllDTypes;
using testing::random_tensor;
using testing::run_op;

// Expects run_op to throw rlx::Error whose message contains every piece.
void expect_run_op_error(Op op, const std::vector<Tensor>& in, const Attrs& a,
                         const std::vector<std::string>& pieces) {
  try {
    run_op(op, in, a);
    ADD_FAILURE() << "no error for " << op_name(op);
  } catch (const Error& e) {
    for (const auto& p : pieces)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

TEST(IndexingGather, MatchesReferenceOverAxesDtypesAndIndexRanks) {
  Tensor d0 = random_tensor({3, 4, 5}, DType::F64, 1, -50, 50);
  for (DType t : kAllDTypes) {
    Tensor d = d0.to(t);
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      const int64_t n = d.dims()[size_t(normalize_axis(axis, 3))];
      for (const Dims& id : {Dims{}, Dims{1}, Dims{6}, Dims{2, 3}, Dims{0}, Dims{2, 0}}) {
        for (DType it : {DType::I64, DType::I32}) {
          Tensor ix = random_tensor(id, it, uint64_t(7 + id.size()), double(-n), double(n - 1));
          SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(axis) + " idx " +
                       dims_str(id));
          Tensor got = run_op(Op::Gather, {d, ix}, {{"axis", axis}});
          EXPECT_TRUE(all_equal(got, testing::ref::gather(d, ix, axis)));
        }
      }
    }
  }
}

TEST(IndexingGather, EmptyDataDimsAndDefaultAxis) {
  Tensor d = random_tensor({4, 0, 3}, DType::F32, 2);
  Tensor ix = ints({2}, {3, -4});
  Tensor got = run_op(Op::Gather, {d, ix}, {});  // axis defaults to 0
  EXPECT_EQ(got.dims(), (Dims{2, 0, 3}));
  // Gathering from an empty axis with any index is out of range.
  EXPECT_THROW(run_op(Op::Gather, {d, ints({1}, {0})}, {{"axis", int64_t(1)}}), Error);
  // ...but an empty index tensor is fine.
  EXPECT_EQ(run_op(Op::Gather, {d, ints({0}, {})}, {{"axis", int64_t(1)}}).dims(), (Dims{4, 0, 3}));
}

TEST(IndexingGather, LargeThreadedGatherMatchesReference) {
  Tensor d = random_tensor({64, 300, 8}, DType::F32, 3);
  Tensor ix = random_tensor({50, 20}, DType::I32, 4, -300, 299);
  EXPECT_TRUE(all_equal(run_op(Op::Gather, {d, ix}, {{"axis", int64_t(1)}}),
                        testing::ref::gather(d, ix, 1)));
  Tensor row = random_tensor({5000}, DType::I64, 5, -64, 63);  // element-sized rows
  Tensor d2 = random_tensor({64}, DType::F16, 6);
  EXPECT_TRUE(all_equal(run_op(Op::Gather, {d2, row}, {}), testing::ref::gather(d2, row, 0)));
}

TEST(IndexingGather, OutOfRangeIndexNamesValueAndDim) {
  Tensor d = random_tensor({2, 5}, DType::F32, 8);
  expect_run_op_error(Op::Gather, {d, ints({3}, {0, 7, 1})}, {{"axis", int64_t(1)}},
                      {"index 7", "dim 1", "size 5"});
  expect_run_op_error(Op::Gather, {d, ints({1}, {-6}, DType::I32)}, {{"axis", int64_t(-1)}},
                      {"index -6", "dim 1"});
  expect_run_op_error(Op::Gather, {d, ints({1}, {2})}, {}, {"index 2", "dim 0"});
  // Float indices are rejected by shape inference.
  EXPECT_THROW(run_op(Op::Gather, {d, random_tensor({2}, DType::F32, 9)}, {}), Error);
  EXPECT_THROW(run_op(Op::Gather, {d, ints({1}, {0})}, {{"axis", int64_t(2)}}), Error);
}

TEST(IndexingGatherElements, MatchesReferenceIncludingSmallerIndexDims) {
  Tensor d0 = random_tensor({3, 4, 5}, DType::F64, 10, -50, 50);
  for (DType t : kAllDTypes) {
    Tensor d = d0.to(t);
    for (int64_t axis : {0, 1, -1}) {
      const int64_t n = d.dims()[size_t(normalize_axis(axis, 3))];
      for (const Dims& id : {Dims{3, 4, 5}, Dims{2, 3, 4}, Dims{3, 1, 2}, Dims{1, 6, 1},
                             Dims{0, 4, 5}, Dims{3, 4, 0}}) {
        Dims idd = id;
        if (normalize_axis(axis, 3) != 1 && idd[1] == 6) continue;  // 6 > 4 only ok on axis 1
        for (DType it : {DType::I64, DType::I32}) {
          Tensor ix = random_tensor(idd, it, 11, double(-n), double(n - 1));
          SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(axis) + " idx " +
                       dims_str(idd));
          Tensor got = run_op(Op::GatherElements, {d, ix}, {{"axis", axis}});
          EXPECT_TRUE(all_equal(got, testing::ref::gather_elements(d, ix, axis)));
        }
      }
    }
  }
  Tensor big = random_tensor({40, 512}, DType::F32, 12);
  Tensor bix = random_tensor({40, 700}, DType::I64, 13, -512, 511);
  EXPECT_TRUE(all_equal(run_op(Op::GatherElements, {big, bix}, {{"axis", int64_t(1)}}),
                        testing::ref::gather_elements(big, bix, 1)));
}

TEST(IndexingGatherElements, Errors) {
  Tensor d = random_tensor({3, 4}, DType::F32, 14);
  expect_run_op_error(Op::GatherElements, {d, ints({1, 2}, {1, 4})}, {{"axis", int64_t(1)}},
                      {"index 4", "dim 1"});
  // Index dims larger than data off the axis are a shape error; rank mismatch too.
  EXPECT_THROW(
      run_op(Op::GatherElements, {d, ints({1, 5}, {0, 0, 0, 0, 0})}, {{"axis", int64_t(0)}}),
      Error);
  EXPECT_THROW(run_op(Op::GatherElements, {d, ints({2}, {0, 0})}, {{"axis", int64_t(0)}}), Error);
}

TEST(IndexingGatherND, MatchesReferenceWithBatchDims) {
  Tensor d0 = random_tensor({2, 3, 4, 5}, DType::F64, 15, -50, 50);
  struct C {
    Dims id;
    int64_t b;
  };
  for (DType t : kAllDTypes) {
    Tensor d = d0.to(t);
    for (const C& c :
         {C{{4, 1}, 0}, C{{3, 2}, 0}, C{{2, 2, 3}, 0}, C{{5, 4}, 0}, C{{0, 2}, 0}, C{{2}, 0},
          C{{2, 1}, 1}, C{{2, 6, 2}, 1}, C{{2, 3, 7, 2}, 2}, C{{2, 3, 2}, 2}, C{{2, 0, 1}, 1}}) {
      const int64_t k = c.id.back();
      // Index j addresses data dim b + j; draw within the smallest such dim.
      int64_t lim = 100;
      for (int64_t j = 0; j < k; ++j) lim = std::min(lim, d.dims()[size_t(c.b + j)]);
      Tensor ix = random_tensor(c.id, DType::I64, 16 + uint64_t(k), double(-lim), double(lim - 1));
      SCOPED_TRACE(std::string(dtype_name(t)) + " idx " + dims_str(c.id) + " b " +
                   std::to_string(c.b));
      Tensor got = run_op(Op::GatherND, {d, ix}, {{"batch_dims", c.b}});
      EXPECT_TRUE(all_equal(got, testing::ref::gather_nd(d, ix, c.b)));
      Tensor got32 = run_op(Op::GatherND, {d, ix.to(DType::I32)}, {{"batch_dims", c.b}});
      EXPECT_TRUE(all_equal(got32, testing::ref::gather_nd(d, ix, c.b)));
    }
  }
}

TEST(IndexingGatherND, Errors) {
  Tensor d = random_tensor({2, 3, 4}, DType::F32, 17);
  expect_run_op_error(Op::GatherND, {d, ints({1, 2}, {1, 3})}, {}, {"index 3", "dim 1"});
  expect_run_op_error(Op::GatherND, {d, ints({2, 1}, {0, 4})}, {{"batch_dims", int64_t(1)}},
                      {"index 4", "dim 1"});
  EXPECT_THROW(run_op(Op::GatherND, {d, ints({1, 4}, {0, 0, 0, 0})}, {}), Error);  // k > rank
  EXPECT_THROW(run_op(Op::GatherND, {d, ints({3, 1}, {0, 0, 0})}, {{"batch_dims", int64_t(1)}}),
               Error);                                                   // batch dim 3 vs 2
  EXPECT_THROW(run_op(Op::GatherND, {d, ints({1, 0}, {})}, {}), Error);  // k = 0 (ONNX: k >= 1)
}

TEST(IndexingOneHot, MatchesReferenceAndWrapsNegatives) {
  for (DType out : {DType::I64, DType::F32, DType::Bool, DType::F16, DType::U8}) {
    for (DType it : {DType::I64, DType::I32}) {
      for (const Dims& id : {Dims{}, Dims{7}, Dims{2, 3}, Dims{0}, Dims{3, 0}}) {
        Tensor ix = random_tensor(id, it, 18, -5, 4);
        Tensor got = run_op(Op::OneHot, {ix},
                            {{"depth", int64_t(5)}, {"dtype", std::string(dtype_name(out))}});
        EXPECT_TRUE(all_equal(got, testing::ref::one_hot(ix, 5, out))) << dims_str(id);
      }
    }
  }
  // Default dtype i64; large enough to be threaded.
  Tensor ix = random_tensor({3000}, DType::I32, 19, -100, 99);
  Tensor got = run_op(Op::OneHot, {ix}, {{"depth", int64_t(100)}});
  EXPECT_TRUE(all_equal(got, testing::ref::one_hot(ix, 100, DType::I64)));
}

TEST(IndexingOneHot, Errors) {
  expect_run_op_error(Op::OneHot, {ints({2}, {1, 5})}, {{"depth", int64_t(5)}},
                      {"index 5", "depth 5"});
  expect_run_op_error(Op::OneHot, {ints({1}, {-6})}, {{"depth", int64_t(5)}}, {"index -6"});
  EXPECT_THROW(run_op(Op::OneHot, {ints({1}, {0})}, {{"depth", int64_t(0)}}), Error);
  EXPECT_THROW(run_op(Op::OneHot, {random_tensor({2}, DType::F32, 1)}, {{"depth", int64_t(3)}}),
               Error);
}

TEST(IndexingEmbedding, MatchesReferenceAllDtypes) {
  Tensor t0 = random_tensor({10, 6}, DType::F64, 20, -50, 50);
  for (DType t : kAllDTypes) {
    Tensor table = t0.to(t);
    for (const Dims& id : {Dims{}, Dims{4}, Dims{2, 3}, Dims{0}, Dims{2, 0}}) {
      Tensor ids = random_tensor(id, DType::I32, 21, 0, 9);
      EXPECT_TRUE(
          all_equal(run_op(Op::Embedding, {table, ids}), testing::ref::embedding(table, ids)))
          << dtype_name(t) << " " << dims_str(id);
    }
  }
  Tensor big = random_tensor({1000, 64}, DType::F32, 22);
  Tensor ids = random_tensor({8, 128}, DType::I64, 23, 0, 999);
  EXPECT_TRUE(all_equal(run_op(Op::Embedding, {big, ids}), testing::ref::embedding(big, ids)));
  // D = 0 tables give empty rows but still check ids.
  Tensor empty = random_tensor({3, 0}, DType::F32, 24);
  EXPECT_EQ(run_op(Op::Embedding, {empty, ints({2}, {0, 2})}).dims(), (Dims{2, 0}));
  EXPECT_THROW(run_op(Op::Embedding, {empty, ints({1}, {3})}), Error);
}

TEST(IndexingEmbedding, Errors) {
  Tensor table = random_tensor({10, 4}, DType::F32, 25);
  expect_run_op_error(Op::Embedding, {table, ints({3}, {0, 10, 2})}, {}, {"id 10", "10 rows"});
  expect_run_op_error(Op::Embedding, {table, ints({1}, {-1}, DType::I32)}, {}, {"id -1"});
  EXPECT_THROW(run_op(Op::Embedding, {random_tensor({10}, DType::F32, 1), ints({1}, {0})}), Error);
}

// ---- PyTorch goldens, one Python process for the whole file.

struct IndexingTorchCase {
  std::string name;
  std::string code;
  Op op;
  std::vector<Tensor> in;  // op inputs, passed to Python as x['a'], x['b'], ...
  Attrs attrs;
};

const std::vector<IndexingTorchCase>& indexing_torch_cases() {
  static const std::vector<IndexingTorchCase> cases = [] {
    std::vector<IndexingTorchCase> v;
    Tensor d = random_tensor({3, 4, 5}, DType::F32, 30);
    // Advanced indexing handles negative indices natively.
    v.push_back({"gather_ax1",
                 "y = x['a'][:, x['b'].long()]",
                 Op::Gather,
                 {d, random_tensor({2, 3}, DType::I64, 31, -4, 3)},
                 {{"axis", int64_t(1)}}});
    v.push_back({"gather_axm1",
                 "y = x['a'][..., x['b'].long()]",
                 Op::Gather,
                 {d, random_tensor({7}, DType::I32, 32, -5, 4)},
                 {{"axis", int64_t(-1)}}});
    v.push_back({"gather_scalar",
                 "y = x['a'][x['b'].long()]",
                 Op::Gather,
                 {d.to(DType::BF16), ints({}, {-1})},
                 {{"axis", int64_t(0)}}});
    v.push_back({"index_select",
                 "y = torch.index_select(x['a'], 1, x['b'].long())",
                 Op::Gather,
                 {d.to(DType::F16), ints({5}, {3, 0, 3, 1, 2})},
                 {{"axis", int64_t(1)}}});
    v.push_back({"gather_elements",
                 "y = torch.gather(x['a'], 2, x['b'])",
                 Op::GatherElements,
                 {d, random_tensor({2, 4, 6}, DType::I64, 33, 0, 4)},
                 {{"axis", int64_t(-1)}}});
    v.push_back({"gather_elements_ax0",
                 "y = torch.gather(x['a'], 0, x['b'])",
                 Op::GatherElements,
                 {d.to(DType::I32), random_tensor({5, 3, 5}, DType::I64, 34, 0, 2)},
                 {{"axis", int64_t(0)}}});
    v.push_back({"gather_nd",
                 "y = x['a'][tuple(x['b'].long().unbind(-1))]",
                 Op::GatherND,
                 {d, random_tensor({2, 5, 2}, DType::I64, 35, -3, 2)},
                 {}});
    v.push_back({"gather_nd_full",
                 "y = x['a'][tuple(x['b'].long().unbind(-1))]",
                 Op::GatherND,
                 {d, random_tensor({6, 3}, DType::I32, 36, 0, 2)},
                 {}});
    v.push_back({"gather_nd_b1",
                 "i = x['b'].long(); B = x['a'].shape[0]\n"
                 "ar = torch.arange(B).reshape([B] + [1] * (i.dim() - 2))\n"
                 "y = x['a'][(ar,) + tuple(i.unbind(-1))]",
                 Op::GatherND,
                 {d, random_tensor({3, 2, 4, 1}, DType::I64, 37, -4, 3)},
                 {{"batch_dims", int64_t(1)}}});
    v.push_back({"one_hot",
                 "y = F.one_hot(x['a'].long(), 6)",
                 Op::OneHot,
                 {random_tensor({3, 4}, DType::I64, 38, 0, 5)},
                 {{"depth", int64_t(6)}}});
    v.push_back({"one_hot_f32",
                 "y = F.one_hot(x['a'].long(), 4).float()",
                 Op::OneHot,
                 {random_tensor({5}, DType::I32, 39, 0, 3)},
                 {{"depth", int64_t(4)}, {"dtype", std::string("f32")}}});
    v.push_back(
        {"embedding",
         "y = F.embedding(x['b'].long(), x['a'])",
         Op::Embedding,
         {random_tensor({11, 7}, DType::F32, 40), random_tensor({2, 3, 4}, DType::I64, 41, 0, 10)},
         {}});
    return v;
  }();
  return cases;
}

const std::map<std::string, std::vector<Tensor>>& indexing_goldens() {
  static const auto g = [] {
    std::vector<testing::GoldenCase> gc;
    for (const auto& c : indexing_torch_cases()) {
      TensorMap in;
      for (size_t i = 0; i < c.in.size(); ++i) in[std::string(1, char('a' + i))] = c.in[i];
      gc.push_back({c.name, c.code, in});
    }
    return testing::torch_goldens(gc);
  }();
  return g;
}

TEST(IndexingTorch, MatchesPyTorch) {
  for (const auto& c : indexing_torch_cases()) {
    SCOPED_TRACE(c.name);
    Tensor want = indexing_goldens().at(c.name).at(0);
    Tensor got = run_op(c.op, c.in, c.attrs);
    // Pure copies: exact, and the dtype must match too.
    EXPECT_TRUE(all_equal(got, want.dtype() == got.dtype() ? want : want.to(got.dtype())));
    EXPECT_EQ(got.dtype(), want.dtype());
  }
}

}  // namespace
}  // namespace rlx
