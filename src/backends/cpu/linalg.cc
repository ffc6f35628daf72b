// linalg: factorizations and solves through OpenBLAS's LAPACK (a library does this best; PyTorch's
// CPU build calls the same routines: potrf, getrf/getri/getrs, geqrf/orgqr, gesdd, syevd, and
// BLAS trsm). LAPACK is column-major, so each matrix of the batch is copied into a column-major
// scratch, factored there and copied out: O(n^2) copies beside O(n^3) work.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/kernels.h"
#include "rlx/error.h"

// LAPACK's Fortran interface (Debian's OpenBLAS ships no lapack.h); the trailing size_t are
// gfortran's hidden lengths of the character arguments.
#define RLX_LAPACK_DECLS(T, p)                                                                   \
  void p##potrf_(const char* uplo, const int* n, T* a, const int* lda, int* info, size_t);       \
  void p##getrf_(const int* m, const int* n, T* a, const int* lda, int* ipiv, int* info);        \
  void p##getri_(const int* n, T* a, const int* lda, const int* ipiv, T* work, const int* lwork, \
                 int* info);                                                                     \
  void p##getrs_(const char* trans, const int* n, const int* nrhs, const T* a, const int* lda,   \
                 const int* ipiv, T* b, const int* ldb, int* info, size_t);                      \
  void p##geqrf_(const int* m, const int* n, T* a, const int* lda, T* tau, T* work,              \
                 const int* lwork, int* info);                                                   \
  void p##orgqr_(const int* m, const int* n, const int* k, T* a, const int* lda, const T* tau,   \
                 T* work, const int* lwork, int* info);                                          \
  void p##gesdd_(const char* jobz, const int* m, const int* n, T* a, const int* lda, T* s, T* u, \
                 const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork, int* iwork,  \
                 int* info, size_t);                                                             \
  void p##syevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, T* w,   \
                 T* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,    \
                 size_t);
extern "C" {
RLX_LAPACK_DECLS(float, s)
RLX_LAPACK_DECLS(double, d)
}

