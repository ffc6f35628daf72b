// MIL building blocks of the lowerings that unroll a sequence op step by step (lstm / gru / rnn
// in lower_recurrent.cc, the state-space scans in lower_state_space.cc): static slices, concat,
// matmul with its result type, and names for the many temporaries.
#pragma once
#include <string>
#include <vector>

#include "lower.h"

namespace rlx::coreml {

struct Unroll {
  Lowering& L;
  std::string h;  // the node's hint: every temporary's name starts with it
  int n = 0;      // temporaries so far

  std::string name(const char* what) { return h + "_" + what + std::to_string(n++); }
  // x[begin:end] per axis (all static, in range).
  Val slice(const Val& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
    Type t{x.type.dt, {}};
    for (size_t k = 0; k < begin.size(); ++k) t.dims.push_back(end[k] - begin[k]);
    const std::string nm = name("slice");
    return L.b.op(
        "slice_by_index",
        {{"x", x}, {"begin", L.b.ints(begin, nm + "_b")}, {"end", L.b.ints(end, nm + "_e")}}, t,
        nm);
  }
  // Step t of a [B, S, ...] value, as [B, ...] reshaped to `dims`.
  Val step(const Val& x, int64_t t, const std::vector<int64_t>& dims) {
    std::vector<int64_t> begin(x.type.dims.size(), 0), end = x.type.dims;
    begin[1] = t;
    end[1] = t + 1;
    return L.reshape(slice(x, begin, end), dims, name("step"));
  }
  Val bin(const char* op, const Val& a, const Val& b) { return L.binary(op, a, b, name(op)); }
  Val un(const char* op, const Val& x) { return L.unary(op, x, name(op)); }
  // x @ y over the last two axes (transposed first when tx / ty); batch axes are x's.
  Val matmul(const Val& x, const Val& y, bool tx, bool ty) {
    Type t{x.type.dt, x.type.dims};
    const size_t r = t.dims.size(), ry = y.type.dims.size();
    t.dims[r - 2] = x.type.dims[r - (tx ? 1 : 2)];
    t.dims[r - 1] = y.type.dims[ry - (ty ? 2 : 1)];
    const std::string nm = name("mm");
    return L.b.op("matmul",
                  {{"x", x},
                   {"y", y},
                   {"transpose_x", L.b.boolean(tx, nm + "_tx")},
                   {"transpose_y", L.b.boolean(ty, nm + "_ty")}},
                  t, nm);
  }
  Val concat(const std::vector<Val>& xs, int64_t axis) {
    if (xs.size() == 1) return xs[0];
    Type t = xs[0].type;
    t.dims[size_t(axis)] = 0;
    for (const Val& v : xs) t.dims[size_t(axis)] += v.type.dims[size_t(axis)];
    const std::string nm = name("concat");
    return L.b.op("concat",
                  {{"values", xs},
                   {"axis", L.b.int_scalar(axis, nm + "_axis")},
                   {"interleave", L.b.boolean(false, nm + "_il")}},
                  t, nm);
  }
};

}  // namespace rlx::coreml
