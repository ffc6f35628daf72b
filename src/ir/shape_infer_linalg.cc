// Shape rule of linalg: A [..., m, n] with static matrix dims, B / tau with A's batch dims; each
// function's outputs as ops.def lists them. Errors name the function and the shapes.
#include "ir/shape_infer_linalg.h"

#include <algorithm>
#include <string>

#include "rlx/error.h"
#include "rlx/op_attrs.h"

namespace rlx {
namespace {

struct Matrix {
  std::vector<Dim> batch;
  int64_t rows = 0, cols = 0;
};

Matrix matrix_of(const std::string& fn, const char* what, const Shape& s) {
  RLX_CHECK(s.rank() >= 2, "linalg ", fn, ": ", what, " must be a matrix or a batch of them, got ",
            s.str());
  const Dim &r = s.dims[size_t(s.rank() - 2)], &c = s.dims[size_t(s.rank() - 1)];
  RLX_CHECK(r.is_static() && c.is_static(), "linalg ", fn, ": ", what, " ", s.str(),
            " must have static matrix dims");
  return {std::vector<Dim>(s.dims.begin(), s.dims.end() - 2), r.value, c.value};
}

Shape with_batch(const Matrix& a, std::vector<Dim> tail, DType t) {
  std::vector<Dim> d = a.batch;
  d.insert(d.end(), tail.begin(), tail.end());
  return Shape(std::move(d), t);
}

}  // namespace

std::vector<Shape> infer_linalg(const Node& n, const std::vector<const Shape*>& in) {
  const auto& a = n.attrs_as<LinalgAttrs>();
  const LinalgFn fn = a.fn;
  const std::string name(to_string(fn));
  const Shape& x = *in[0];
  RLX_CHECK(x.dtype == DType::F32 || x.dtype == DType::F64, "linalg ", name,
            ": A must be f32 or f64, got ", x.str());
  const bool two = fn == LinalgFn::solve || fn == LinalgFn::triangular_solve ||
                   fn == LinalgFn::householder_product;
  RLX_CHECK(in.size() == (two ? 2u : 1u), "linalg ", name, " takes ", two ? 2 : 1,
            " input(s), got ", in.size());
  const Matrix A = matrix_of(name, "A", x);
  const int64_t m = A.rows, nc = A.cols, k = std::min(m, nc);
  const DType t = x.dtype;
  const Shape info = with_batch(A, {}, DType::I32), batch_only = with_batch(A, {}, t);
  const bool square_only = fn != LinalgFn::lu && fn != LinalgFn::qr && fn != LinalgFn::geqrf &&
                           fn != LinalgFn::householder_product && fn != LinalgFn::svd;
  RLX_CHECK(!square_only || m == nc, "linalg ", name, ": A must be square, got ", x.str());
  auto same_batch = [&](const Shape& s, const char* what, int keep) {
    RLX_CHECK(s.dtype == t, "linalg ", name, ": ", what, " ", s.str(), " must have A's dtype (A ",
              x.str(), ")");
    RLX_CHECK(s.rank() == x.rank() - 2 + keep &&
                  std::equal(A.batch.begin(), A.batch.end(), s.dims.begin()),
              "linalg ", name, ": ", what, " ", s.str(), " must have A's batch dims (A ", x.str(),
              ")");
  };
  switch (fn) {
    case LinalgFn::cholesky:
    case LinalgFn::inverse:
      return {x, info};
    case LinalgFn::lu:
      return {with_batch(A, {m, m}, t), with_batch(A, {m, k}, t), with_batch(A, {k, nc}, t)};
    case LinalgFn::det:
      return {batch_only};
    case LinalgFn::slogdet:
      return {batch_only, batch_only};
    case LinalgFn::solve:
    case LinalgFn::triangular_solve: {
      const Shape& b = *in[1];
      same_batch(b, "B", 2);
      const Matrix B = matrix_of(name, "B", b);
      RLX_CHECK((a.left ? B.rows : B.cols) == m, "linalg ", name, ": B ", b.str(),
                " does not fit A ", x.str(), a.left ? " (A X = B)" : " (X A = B)");
      if (fn == LinalgFn::solve) return {b, info};
      return {b};
    }
    case LinalgFn::qr:
      if (a.full_matrices) return {with_batch(A, {m, m}, t), x};
      return {with_batch(A, {m, k}, t), with_batch(A, {k, nc}, t)};
    case LinalgFn::geqrf:
      return {x, with_batch(A, {k}, t)};
    case LinalgFn::householder_product: {
      const Shape& tau = *in[1];
      same_batch(tau, "tau", 1);
      const int64_t taus = tau.dims.back().is_static() ? tau.dims.back().value : -1;
      RLX_CHECK(taus >= 0 && taus <= nc && nc <= m, "linalg ", name, ": needs tau [..., t] with ",
                "t <= n <= m, got A ", x.str(), " and tau ", tau.str());
      return {x};
    }
    case LinalgFn::svd:
      if (a.full_matrices)
        return {with_batch(A, {m, m}, t), with_batch(A, {k}, t), with_batch(A, {nc, nc}, t)};
      return {with_batch(A, {m, k}, t), with_batch(A, {k}, t), with_batch(A, {k, nc}, t)};
    case LinalgFn::eigh:
      return {with_batch(A, {m}, t), x};
  }
  throw make_error("linalg: unknown function");
}

}  // namespace rlx
