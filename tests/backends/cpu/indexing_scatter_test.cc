// scatter_elements, scatter_nd, topk and the shape inference of the indexing
// ops: scalar references (indexing_ref.h), PyTorch goldens, duplicates with
// every reduction, negative indices, empty tensors, threaded sizes, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "backends/cpu/indexing_ref.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::error_of;
using testing::ints;
using testing::random_tensor;
using testing::run_op;
using testing::run_op_outputs;

Attrs red_attrs(const std::string& r, std::optional<int64_t> axis = {}) {
  Attrs a{{"reduction", r}};
  if (axis) a.set("axis", *axis);
  return a;
}

const char* kReds[] = {"none", "add", "mul", "max", "min"};

TEST(IndexingScatterElements, DuplicatesWithEveryReductionMatchReference) {
  // 1-d with many duplicates: every reduction folds them in index order;
  // "none" keeps the last one. Integer dtypes are exact; f32 add/mul differ
  // from the double reference only by f32 rounding of a few terms.
  Tensor d = Tensor::from_vector<float>({4}, {1, 2, 3, 4}, DType::F32);
  Tensor ix = ints({6}, {0, 2, -4, 2, 3, -2});
  Tensor u = Tensor::from_vector<float>({6}, {5, -1, 7, 0.5f, -3, 2}, DType::F32);
  for (const char* r : kReds) {
    for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::I8}) {
      Tensor dt = d.to(t), ut = u.to(t);
      Tensor got = run_op(Op::ScatterElements, {dt, ix, ut}, red_attrs(r, 0));
      EXPECT_TRUE(all_close(got, testing::ref::scatter_elements(dt, ix, ut, 0, r), 1e-6, 1e-6))
          << r << " " << dtype_name(t);
    }
  }
  // Spot check "none": indices 2 and -2 both hit element 2; the last (2) wins.
  Tensor got = run_op(Op::ScatterElements, {d, ix, u}, red_attrs("none"));
  EXPECT_EQ(got.to_f32_vector(), (std::vector<float>{7, 2, 2, -3}));
}

TEST(IndexingScatterElements, MatchesReferenceOverAxesAndShapes) {
  Tensor d = random_tensor({3, 4, 5}, DType::F32, 50);
  for (const char* r : kReds) {
    for (int64_t axis : {0, 1, 2, -1, -2}) {
      const int64_t n = d.dims()[size_t(normalize_axis(axis, 3))];
      for (const Dims& id :
           {Dims{3, 4, 5}, Dims{2, 3, 4}, Dims{1, 1, 1}, Dims{3, 9, 2}, Dims{0, 4, 5}}) {
        if (normalize_axis(axis, 3) != 1 && id[1] == 9) continue;
        Tensor ix = random_tensor(id, DType::I32, 51, double(-n), double(n - 1));
        Tensor u = random_tensor(id, DType::F32, 52, 0.5, 1.5);
        Tensor got = run_op(Op::ScatterElements, {d, ix, u}, red_attrs(r, axis));
        EXPECT_TRUE(all_close(got, testing::ref::scatter_elements(d, ix, u, axis, r), 1e-6, 1e-6))
            << r << " axis " << axis << " idx " << dims_str(id);
      }
    }
  }
}

TEST(IndexingScatterElements, LargeThreadedDuplicatesAreDeterministic) {
  // 200K updates into 1000 slots: goes through the parallel ordered path.
  // i64 sums are exact, so any reordering or lost update would show.
  Tensor d = random_tensor({1000}, DType::I64, 53, -100, 100);
  Tensor ix = random_tensor({200000}, DType::I64, 54, -1000, 999);
  Tensor u = random_tensor({200000}, DType::I64, 55, -100, 100);
  for (const char* r : {"none", "add", "max", "min"})
    EXPECT_TRUE(all_equal(run_op(Op::ScatterElements, {d, ix, u}, red_attrs(r)),
                          testing::ref::scatter_elements(d, ix, u, 0, r)))
        << r;
  // f32 add in index order: bit-identical to a sequential f32 fold.
  Tensor df = random_tensor({1000}, DType::F32, 56);
  Tensor uf = random_tensor({200000}, DType::F32, 57);
  Tensor got = run_op(Op::ScatterElements, {df, ix, uf}, red_attrs("add"));
  std::vector<float> want = df.to_f32_vector();
  for (int64_t i = 0; i < ix.numel(); ++i) {
    int64_t j = ix.data<int64_t>()[i];
    want[size_t(j < 0 ? j + 1000 : j)] += uf.data<float>()[i];
  }
  EXPECT_EQ(got.to_f32_vector(), want);
}

