// linalg against the identities that define each function, checked in double with loops written
// here (L L^T = A, P L U = A, Q R = A with Q orthonormal, U S Vh = A, A Q = Q diag(w), A X = B),
// and det / slogdet against a Gaussian elimination written here; f64 and f32, batched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/testing.h"

namespace rlx {
namespace {
using namespace rlx::testing;
using Mat = std::vector<double>;  // row-major

std::vector<Tensor> linalg(const std::string& fn, const std::vector<Tensor>& in, Attrs attrs = {}) {
  attrs.set("fn", fn);
  return run_op_outputs(Op::Linalg, in, attrs);
}

// The b-th [r, c] matrix of t, as double.
Mat mat(const Tensor& t, int64_t b, int64_t r, int64_t c) {
  const Tensor d = t.to(DType::F64).contiguous();
  const double* p = d.data<double>() + b * r * c;
  return Mat(p, p + r * c);
}

Mat matmul(const Mat& a, const Mat& b, int64_t m, int64_t k, int64_t n) {
  Mat c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        c[size_t(i * n + j)] += a[size_t(i * k + p)] * b[size_t(p * n + j)];
  return c;
}

Mat transpose(const Mat& a, int64_t r, int64_t c) {
  Mat t(size_t(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t[size_t(j * r + i)] = a[size_t(i * c + j)];
  return t;
}

Mat eye(int64_t n) {
  Mat e(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) e[size_t(i * n + i)] = 1;
  return e;
}

double max_diff(const Mat& a, const Mat& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// [batch..., n, n] symmetric positive definite: M M^T + n I.
Tensor spd(const Dims& batch, int64_t n, DType t, uint64_t seed) {
  Dims d = batch;
  d.push_back(n);
  d.push_back(n);
  const Tensor m = random_tensor(d, DType::F64, seed);
  Tensor out(d, DType::F64);
  const int64_t count = m.numel() / (n * n);
  for (int64_t b = 0; b < count; ++b) {
    const Mat a = mat(m, b, n, n);
    Mat s = matmul(a, transpose(a, n, n), n, n, n);
    for (int64_t i = 0; i < n; ++i) s[size_t(i * n + i)] += double(n);
    std::copy(s.begin(), s.end(), out.data<double>() + b * n * n);
  }
  return out.to(t);
}

// The tolerance of a dtype's results against double identities.
double tol(DType t) { return t == DType::F64 ? 1e-10 : 2e-5; }

class Linalg : public ::testing::TestWithParam<DType> {};

TEST_P(Linalg, CholeskyLowerAndUpperRebuildA) {
  const DType t = GetParam();
  const int64_t n = 5;
  const Tensor A = spd({2, 3}, n, t, 1);
  for (bool upper : {false, true}) {
    Attrs at;
    at.set("upper", upper);
    const auto out = linalg("cholesky", {A}, at);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].dtype(), DType::I32);
    for (int64_t b = 0; b < 6; ++b) {
      const Mat F = mat(out[0], b, n, n), a = mat(A, b, n, n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          if (upper ? j < i : j > i) {
            EXPECT_EQ(F[size_t(i * n + j)], 0.0);
          }
      const Mat back =
          upper ? matmul(transpose(F, n, n), F, n, n, n) : matmul(F, transpose(F, n, n), n, n, n);
      EXPECT_LT(max_diff(back, a), tol(t) * 10 * n) << b;
      EXPECT_EQ(out[1].data<int32_t>()[b], 0);
    }
  }
  // Not positive definite: info names the failing leading minor (here the second).
  const Tensor bad = Tensor::from_vector<double>({2, 2}, {1, 2, 2, 1}, DType::F64).to(t);
  EXPECT_EQ(linalg("cholesky", {bad})[1].data<int32_t>()[0], 2);
}

TEST_P(Linalg, LuRebuildsAWithAPermutation) {
  const DType t = GetParam();
  for (auto [m, n] : {std::pair<int64_t, int64_t>{4, 4}, {5, 3}, {3, 5}}) {
    const int64_t k = std::min(m, n);
    const Tensor A = random_tensor({2, m, n}, t, uint64_t(m * 10 + n));
    const auto out = linalg("lu", {A});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].dims(), (Dims{2, m, m}));
    EXPECT_EQ(out[1].dims(), (Dims{2, m, k}));
    EXPECT_EQ(out[2].dims(), (Dims{2, k, n}));
    for (int64_t b = 0; b < 2; ++b) {
      const Mat P = mat(out[0], b, m, m), L = mat(out[1], b, m, k), U = mat(out[2], b, k, n);
      EXPECT_EQ(max_diff(matmul(P, transpose(P, m, m), m, m, m), eye(m)), 0.0);
      for (int64_t i = 0; i < m; ++i) {
        if (i < k) {
          EXPECT_EQ(L[size_t(i * k + i)], 1.0);
        }
        for (int64_t j = i + 1; j < k; ++j) EXPECT_EQ(L[size_t(i * k + j)], 0.0);
        // partial pivoting keeps |L| <= 1
        for (int64_t j = 0; j < std::min(i, k); ++j) EXPECT_LE(std::abs(L[size_t(i * k + j)]), 1.0);
      }
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < i; ++j) EXPECT_EQ(U[size_t(i * n + j)], 0.0);
      const Mat back = matmul(P, matmul(L, U, m, k, n), m, m, n);
      EXPECT_LT(max_diff(back, mat(A, b, m, n)), tol(t) * 10) << m << "x" << n;
    }
  }
}

// det by Gaussian elimination with partial pivoting, in double.
double det_ref(Mat a, int64_t n) {
  double det = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::abs(a[size_t(r * n + c)]) > std::abs(a[size_t(p * n + c)])) p = r;
    if (a[size_t(p * n + c)] == 0) return 0;
    if (p != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[size_t(p * n + j)], a[size_t(c * n + j)]);
      det = -det;
    }
    det *= a[size_t(c * n + c)];
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = a[size_t(r * n + c)] / a[size_t(c * n + c)];
      for (int64_t j = c; j < n; ++j) a[size_t(r * n + j)] -= f * a[size_t(c * n + j)];
    }
  }
  return det;
}