namespace rlx::cpu {
namespace {

// One precision's routines with square leading dims (lda = rows, at least 1).
template <typename T>
struct Lapack;
#define RLX_LAPACK_TRAITS(T, p)                                                                   \
  template <>                                                                                     \
  struct Lapack<T> {                                                                              \
    static int potrf(char uplo, int n, T* a) {                                                    \
      int info = 0, ld = std::max(1, n);                                                          \
      p##potrf_(&uplo, &n, a, &ld, &info, 1);                                                     \
      return info;                                                                                \
    }                                                                                             \
    static int getrf(int m, int n, T* a, int* ipiv) {                                             \
      int info = 0, ld = std::max(1, m);                                                          \
      p##getrf_(&m, &n, a, &ld, ipiv, &info);                                                     \
      return info;                                                                                \
    }                                                                                             \
    static int getri(int n, T* a, const int* ipiv) {                                              \
      int info = 0, ld = std::max(1, n), query = -1;                                              \
      T size = 0;                                                                                 \
      p##getri_(&n, a, &ld, ipiv, &size, &query, &info);                                          \
      int lwork = std::max(1, int(size));                                                         \
      std::vector<T> work(static_cast<size_t>(lwork));                                            \
      p##getri_(&n, a, &ld, ipiv, work.data(), &lwork, &info);                                    \
      return info;                                                                                \
    }                                                                                             \
    static int getrs(char trans, int n, int nrhs, const T* a, const int* ipiv, T* b) {            \
      int info = 0, ld = std::max(1, n);                                                          \
      p##getrs_(&trans, &n, &nrhs, a, &ld, ipiv, b, &ld, &info, 1);                               \
      return info;                                                                                \
    }                                                                                             \
    static int geqrf(int m, int n, T* a, T* tau) {                                                \
      int info = 0, ld = std::max(1, m), query = -1;                                              \
      T size = 0;                                                                                 \
      p##geqrf_(&m, &n, a, &ld, tau, &size, &query, &info);                                       \
      int lwork = std::max(1, int(size));                                                         \
      std::vector<T> work(static_cast<size_t>(lwork));                                            \
      p##geqrf_(&m, &n, a, &ld, tau, work.data(), &lwork, &info);                                 \
      return info;                                                                                \
    }                                                                                             \
    static int orgqr(int m, int n, int k, T* a, const T* tau) {                                   \
      int info = 0, ld = std::max(1, m), query = -1;                                              \
      T size = 0;                                                                                 \
      p##orgqr_(&m, &n, &k, a, &ld, tau, &size, &query, &info);                                   \
      int lwork = std::max(1, int(size));                                                         \
      std::vector<T> work(static_cast<size_t>(lwork));                                            \
      p##orgqr_(&m, &n, &k, a, &ld, tau, work.data(), &lwork, &info);                             \
      return info;                                                                                \
    }                                                                                             \
    static int gesdd(char job, int m, int n, T* a, T* s, T* u, T* vt, int vrows) {                \
      int info = 0, ld = std::max(1, m), ldvt = std::max(1, vrows), query = -1;                   \
      std::vector<int> iwork(size_t(8 * std::max(1, std::min(m, n))));                            \
      T size = 0;                                                                                 \
      p##gesdd_(&job, &m, &n, a, &ld, s, u, &ld, vt, &ldvt, &size, &query, iwork.data(), &info,   \
                1);                                                                               \
      int lwork = std::max(1, int(size));                                                         \
      std::vector<T> work(static_cast<size_t>(lwork));                                            \
      p##gesdd_(&job, &m, &n, a, &ld, s, u, &ld, vt, &ldvt, work.data(), &lwork, iwork.data(),    \
                &info, 1);                                                                        \
      return info;                                                                                \
    }                                                                                             \
    static int syevd(char uplo, int n, T* a, T* w) {                                              \
      int info = 0, ld = std::max(1, n), query = -1, isize = 0;                                   \
      const char job = 'V';                                                                       \
      T size = 0;                                                                                 \
      p##syevd_(&job, &uplo, &n, a, &ld, w, &size, &query, &isize, &query, &info, 1, 1);          \
      int lwork = std::max(1, int(size)), liwork = std::max(1, isize);                            \
      std::vector<T> work(static_cast<size_t>(lwork));                                            \
      std::vector<int> iwork(static_cast<size_t>(liwork));                                        \
      p##syevd_(&job, &uplo, &n, a, &ld, w, work.data(), &lwork, iwork.data(), &liwork, &info, 1, \
                1);                                                                               \
      return info;                                                                                \
    }                                                                                             \
    static void trsm(bool left, bool upper, bool unit, int rows, int cols, const T* a, int lda,   \
                     T* b) {                                                                      \
      cblas_##p##trsm(CblasRowMajor, left ? CblasLeft : CblasRight,                               \
                      upper ? CblasUpper : CblasLower, CblasNoTrans,                              \
                      unit ? CblasUnit : CblasNonUnit, rows, cols, T(1), a, lda, b,               \
                      std::max(1, cols));                                                         \
    }                                                                                             \
  };
RLX_LAPACK_TRAITS(float, s)
RLX_LAPACK_TRAITS(double, d)

// Row-major [r, c] -> column-major with leading dim r.
template <typename T>
std::vector<T> to_col(const T* src, int64_t r, int64_t c) {
  std::vector<T> dst(size_t(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) dst[size_t(j * r + i)] = src[i * c + j];
  return dst;
}

// The top-left [r, c] of a column-major matrix with leading dim ld -> row-major.
template <typename T>
void from_col(const T* src, int64_t ld, int64_t r, int64_t c, T* dst) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) dst[i * c + j] = src[j * ld + i];
}

template <typename T>
void fill(T* p, int64_t count, T v) {
  std::fill(p, p + count, v);
}

template <typename T>
void set_identity(T* p, int64_t n) {
  fill(p, n * n, T(0));
  for (int64_t i = 0; i < n; ++i) p[i * n + i] = T(1);
}

