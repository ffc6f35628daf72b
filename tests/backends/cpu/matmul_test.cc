// MatMul: NumPy/PyTorch semantics (1-d operands, broadcast batch dims) against
// a scalar reference and torch.matmul goldens.
#include <gtest/gtest.h>

#include "rlx/builder.h"
#include "rlx/cpu_isa.h"
#include "rlx/thread_pool.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

// Independent reference: each output element by its own index arithmetic, in
// double (integers: in int64, then wrapped to the dtype by the cast).
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  Dims ad = a.dims(), bd = b.dims();
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  const size_t r = std::max(ad.size(), bd.size()) - 2;
  Dims pa(r, 1), pb(r, 1), batch(r);
  for (size_t i = 0; i < r; ++i) {
    if (i + ad.size() - 2 >= r) pa[i] = ad[i + ad.size() - 2 - r];
    if (i + bd.size() - 2 >= r) pb[i] = bd[i + bd.size() - 2 - r];
    batch[i] = pa[i] == 1 ? pb[i] : pa[i];
  }
  Dims od = batch;
  if (!a1) od.push_back(M);
  if (!b1) od.push_back(N);
  const bool integral = is_integer(a.dtype());
  Tensor out(od, integral ? DType::I64 : DType::F64);
  const int64_t nb = numel(batch);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t rem = t, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t i = r; i-- > 0;) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      ia += (pa[i] == 1 ? 0 : idx) * sa;
      ib += (pb[i] == 1 ? 0 : idx) * sb;
      sa *= pa[i];
      sb *= pb[i];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        int64_t si = 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t ai = (ia * M + i) * K + k, bi = (ib * K + k) * N + j;
          s += a.item_as_double(ai) * b.item_as_double(bi);
          si += int64_t(a.item_as_double(ai)) * int64_t(b.item_as_double(bi));
        }
        const int64_t o = (t * M + i) * N + j;
        if (integral)
          out.data<int64_t>()[o] = si;
        else
          out.data<double>()[o] = s;
      }
  }
  return out.to(a.dtype());
}

struct MatMulCase {
  std::string name;
  Dims a, b;
  DType dt = DType::F32;
};

std::vector<MatMulCase> matmul_cases() {
  return {
      {"plain", {3, 4}, {4, 5}},
      {"bcast_2134_546", {2, 1, 3, 4}, {5, 4, 6}},
      {"bcast_b_batch_1", {3, 2, 5}, {1, 5, 4}},
      {"bcast_a_batch_1", {1, 2, 5}, {3, 5, 4}},
      {"vec_mat", {4}, {4, 5}},
      {"mat_vec", {3, 4}, {4}},
      {"vec_vec", {7}, {7}},
      {"batched_mat_vec", {2, 3, 4}, {4}},
      {"vec_batched_mat", {4}, {2, 4, 5}},
      {"tall_fold", {6, 33, 17}, {17, 9}},
      {"unit_dims", {1, 1, 1}, {1, 1}},
      {"big_single", {1, 130, 257}, {257, 140}},   // split over threads
      {"many_batches", {9, 40, 30}, {9, 30, 50}},  // threads take batches
      {"few_big_batches", {2, 150, 100}, {2, 100, 120}},
      {"wide", {5, 20}, {20, 700}},
      {"f64", {2, 3, 7}, {2, 7, 5}, DType::F64},
      {"f64_vec", {7}, {3, 7, 2}, DType::F64},
  };
}

// f32 accumulation of K products of values in [-1, 1]: rounding error grows
// ~ sqrt(K) * 6e-8 typically, K * 6e-8 at worst (K <= 257 here), so 1e-5
// absolute covers it; a wrong element is off by O(0.1).
constexpr double kAtol32 = 1e-5, kRtol32 = 1e-5;