TEST_P(Linalg, DetAndSlogdetMatchEliminationAndSingularIsZero) {
  const DType t = GetParam();
  const int64_t n = 4;
  const Tensor A = random_tensor({3, n, n}, t, 7);
  const Tensor det = linalg("det", {A})[0];
  const auto sl = linalg("slogdet", {A});
  EXPECT_EQ(det.dims(), (Dims{3}));
  for (int64_t b = 0; b < 3; ++b) {
    const double want = det_ref(mat(A, b, n, n), n);
    EXPECT_NEAR(det.to(DType::F64).data<double>()[b], want, tol(t) * 10);
    EXPECT_EQ(sl[0].to(DType::F64).data<double>()[b], want > 0 ? 1.0 : -1.0);
    EXPECT_NEAR(sl[1].to(DType::F64).data<double>()[b], std::log(std::abs(want)), tol(t) * 10);
  }
  const Tensor sing =
      Tensor::from_vector<double>({3, 3}, {1, 2, 3, 2, 4, 6, 1, 0, 1}, DType::F64).to(t);
  EXPECT_EQ(linalg("det", {sing})[0].to(DType::F64).data<double>()[0], 0.0);
  const auto s = linalg("slogdet", {sing});
  EXPECT_EQ(s[0].to(DType::F64).data<double>()[0], 0.0);
  EXPECT_EQ(s[1].to(DType::F64).data<double>()[0], -INFINITY);
}

