// The per-op parity case table shared by the MIL interpreter op tests: a case
// is a one-op graph (or a small builder) with its inputs and tolerances.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::interp_cases {

struct In {
  Dims dims;
  DType dt = DType::F32;
  double lo = -1, hi = 1;
  bool param = false;  // bound as a weight (a const in the package, a blob when >= 10 elems)
  std::function<Tensor()> make = nullptr;  // fixed values instead of random ones
};

using BuildFn = std::function<NodeId(Builder&, const std::vector<NodeId>&)>;

struct OpCase {
  std::string name;
  Op op;
  std::vector<In> ins;
  Attrs attrs = {};
  double tol32 = 1e-5;  // atol = rtol for the fp32 program
  double tol16 = 4e-3;  // atol = rtol for the fp16 program; < 0: fp32 only
  BuildFn build = nullptr;
  int opset = 6;
  int min_opset = 5;  // lower opsets refuse the case (checked elsewhere)
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<int64_t> v(std::initializer_list<int64_t> l) { return l; }

inline In f(Dims d, double lo = -1, double hi = 1) { return In{std::move(d), DType::F32, lo, hi}; }
inline In p(Dims d, double lo = -1, double hi = 1) {
  return In{std::move(d), DType::F32, lo, hi, true};
}
inline In ints(Dims d, double lo, double hi, DType t = DType::I32) {
  return In{std::move(d), t, lo, hi};
}

// cond = x0 > x1, then the op on (cond, rest...).
inline BuildFn with_cond(Op op) {
  return [op](Builder& b, const std::vector<NodeId>& x) {
    std::vector<NodeId> in{b.op(Op::Gt, {x[0], x[1]})};
    in.insert(in.end(), x.begin() + 2, x.end());
    return b.op(op, in);
  };
}
inline BuildFn logical(Op op) {
  return [op](Builder& b, const std::vector<NodeId>& x) {
    return b.op(op, {b.op(Op::Gt, {x[0], x[1]}), b.op(Op::Lt, {x[0], x[2]})});
  };
}

// Cases for the backward ops, rope, indexing and resampling (interp_ops2_test.cc).
std::vector<OpCase> extra_cases();

}  // namespace rlx::interp_cases