TEST(MatMul, MatchesScalarReference) {
  uint64_t seed = 1;
  for (const MatMulCase& c : matmul_cases()) {
    Tensor a = random_tensor(c.a, c.dt, seed++), b = random_tensor(c.b, c.dt, seed++);
    Tensor got = run_op(Op::MatMul, {a, b});
    const double tol = c.dt == DType::F64 ? 1e-12 : kAtol32;
    EXPECT_TRUE(all_close(got, ref_matmul(a, b), tol, c.dt == DType::F64 ? 1e-12 : kRtol32))
        << c.name;
    EXPECT_EQ(got.dtype(), c.dt) << c.name;
  }
}

// The last two dims of t swapped (a stored-transposed operand).
Tensor swap_last_two(const Tensor& t) {
  std::vector<int64_t> perm(size_t(t.rank()));
  for (int i = 0; i < t.rank(); ++i) perm[size_t(i)] = i;
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return run_op(Op::Transpose, {t}, {{"perm", perm}});
}

// transpose_a/b read an operand stored with its last two dims swapped: every
// path (one tall GEMM, threads over batches, split GEMMs, integers) against
// the reference on the logical operands.
TEST(MatMul, TransposedOperandsMatchTheReference) {
  uint64_t seed = 100;
  std::vector<MatMulCase> all = matmul_cases();
  all.push_back({"i32", {2, 3, 4}, {4, 5}, DType::I32});
  all.push_back({"i8_batched", {3, 2, 6}, {3, 6, 4}, DType::I8});
  int checked = 0;
  for (const MatMulCase& c : all) {
    Tensor a = random_tensor(c.a, c.dt, seed++), b = random_tensor(c.b, c.dt, seed++);
    const Tensor want = ref_matmul(a, b);
    const double tol = c.dt == DType::F64 ? 1e-12 : is_float(c.dt) ? kAtol32 : 0;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        if ((ta && a.rank() < 2) || (tb && b.rank() < 2) || (!ta && !tb)) continue;
        Tensor got = run_op(Op::MatMul, {ta ? swap_last_two(a) : a, tb ? swap_last_two(b) : b},
                            {{"transpose_a", ta}, {"transpose_b", tb}});
        EXPECT_TRUE(all_close(got, want, tol, tol)) << c.name << " ta=" << ta << " tb=" << tb;
        ++checked;
      }
  }
  EXPECT_GT(checked, 40);
  // A transposed 1-d operand has no last two dims.
  EXPECT_THROW(
      run_op(Op::MatMul, {random_tensor({4}, DType::F32, 1), random_tensor({4, 5}, DType::F32, 2)},
             {{"transpose_a", true}}),
      Error);
}

TEST(MatMul, MatchesTorch) {
  std::vector<testing::GoldenCase> gc;
  std::vector<std::pair<Tensor, Tensor>> ins;
  uint64_t seed = 100;
  for (const MatMulCase& c : matmul_cases()) {
    Tensor a = random_tensor(c.a, c.dt, seed++), b = random_tensor(c.b, c.dt, seed++);
    gc.push_back({c.name, "y = torch.matmul(x['a'], x['b'])", {{"a", a}, {"b", b}}});
    ins.emplace_back(a, b);
  }
  // Integer matmul wraps around in the element type, like PyTorch.
  Tensor ia = random_tensor({3, 6}, DType::I8, 7, -100, 100);
  Tensor ib = random_tensor({6, 4}, DType::I8, 8, -100, 100);
  gc.push_back({"i8_wrap", "y = torch.matmul(x['a'], x['b'])", {{"a", ia}, {"b", ib}}});
  ins.emplace_back(ia, ib);
  Tensor la = random_tensor({2, 3, 5}, DType::I64, 9, -1000, 1000);
  Tensor lb = random_tensor({5, 4}, DType::I64, 10, -1000, 1000);
  gc.push_back({"i64", "y = torch.matmul(x['a'], x['b'])", {{"a", la}, {"b", lb}}});
  ins.emplace_back(la, lb);
  auto gold = testing::torch_goldens(gc);
  for (size_t i = 0; i < gc.size(); ++i) {
    const Tensor& want = gold.at(gc[i].name)[0];
    Tensor got = run_op(Op::MatMul, {ins[i].first, ins[i].second});
    if (is_integer(want.dtype()))
      EXPECT_TRUE(testing::all_equal(got, want)) << gc[i].name;
    else
      EXPECT_TRUE(all_close(got, want, want.dtype() == DType::F64 ? 1e-12 : kAtol32, kRtol32))
          << gc[i].name;
  }
}