TEST_P(Linalg, InverseAndSolveBothSides) {
  const DType t = GetParam();
  const int64_t n = 4, r = 3;
  const Tensor A = spd({2}, n, t, 3);  // well conditioned
  const auto inv = linalg("inverse", {A});
  const Tensor Bl = random_tensor({2, n, r}, t, 4), Br = random_tensor({2, r, n}, t, 5);
  const auto xl = linalg("solve", {A, Bl});
  Attrs right;
  right.set("left", false);
  const auto xr = linalg("solve", {A, Br}, right);
  for (int64_t b = 0; b < 2; ++b) {
    const Mat a = mat(A, b, n, n);
    EXPECT_LT(max_diff(matmul(a, mat(inv[0], b, n, n), n, n, n), eye(n)), tol(t) * 10);
    EXPECT_LT(max_diff(matmul(a, mat(xl[0], b, n, r), n, n, r), mat(Bl, b, n, r)), tol(t) * 10);
    EXPECT_LT(max_diff(matmul(mat(xr[0], b, r, n), a, r, n, n), mat(Br, b, r, n)), tol(t) * 10);
    EXPECT_EQ(inv[1].data<int32_t>()[b], 0);
    EXPECT_EQ(xl[1].data<int32_t>()[b], 0);
  }
  // Singular: info > 0 and NaN results, not garbage.
  const Tensor sing = Tensor::from_vector<double>({2, 2}, {1, 2, 2, 4}, DType::F64).to(t);
  const auto si = linalg("inverse", {sing});
  EXPECT_GT(si[1].data<int32_t>()[0], 0);
  EXPECT_TRUE(std::isnan(si[0].to(DType::F64).data<double>()[0]));
  const auto ss =
      linalg("solve", {sing, Tensor::from_vector<double>({2, 1}, {1, 1}, DType::F64).to(t)});
  EXPECT_GT(ss[1].data<int32_t>()[0], 0);
}

TEST_P(Linalg, TriangularSolveEveryForm) {
  const DType t = GetParam();
  const int64_t n = 4, r = 2;
  Tensor A = random_tensor({n, n}, DType::F64, 11);
  for (int64_t i = 0; i < n; ++i) A.data<double>()[i * n + i] += 3;  // away from singular
  for (bool upper : {false, true})
    for (bool left : {false, true})
      for (bool unit : {false, true}) {
        Attrs at;
        at.set("upper", upper);
        at.set("left", left);
        at.set("unitriangular", unit);
        const Tensor B = random_tensor(left ? Dims{n, r} : Dims{r, n}, t, 12);
        const Tensor X = linalg("triangular_solve", {A.to(t), B}, at)[0];
        // The triangle the solve reads (the other one holds values that must be ignored).
        Mat tri = mat(A, 0, n, n);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) {
            if (upper ? j < i : j > i) tri[size_t(i * n + j)] = 0;
            if (unit && i == j) tri[size_t(i * n + j)] = 1;
          }
        const Mat got =
            left ? matmul(tri, mat(X, 0, n, r), n, n, r) : matmul(mat(X, 0, r, n), tri, r, n, n);
        EXPECT_LT(max_diff(got, mat(B, 0, left ? n : r, left ? r : n)), tol(t) * 10)
            << upper << left << unit;
      }
}

void expect_orthonormal_columns(const Mat& q, int64_t m, int64_t c, double eps) {
  EXPECT_LT(max_diff(matmul(transpose(q, m, c), q, c, m, c), eye(c)), eps);
}

TEST_P(Linalg, QrReducedCompleteAndHouseholderProduct) {
  const DType t = GetParam();
  for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 3}, {3, 5}, {4, 4}}) {
    const int64_t k = std::min(m, n);
    const Tensor A = random_tensor({2, m, n}, t, uint64_t(m + 7 * n));
    for (bool full : {false, true}) {
      Attrs at;
      at.set("full_matrices", full);
      const auto qr = linalg("qr", {A}, at);
      const int64_t qc = full ? m : k;
      EXPECT_EQ(qr[0].dims(), (Dims{2, m, qc}));
      EXPECT_EQ(qr[1].dims(), (Dims{2, qc, n}));
      for (int64_t b = 0; b < 2; ++b) {
        const Mat Q = mat(qr[0], b, m, qc), R = mat(qr[1], b, qc, n);
        expect_orthonormal_columns(Q, m, qc, tol(t) * 10);
        for (int64_t i = 0; i < qc; ++i)
          for (int64_t j = 0; j < std::min(i, n); ++j) EXPECT_EQ(R[size_t(i * n + j)], 0.0);
        EXPECT_LT(max_diff(matmul(Q, R, m, qc, n), mat(A, b, m, n)), tol(t) * 10);
      }
    }
    if (m < n) continue;
    // geqrf's packed form and householder_product give back the reduced Q.
    const auto packed = linalg("geqrf", {A});
    EXPECT_EQ(packed[1].dims(), (Dims{2, k}));
    const Tensor Q = linalg("householder_product", packed)[0];
    EXPECT_TRUE(all_close(Q, linalg("qr", {A})[0], tol(t), 0));
  }
}

