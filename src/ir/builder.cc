#include "rlx/builder.h"

namespace rlx {

NodeId Builder::scalar(float v, DType t) {
  Tensor s({}, DType::F32);
  *s.data<float>() = v;
  return g_.constant(t == DType::F32 ? s : s.to(t));
}

NodeId Builder::full(const Dims& dims, double value, DType t) {
  return op(Op::Full, {},
            {{"shape", dims}, {"value", value}, {"dtype", std::string(dtype_name(t))}});
}

NodeId Builder::arange(int64_t count, double start, double step, DType t) {
  return op(
      Op::Arange, {},
      {{"count", count}, {"start", start}, {"step", step}, {"dtype", std::string(dtype_name(t))}});
}

NodeId Builder::linear(NodeId x, NodeId w, NodeId b) {
  int r = g_.node(w).shape.rank();
  NodeId wt = transpose(w, r == 2 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0});
  NodeId y = matmul(x, wt);
  return b >= 0 ? add(y, b) : y;
}

}  // namespace rlx