TEST(MatMul, IntegerDtypes) {
  for (DType dt : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8}) {
    Tensor a = random_tensor({2, 3, 5}, dt, 11, 0, 9), b = random_tensor({5, 4}, dt, 12, 0, 9);
    Tensor got = run_op(Op::MatMul, {a, b});
    EXPECT_TRUE(testing::all_equal(got, ref_matmul(a, b))) << dtype_name(dt);
  }
  // Wrap-around: 100 * 100 * 3 = 30000 does not fit in i8.
  Tensor a = Tensor::from_vector<int64_t>({1, 3}, {100, 100, 100}, DType::I8);
  Tensor b = Tensor::from_vector<int64_t>({3, 1}, {100, 100, 100}, DType::I8);
  EXPECT_EQ(run_op(Op::MatMul, {a, b}).item_as_double(0), double(int8_t(30000 & 0xff)));
}

TEST(MatMul, HalfPrecisionRunsThroughF32) {
  // f16/bf16 are upcast to f32 by the runtime; the result is rounded back, so
  // compare at the output type's precision (2^-11 / 2^-8 relative, K = 24).
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor a = random_tensor({2, 5, 24}, dt, 31), b = random_tensor({24, 3}, dt, 32);
    Tensor got = run_op(Op::MatMul, {a, b});
    EXPECT_EQ(got.dtype(), dt);
    const double tol = dt == DType::F16 ? 4e-3 : 3e-2;
    EXPECT_TRUE(all_close(got, ref_matmul(a.to(DType::F64), b.to(DType::F64)), tol, tol))
        << dtype_name(dt);
  }
}

TEST(MatMul, EmptyOperands) {
  // Empty batch, M = 0, N = 0: empty results of the right shape.
  EXPECT_EQ(run_op(Op::MatMul,
                   {random_tensor({0, 3, 4}, DType::F32, 1), random_tensor({4, 5}, DType::F32, 2)})
                .dims(),
            (Dims{0, 3, 5}));
  EXPECT_EQ(run_op(Op::MatMul, {random_tensor({2, 0, 4}, DType::F32, 1),
                                random_tensor({2, 4, 5}, DType::F32, 2)})
                .dims(),
            (Dims{2, 0, 5}));
  EXPECT_EQ(run_op(Op::MatMul,
                   {random_tensor({3, 4}, DType::F32, 1), random_tensor({4, 0}, DType::F32, 2)})
                .dims(),
            (Dims{3, 0}));
  // Broadcasting against an empty batch dim.
  EXPECT_EQ(run_op(Op::MatMul, {random_tensor({0, 1, 3, 4}, DType::F32, 1),
                                random_tensor({5, 4, 2}, DType::F32, 2)})
                .dims(),
            (Dims{0, 5, 3, 2}));
  // K = 0: a sum over nothing is 0 (floats and integers).
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    Tensor got = run_op(Op::MatMul, {Tensor({2, 3, 0}, dt), Tensor({0, 4}, dt)});
    EXPECT_TRUE(testing::all_equal(got, Tensor({2, 3, 4}, dt))) << dtype_name(dt);
  }
}

TEST(MatMul, SameResultForAnyThreadCount) {
  Tensor a = random_tensor({3, 70, 90}, DType::F32, 21),
         b = random_tensor({90, 110}, DType::F32, 22);
  Tensor c = random_tensor({2, 200, 64}, DType::F32, 23),
         d = random_tensor({2, 64, 150}, DType::F32, 24);
  Tensor want_ab = ref_matmul(a, b), want_cd = ref_matmul(c, d);
  for (int threads : {1, 3, 8}) {
    set_num_threads(threads);
    EXPECT_TRUE(all_close(run_op(Op::MatMul, {a, b}), want_ab, kAtol32, kRtol32)) << threads;
    EXPECT_TRUE(all_close(run_op(Op::MatMul, {c, d}), want_cd, kAtol32, kRtol32)) << threads;
  }
  set_num_threads(0);
}