TEST_P(Linalg, SvdReducedAndFull) {
  const DType t = GetParam();
  for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 3}, {3, 5}, {4, 4}}) {
    const int64_t k = std::min(m, n);
    const Tensor A = random_tensor({2, m, n}, t, uint64_t(3 * m + n));
    for (bool full : {false, true}) {
      Attrs at;
      at.set("full_matrices", full);
      const auto usv = linalg("svd", {A}, at);
      const int64_t uc = full ? m : k, vr = full ? n : k;
      EXPECT_EQ(usv[0].dims(), (Dims{2, m, uc}));
      EXPECT_EQ(usv[1].dims(), (Dims{2, k}));
      EXPECT_EQ(usv[2].dims(), (Dims{2, vr, n}));
      for (int64_t b = 0; b < 2; ++b) {
        const Mat U = mat(usv[0], b, m, uc), S = mat(usv[1], b, 1, k), Vh = mat(usv[2], b, vr, n);
        expect_orthonormal_columns(U, m, uc, tol(t) * 10);
        expect_orthonormal_columns(transpose(Vh, vr, n), n, vr, tol(t) * 10);
        for (int64_t i = 0; i < k; ++i) {
          EXPECT_GE(S[size_t(i)], 0.0);
          if (i) {
            EXPECT_LE(S[size_t(i)], S[size_t(i - 1)]);
          }
        }
        Mat US(size_t(m * k));  // the first k columns of U, scaled
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j)
            US[size_t(i * k + j)] = U[size_t(i * uc + j)] * S[size_t(j)];
        const Mat Vk(Vh.begin(), Vh.begin() + k * n);
        EXPECT_LT(max_diff(matmul(US, Vk, m, k, n), mat(A, b, m, n)), tol(t) * 10);
      }
    }
  }
}

TEST_P(Linalg, EighReadsTheNamedTriangle) {
  const DType t = GetParam();
  const int64_t n = 5;
  const Tensor S = spd({2}, n, DType::F64, 21);
  for (bool upper : {false, true}) {
    // The other triangle holds junk the function must not read.
    Tensor A = S.clone();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          if (upper ? j < i : j > i) A.data<double>()[b * n * n + i * n + j] = 1e3;
    Attrs at;
    at.set("upper", upper);
    const auto wq = linalg("eigh", {A.to(t)}, at);
    for (int64_t b = 0; b < 2; ++b) {
      const Mat w = mat(wq[0], b, 1, n), Q = mat(wq[1], b, n, n), s = mat(S, b, n, n);
      expect_orthonormal_columns(Q, n, n, tol(t) * 10);
      Mat QW = Q;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) QW[size_t(i * n + j)] *= w[size_t(j)];
      for (int64_t i = 1; i < n; ++i) EXPECT_LE(w[size_t(i - 1)], w[size_t(i)]);
      EXPECT_LT(max_diff(matmul(s, Q, n, n, n), QW), tol(t) * 100);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Linalg, ::testing::Values(DType::F64, DType::F32),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(LinalgErrors, ShapesAndDtypesAreNamed) {
  auto err = [](const std::string& fn, const std::vector<Tensor>& in) {
    try {
      linalg(fn, in);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("det", {random_tensor({2, 3}, DType::F32, 1)}).find("must be square"),
            std::string::npos);
  EXPECT_NE(err("inverse", {random_tensor({3, 3}, DType::F16, 1)}).find("f32 or f64"),
            std::string::npos);
  EXPECT_NE(err("solve",
                {random_tensor({2, 3, 3}, DType::F32, 1), random_tensor({3, 3, 1}, DType::F32, 2)})
                .find("batch dims"),
            std::string::npos);
  EXPECT_NE(
      err("solve", {random_tensor({3, 3}, DType::F32, 1), random_tensor({4, 1}, DType::F32, 2)})
          .find("does not fit"),
      std::string::npos);
  EXPECT_NE(err("cholesky", {random_tensor({3}, DType::F32, 1)}).find("matrix"), std::string::npos);
}

}  // namespace
}  // namespace rlx