template <typename T>
void linalg_typed(const KernelCall& c) {
  using L = Lapack<T>;
  const auto& at = c.node.attrs_as<LinalgAttrs>();
  const Tensor& A = c.in[0];
  const Dims& ad = A.dims();
  const int64_t m = ad[ad.size() - 2], n = ad[ad.size() - 1], k = std::min(m, n);
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < ad.size(); ++i) batch *= ad[i];
  RLX_CHECK(m <= INT_MAX / std::max<int64_t>(1, n) && m * n <= INT_MAX / 8, c.node.label(),
            ": matrices of ", A.shape().str(), " are too large for LAPACK's 32-bit sizes");
  const int im = int(m), in = int(n), ik = int(k);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  auto out = [&](size_t i) { return c.outs[i].data<T>(); };
  auto info_out = [&](size_t i) { return c.outs[i].data<int32_t>(); };
  std::vector<int> ipiv(size_t(std::max<int64_t>(1, k)));
  for (int64_t b = 0; b < batch; ++b) {
    const T* a_in = A.data<T>() + b * m * n;
    // trsm reads the row-major matrix in place; the LAPACK routines take a column-major copy.
    std::vector<T> a = at.fn == LinalgFn::triangular_solve ? std::vector<T>() : to_col(a_in, m, n);
    switch (at.fn) {
      case LinalgFn::cholesky: {
        const int info = L::potrf(at.upper ? 'U' : 'L', in, a.data());
        T* o = out(0) + b * n * n;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            o[i * n + j] = (at.upper ? j >= i : j <= i) ? a[size_t(j * n + i)] : T(0);
        info_out(1)[b] = info;
        break;
      }
      case LinalgFn::lu: {
        L::getrf(im, in, a.data(), ipiv.data());
        // getrf's row swaps, applied in order, give the row of A that each row of L U is.
        std::vector<int64_t> perm(static_cast<size_t>(m));
        std::iota(perm.begin(), perm.end(), 0);
        for (int64_t i = 0; i < k; ++i) std::swap(perm[size_t(i)], perm[size_t(ipiv[i] - 1)]);
        T *P = out(0) + b * m * m, *Lo = out(1) + b * m * k, *U = out(2) + b * k * n;
        fill(P, m * m, T(0));
        for (int64_t i = 0; i < m; ++i) P[perm[size_t(i)] * m + i] = T(1);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j)
            Lo[i * k + j] = i == j ? T(1) : i > j ? a[size_t(j * m + i)] : T(0);
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < n; ++j) U[i * n + j] = j >= i ? a[size_t(j * m + i)] : T(0);
        break;
      }
      case LinalgFn::det:
      case LinalgFn::slogdet: {
        L::getrf(in, in, a.data(), ipiv.data());
        // det = (-1)^swaps * prod(diag U), as PyTorch forms it.
        T swaps = 1, prod = 1, sign = 1, logabs = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T d = a[size_t(i * n + i)];
          if (ipiv[size_t(i)] != i + 1) swaps = -swaps;
          prod *= d;
          sign *= d > 0 ? T(1) : d < 0 ? T(-1) : T(0);
          logabs += std::log(std::abs(d));
        }
        if (at.fn == LinalgFn::det) {
          out(0)[b] = swaps * prod;
        } else {
          out(0)[b] = swaps * sign;
          out(1)[b] = sign == 0 ? -std::numeric_limits<T>::infinity() : logabs;
        }
        break;
      }
      case LinalgFn::inverse: {
        int info = L::getrf(in, in, a.data(), ipiv.data());
        if (info == 0) info = L::getri(in, a.data(), ipiv.data());
        T* o = out(0) + b * n * n;
        if (info == 0)
          from_col(a.data(), n, n, n, o);
        else
          fill(o, n * n, nan);
        info_out(1)[b] = info;
        break;
      }
      case LinalgFn::solve: {
        const int64_t r = at.left ? c.in[1].dims().back() : c.in[1].dims()[ad.size() - 2];
        const T* bm = c.in[1].data<T>() + b * n * r;
        T* x = out(0) + b * n * r;
        int info = L::getrf(in, in, a.data(), ipiv.data());
        if (info == 0) {
          // X A = B is A^T X^T = B^T, whose column-major right-hand side is B as stored.
          std::vector<T> rhs = at.left ? to_col(bm, n, r) : std::vector<T>(bm, bm + n * r);
          info = L::getrs(at.left ? 'N' : 'T', in, int(r), a.data(), ipiv.data(), rhs.data());
          if (at.left)
            from_col(rhs.data(), n, n, r, x);
          else
            std::copy(rhs.begin(), rhs.end(), x);
        } else {
          fill(x, n * r, nan);
        }
        info_out(1)[b] = info;
        break;
      }
      case LinalgFn::triangular_solve: {
        const Dims& bd = c.in[1].dims();
        const int64_t rows = bd[bd.size() - 2], cols = bd.back();
        T* x = out(0) + b * rows * cols;
        std::copy_n(c.in[1].data<T>() + b * rows * cols, rows * cols, x);
        if (rows * cols > 0)
          L::trsm(at.left, at.upper, at.unitriangular, int(rows), int(cols), a_in, std::max(1, in),
                  x);
        break;
      }
      case LinalgFn::qr:
      case LinalgFn::geqrf: {
        std::vector<T> tau(size_t(std::max<int64_t>(1, k)));
        L::geqrf(im, in, a.data(), tau.data());
        if (at.fn == LinalgFn::geqrf) {
          from_col(a.data(), m, m, n, out(0) + b * m * n);
          std::copy_n(tau.data(), k, out(1) + b * k);
          break;
        }
        const int64_t qc = at.full_matrices ? m : k, rr = at.full_matrices ? m : k;
        T* R = out(1) + b * rr * n;
        for (int64_t i = 0; i < rr; ++i)
          for (int64_t j = 0; j < n; ++j) R[i * n + j] = j >= i ? a[size_t(j * m + i)] : T(0);
        std::vector<T> q(size_t(m * qc), T(0));
        std::copy_n(a.data(), m * k, q.data());  // the k reflectors' columns
        L::orgqr(im, int(qc), ik, q.data(), tau.data());
        from_col(q.data(), m, m, qc, out(0) + b * m * qc);
        break;
      }
      case LinalgFn::householder_product: {
        const int64_t t = c.in[1].dims().back();
        L::orgqr(im, in, int(t), a.data(), c.in[1].data<T>() + b * t);
        from_col(a.data(), m, m, n, out(0) + b * m * n);
        break;
      }
      case LinalgFn::svd: {
        const int64_t uc = at.full_matrices ? m : k, vr = at.full_matrices ? n : k;
        std::vector<T> u(size_t(std::max<int64_t>(1, m * uc))),
            vt(size_t(std::max<int64_t>(1, vr * n)));
        T *U = out(0) + b * m * uc, *S = out(1) + b * k, *Vh = out(2) + b * vr * n;
        if (k == 0) {  // LAPACK returns at once; the full forms are identities
          if (at.full_matrices) set_identity(U, m), set_identity(Vh, n);
          break;
        }
        const int info = L::gesdd(at.full_matrices ? 'A' : 'S', im, in, a.data(), S, u.data(),
                                  vt.data(), int(vr));
        if (info != 0) {  // no convergence
          fill(U, m * uc, nan), fill(S, k, nan), fill(Vh, vr * n, nan);
          break;
        }
        from_col(u.data(), m, m, uc, U);
        from_col(vt.data(), std::max<int64_t>(1, vr), vr, n, Vh);
        break;
      }
      case LinalgFn::eigh: {
        T* w = out(0) + b * n;
        const int info = L::syevd(at.upper ? 'U' : 'L', in, a.data(), w);
        if (info != 0) {
          fill(w, n, nan), fill(out(1) + b * n * n, n * n, nan);
          break;
        }
        from_col(a.data(), n, n, n, out(1) + b * n * n);
        break;
      }
    }
  }
}

}  // namespace

void linalg(const KernelCall& c) {
  const DType t = c.in[0].dtype();
  RLX_CHECK(t == DType::F32 || t == DType::F64, c.node.label(), ": linalg takes f32 or f64, got ",
            c.in[0].shape().str());
  if (t == DType::F64)
    linalg_typed<double>(c);
  else
    linalg_typed<float>(c);
}

}  // namespace rlx::cpu