TEST(IndexingScatterElements, NaNPropagatesThroughMaxMinAndBoolReduces) {
  Tensor d = Tensor::from_vector<float>({3}, {1, NAN, 3}, DType::F32);
  Tensor ix = ints({3}, {0, 1, 2});
  Tensor u = Tensor::from_vector<float>({3}, {NAN, 5, 1}, DType::F32);
  for (const char* r : {"max", "min"}) {
    auto v = run_op(Op::ScatterElements, {d, ix, u}, red_attrs(r)).to_f32_vector();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << r;
    EXPECT_EQ(v[2], std::string(r) == "max" ? 3.0f : 1.0f);
  }
  Tensor b = Tensor::from_vector<uint8_t>({3}, {0, 1, 1}, DType::Bool);
  Tensor bu = Tensor::from_vector<uint8_t>({3}, {1, 0, 1}, DType::Bool);
  EXPECT_EQ(run_op(Op::ScatterElements, {b, ix, bu}, red_attrs("add")).to_f32_vector(),
            (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(run_op(Op::ScatterElements, {b, ix, bu}, red_attrs("mul")).to_f32_vector(),
            (std::vector<float>{0, 0, 1}));
  // f16 goes through the f32 path and comes back as f16.
  Tensor h = d.to(DType::F16);
  Tensor got = run_op(Op::ScatterElements, {h, ix, u.to(DType::F16)}, red_attrs("add"));
  EXPECT_EQ(got.dtype(), DType::F16);
}

TEST(IndexingScatterElements, Errors) {
  Tensor d = random_tensor({3, 4}, DType::F32, 58);
  Tensor u = random_tensor({1, 2}, DType::F32, 59);
  try {
    run_op(Op::ScatterElements, {d, ints({1, 2}, {0, 4}), u}, red_attrs("add", 1));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dim 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_op(Op::ScatterElements, {d, ints({1, 2}, {0, -5}), u}, red_attrs("add", 1)),
               Error);
  // Shape inference: updates must be shaped like indices, same rank, same
  // dtype as data, index dims within data off the axis, known reduction.
  EXPECT_THROW(run_op(Op::ScatterElements, {d, ints({1, 3}, {0, 0, 0}), u}, red_attrs("add")),
               Error);
  EXPECT_THROW(run_op(Op::ScatterElements,
                      {d, ints({2}, {0, 0}), random_tensor({2}, DType::F32, 1)}, red_attrs("add")),
               Error);
  EXPECT_THROW(
      run_op(Op::ScatterElements, {d, ints({1, 2}, {0, 0}), u.to(DType::F64)}, red_attrs("add")),
      Error);
  EXPECT_THROW(
      run_op(Op::ScatterElements, {d, random_tensor({1, 2}, DType::F32, 1), u}, red_attrs("add")),
      Error);
  EXPECT_THROW(run_op(Op::ScatterElements,
                      {d, ints({1, 5}, {0, 0, 0, 0, 0}), random_tensor({1, 5}, DType::F32, 1)},
                      red_attrs("add", 0)),
               Error);
  EXPECT_THROW(run_op(Op::ScatterElements, {d, ints({1, 2}, {0, 0}), u}, red_attrs("sum")), Error);
  EXPECT_THROW(run_op(Op::ScatterElements, {d, ints({1, 2}, {0, 0}), u}, red_attrs("add", 2)),
               Error);
}

TEST(IndexingScatterND, DuplicatesWithEveryReductionMatchReference) {
  Tensor d = random_tensor({4, 3, 5}, DType::F64, 60, 0.5, 1.5);
  for (const char* r : kReds) {
    for (const Dims& id :
         {Dims{6, 1}, Dims{2, 3, 2}, Dims{5, 3}, Dims{0, 2}, Dims{1}, Dims{7, 2}}) {
      const int64_t k = id.back();
      Tensor ix = random_tensor(id, DType::I64, 61 + uint64_t(k), -3, 2);  // dims >= 3: valid
      Dims ud(id.begin(), id.end() - 1);
      ud.insert(ud.end(), d.dims().begin() + k, d.dims().end());
      Tensor u = random_tensor(ud, DType::F64, 62, 0.5, 1.5);
      for (DType t : {DType::F64, DType::F32, DType::I32}) {
        Tensor dt = d.to(t), ut = u.to(t);
        Tensor got = run_op(Op::ScatterND, {dt, ix.to(DType::I32), ut}, red_attrs(r));
        EXPECT_TRUE(all_close(got, testing::ref::scatter_nd(dt, ix, ut, r), 1e-6, 1e-6))
            << r << " " << dtype_name(t) << " idx " << dims_str(id);
      }
    }
  }
}

TEST(IndexingScatterND, LargeThreadedPathsMatchReference) {
  // Narrow slices (bucketed by destination) and wide slices (split by column).
  Tensor d = random_tensor({500, 8}, DType::I64, 63, -9, 9);
  Tensor ix = random_tensor({20000, 1}, DType::I64, 64, -500, 499);
  Tensor u = random_tensor({20000, 8}, DType::I64, 65, -9, 9);
  for (const char* r : {"none", "add", "min"})
    EXPECT_TRUE(all_equal(run_op(Op::ScatterND, {d, ix, u}, red_attrs(r)),
                          testing::ref::scatter_nd(d, ix, u, r)))
        << r;
  Tensor dw = random_tensor({3, 10000}, DType::I32, 66, -9, 9);
  Tensor iw = ints({5, 1}, {0, 2, 0, -1, 1});
  Tensor uw = random_tensor({5, 10000}, DType::I32, 67, -9, 9);
  for (const char* r : {"none", "add", "max"})
    EXPECT_TRUE(all_equal(run_op(Op::ScatterND, {dw, iw, uw}, red_attrs(r)),
                          testing::ref::scatter_nd(dw, iw, uw, r)))
        << r;
}

TEST(IndexingScatterND, Errors) {
  Tensor d = random_tensor({3, 4}, DType::F32, 68);
  try {
    run_op(Op::ScatterND, {d, ints({1, 2}, {2, -5}), random_tensor({1}, DType::F32, 1)}, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index -5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dim 1"), std::string::npos) << e.what();
  }
  auto u = [](Dims dd) { return random_tensor(dd, DType::F32, 1); };
  EXPECT_THROW(run_op(Op::ScatterND, {d, ints({2, 1}, {0, 1}), u({2, 5})}, {}), Error);
  EXPECT_THROW(run_op(Op::ScatterND, {d, ints({2, 1}, {0, 1}), u({4})}, {}), Error);
  EXPECT_THROW(run_op(Op::ScatterND, {d, ints({1, 3}, {0, 0, 0}), u({1})}, {}), Error);
  EXPECT_THROW(run_op(Op::ScatterND, {d, ints({1, 0}, {}), u({1, 3, 4})}, {}), Error);
  EXPECT_THROW(run_op(Op::ScatterND, {d, ints({1, 1}, {0}), u({1, 4})}, red_attrs("amax")), Error);
  EXPECT_THROW(run_op(Op::ScatterND, {d, ints({1, 1}, {0}), u({1, 4}).to(DType::I32)}, {}), Error);
}

TEST(IndexingTopK, MatchesReferenceWithTiesNaNAndAllAttrs) {
  // Values in a small integer range give many ties; NaNs rank largest.
  Tensor x = random_tensor({3, 6, 5}, DType::I32, 70, -3, 3).to(DType::F32);
  x.data<float>()[4] = NAN;
  x.data<float>()[17] = NAN;
  x.data<float>()[18] = NAN;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::I8, DType::U8}) {
    Tensor xt = t == DType::U8 ? random_tensor({3, 6, 5}, t, 71, 0, 5) : x.to(t);
    for (int64_t axis : {0, 1, -1}) {
      const int64_t n = xt.dims()[size_t(normalize_axis(axis, 3))];
      for (int64_t k : {int64_t(0), int64_t(1), n / 2, n}) {
        for (int64_t largest : {0, 1}) {
          for (int64_t sorted : {0, 1}) {
            auto [wv, wi] = testing::ref::topk(xt, k, axis, largest, sorted);
            Attrs a{{"k", k}, {"axis", axis}, {"largest", largest}, {"sorted", sorted}};
            SCOPED_TRACE(std::string(dtype_name(t)) + " axis " + std::to_string(axis) + " k " +
                         std::to_string(k) + " largest " + std::to_string(largest) + " sorted " +
                         std::to_string(sorted));
            const auto got = run_op_outputs(Op::TopK, {xt}, a);
            EXPECT_TRUE(all_equal(got.at(0), wv));
            EXPECT_TRUE(all_equal(got.at(1), wi));
          }
        }
      }
    }
  }
}

TEST(IndexingTopK, LargeAndLowPrecisionAndEmpty) {
  Tensor x = random_tensor({64, 2000}, DType::F32, 72);
  auto [wv, wi] = testing::ref::topk(x, 50, -1, true, true);
  const auto got = run_op_outputs(Op::TopK, {x}, {{"k", int64_t(50)}});
  EXPECT_TRUE(all_equal(got.at(0), wv));
  EXPECT_TRUE(all_equal(got.at(1), wi));
  Tensor h = random_tensor({4, 9}, DType::BF16, 73);
  auto [hv, hi] = testing::ref::topk(h, 3, 1, false, true);
  const auto hg = run_op_outputs(Op::TopK, {h}, {{"k", int64_t(3)}, {"largest", int64_t(0)}});
  EXPECT_TRUE(all_equal(hg.at(0), hv));
  EXPECT_TRUE(all_equal(hg.at(1), hi));
  Tensor e = random_tensor({0, 5}, DType::F32, 74);
  EXPECT_EQ(run_op_outputs(Op::TopK, {e}, {{"k", int64_t(2)}}).at(0).dims(), (Dims{0, 2}));
  Tensor z = random_tensor({3, 0}, DType::F32, 75);
  EXPECT_EQ(run_op_outputs(Op::TopK, {z}, {{"k", int64_t(0)}}).at(1).dims(), (Dims{3, 0}));
}

TEST(IndexingTopK, Errors) {
  Tensor x = random_tensor({2, 5}, DType::F32, 76);
  EXPECT_THROW(run_op_outputs(Op::TopK, {x}, {{"k", int64_t(6)}}), Error);
  EXPECT_THROW(run_op_outputs(Op::TopK, {x}, {{"k", int64_t(-1)}}), Error);
  EXPECT_THROW(run_op_outputs(Op::TopK, {x}, {{"k", int64_t(1)}, {"axis", int64_t(2)}}), Error);
  EXPECT_THROW(run_op_outputs(Op::TopK, {x}, {}), Error);  // k is required
  EXPECT_NE(error_of([&] {
              run_op(Op::TopK, {x}, {{"k", int64_t(1)}});
            }).find("2 outputs"),
            std::string::npos);
}

TEST(IndexingShapeInfer, ScatterAcceptsSymbolicDimsAndRejectsStaticMismatch) {
  auto sym = [](const char* n) { return Dim::symbol(n); };
  Graph g;
  NodeId d = g.input("d", Shape({sym("n"), Dim(4)}, DType::F32));
  NodeId i = g.input("i", Shape({sym("m"), Dim(1)}, DType::I64));
  NodeId u = g.input("u", Shape({sym("m"), Dim(4)}, DType::F32));
  NodeId s = g.add(Op::ScatterND, {d, i, u}, {{"reduction", std::string("max")}});
  EXPECT_EQ(g.node(s).shape, g.node(d).shape);
  NodeId bad = g.input("bad", Shape({sym("m"), Dim(5)}, DType::F32));
  EXPECT_THROW(g.add(Op::ScatterND, {d, i, bad}), Error);
  NodeId ie = g.input("ie", Shape({sym("m"), Dim(2)}, DType::I32));
  NodeId ue = g.input("ue", Shape({sym("k"), Dim(2)}, DType::F32));
  NodeId se = g.add(Op::ScatterElements, {d, ie, ue}, {{"axis", int64_t(0)}});
  EXPECT_EQ(g.node(se).shape, g.node(d).shape);
  NodeId ue3 = g.input("ue3", Shape({sym("m"), Dim(3)}, DType::F32));
  EXPECT_THROW(g.add(Op::ScatterElements, {d, ie, ue3}), Error);
  // gather_nd: batch dims must agree when static; k must be static.
  NodeId gi = g.input("gi", Shape({Dim(3), sym("m"), Dim(1)}, DType::I64));
  NodeId gd = g.input("gd", Shape({Dim(3), Dim(7), Dim(2)}, DType::F32));
  NodeId gn = g.add(Op::GatherND, {gd, gi}, {{"batch_dims", int64_t(1)}});
  EXPECT_EQ(g.node(gn).shape, Shape({Dim(3), sym("m"), Dim(2)}, DType::F32));
  NodeId gd2 = g.input("gd2", Shape({Dim(2), Dim(7), Dim(2)}, DType::F32));
  EXPECT_THROW(g.add(Op::GatherND, {gd2, gi}, {{"batch_dims", int64_t(1)}}), Error);
  NodeId gk = g.input("gk", Shape({Dim(3), sym("k")}, DType::I64));
  EXPECT_THROW(g.add(Op::GatherND, {gd, gk}), Error);
}

// ---- PyTorch goldens, one Python process for the whole file.

struct ScatterTorchCase {
  std::string name, code;
  Op op;
  std::vector<Tensor> in;  // x['a'], x['b'], x['c']
  Attrs attrs;
  double tol = 0;  // 0: exact
};

const std::vector<ScatterTorchCase>& scatter_torch_cases() {
  static const std::vector<ScatterTorchCase> cases = [] {
    std::vector<ScatterTorchCase> v;
    Tensor d = random_tensor({4, 5, 6}, DType::F32, 80, 0.5, 1.5);
    // Distinct indices along the axis per column (a permutation) for plain scatter.
    Tensor perm = ints({1, 5, 1}, {3, 0, 4, 1, 2});
    Tensor permx = Tensor(Dims{2, 5, 3}, DType::I64);
    for (int64_t i = 0; i < permx.numel(); ++i)
      permx.data<int64_t>()[i] = perm.data<int64_t>()[(i / 3) % 5];
    v.push_back({"scatter",
                 "y = torch.scatter(x['a'], 1, x['b'], x['c'])",
                 Op::ScatterElements,
                 {d, permx, random_tensor({2, 5, 3}, DType::F32, 81)},
                 {{"axis", int64_t(1)}}});
    Tensor dup = random_tensor({3, 7, 6}, DType::I64, 82, 0, 4);
    Tensor upd = random_tensor({3, 7, 6}, DType::F32, 83, 0.5, 1.5);
    const char* torch_red[] = {"sum", "prod", "amax", "amin"};
    const char* our_red[] = {"add", "mul", "max", "min"};
    for (int r = 0; r < 4; ++r)
      v.push_back({std::string("scatter_reduce_") + our_red[r],
                   std::string("y = torch.scatter_reduce(x['a'], 1, x['b'], x['c'], '") +
                       torch_red[r] + "', include_self=True)",
                   Op::ScatterElements,
                   {d, dup, upd},
                   {{"axis", int64_t(-2)}, {"reduction", std::string(our_red[r])}},
                   r < 2 ? 1e-6 : 0.0});  // up to 8 terms: f32 rounding order
    // scatter_nd: index_put (accumulate) and a flattened scatter_reduce for the rest.
    Tensor nd_ix = random_tensor({9, 2}, DType::I64, 84, -4, 3);
    Tensor nd_u = random_tensor({9, 6}, DType::F32, 85, 0.5, 1.5);
    v.push_back(
        {"scatter_nd_add",
         "y = x['a'].clone(); y.index_put_(tuple(x['b'].unbind(-1)), x['c'], accumulate=True)",
         Op::ScatterND,
         {d, nd_ix, nd_u},
         {{"reduction", std::string("add")}},
         1e-6});
    v.push_back({"scatter_nd_none",
                 "y = x['a'].clone(); y[tuple(x['b'].unbind(-1))] = x['c']",
                 Op::ScatterND,
                 {d, ints({3, 2}, {0, 1, -1, 4, 2, 2}), random_tensor({3, 6}, DType::F32, 86)},
                 {}});
    for (int r = 1; r < 4; ++r)
      v.push_back({std::string("scatter_nd_") + our_red[r],
                   std::string("i = x['b'] % torch.tensor([4, 5])\n"
                               "lin = (i[:, 0] * 5 + i[:, 1])[:, None].expand(-1, 6)\n"
                               "y = x['a'].reshape(20, 6).scatter_reduce(0, lin, x['c'], '") +
                       torch_red[r] + "', include_self=True).reshape(4, 5, 6)",
                   Op::ScatterND,
                   {d, nd_ix, nd_u},
                   {{"reduction", std::string(our_red[r])}},
                   r == 1 ? 1e-6 : 0.0});
    Tensor tx = random_tensor({5, 40}, DType::F32, 87);
    tx.data<float>()[3] = NAN;
    for (int64_t largest : {0, 1}) {
      std::string l = largest ? "True" : "False";
      v.push_back({"topk_" + l,
                   "y = torch.topk(x['a'], 7, dim=-1, largest=" + l + ")",
                   Op::TopK,
                   {tx},
                   {{"k", int64_t(7)}, {"largest", largest}}});
    }
    v.push_back(
        {"topk_axis0_unsorted",
         "v, i = torch.topk(x['a'], 3, dim=0)\ni, p = i.sort(dim=0)\ny = (v.gather(0, p), i)",
         Op::TopK,
         {tx},
         {{"k", int64_t(3)}, {"axis", int64_t(0)}, {"sorted", int64_t(0)}}});
    return v;
  }();
  return cases;
}

const std::map<std::string, std::vector<Tensor>>& scatter_goldens() {
  static const auto g = [] {
    std::vector<testing::GoldenCase> gc;
    for (const auto& c : scatter_torch_cases()) {
      TensorMap in;
      for (size_t i = 0; i < c.in.size(); ++i) in[std::string(1, char('a' + i))] = c.in[i];
      gc.push_back({c.name, c.code, in});
    }
    return testing::torch_goldens(gc);
  }();
  return g;
}

TEST(IndexingScatterTorch, MatchesPyTorch) {
  for (const auto& c : scatter_torch_cases()) {
    SCOPED_TRACE(c.name);
    const auto& want = scatter_goldens().at(c.name);
    if (c.op == Op::TopK) {  // values and indices
      const auto got = run_op_outputs(c.op, c.in, c.attrs);
      EXPECT_TRUE(all_equal(got.at(0), want.at(0)));
      EXPECT_TRUE(all_equal(got.at(1), want.at(1)));
      continue;
    }
    EXPECT_TRUE(all_close(run_op(c.op, c.in, c.attrs), want.at(0), c.tol, c.tol));
  }
}

}  // namespace
}  // namespace rlx