// MatmulPrecision::bf16: a matmul with a constant [N, K] weight (a Linear)
// gives the f32 sums of both operands rounded to bf16; the default keeps f32;
// a matmul of two inputs stays f32 either way.
TEST(MatMul, Bf16PrecisionRoundsTheOperandsOfAConstantWeight) {
  if (cpu_isa() < Isa::avx512 || !has_avx512_bf16())
    GTEST_SKIP() << "CPU has no AVX-512 BF16";  // covered on Zen 4/5 hosts
  const int64_t M = 37, K = 301, N = 70;
  const Tensor x = random_tensor({M, K}, DType::F32, 1), w = random_tensor({N, K}, DType::F32, 2);
  Graph g;
  Builder b(g);
  NodeId xi = b.input("x", x.shape()), wp = b.param("w", w.shape()),
         wi = b.input("w_in", w.shape());
  g.add_output("linear", g.add(Op::MatMul, {xi, wp}, Attrs{{"transpose_b", true}}));
  g.add_output("inputs", g.add(Op::MatMul, {xi, wi}, Attrs{{"transpose_b", true}}));
  auto run = [&](MatmulPrecision p) {
    CompileOptions o;
    o.backend = make_cpu_backend({.matmul_precision = p});
    Session s(Executable::compile(g, {{"w", w}}, o));
    return s.run({{"x", x}, {"w_in", w}});
  };
  auto bf16 = [](float v) { return double(bf16_to_f32(f32_to_bf16(v))); };
  auto check = [&](const Tensor& got, bool rounded) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const float a = x.data<float>()[i * K + k], c = w.data<float>()[j * K + k];
          const double p = rounded ? bf16(a) * bf16(c) : double(a) * double(c);
          want += p;
          mag += std::abs(p);
        }
        ASSERT_NEAR(got.data<float>()[i * N + j], want, 1e-6 * mag)
            << "(" << i << "," << j << ") rounded " << rounded;
      }
  };
  auto f32 = run(MatmulPrecision::f32), medium = run(MatmulPrecision::bf16);
  check(f32.at("linear"), false);
  check(medium.at("linear"), true);
  check(medium.at("inputs"), false);
  // The two precisions differ by bf16's rounding, far past f32's.
  double apart = 0;
  for (int64_t i = 0; i < M * N; ++i)
    apart = std::max(apart, double(std::abs(f32.at("linear").data<float>()[i] -
                                            medium.at("linear").data<float>()[i])));
  EXPECT_GT(apart, 1e-3);
  EXPECT_EQ(parse_matmul_precision("bf16"), MatmulPrecision::bf16);
  EXPECT_THROW(parse_matmul_precision("tf32"), Error);
}

TEST(MatMul, RejectsBadOperands) {
  auto f = [](Dims d) { return random_tensor(d, DType::F32, 1); };
  EXPECT_THROW(run_op(Op::MatMul, {f({3, 4}), f({5, 6})}), Error);        // inner dims
  EXPECT_THROW(run_op(Op::MatMul, {f({2, 3, 4}), f({3, 4, 5})}), Error);  // batch 2 vs 3
  EXPECT_THROW(run_op(Op::MatMul, {f({4}), f({5})}), Error);              // 1-d lengths
  EXPECT_THROW(run_op(Op::MatMul, {f({}), f({3})}), Error);               // scalar
  EXPECT_THROW(run_op(Op::MatMul, {f({2, 3}), random_tensor({3, 2}, DType::F64, 2)}), Error);
  EXPECT_THROW(run_op(Op::MatMul, {Tensor({2, 2}, DType::Bool), Tensor({2, 2}, DType::Bool)}),
               Error);
}

}  // namespace
}  // namespace rlx
