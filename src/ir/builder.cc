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
  // w [out, in] is read in place (transpose_b); a 1-d w is a dot product.
  NodeId y =
      g_.node(w).shape.rank() == 2 ? op(Op::MatMul, {x, w}, {{"transpose_b", true}}) : matmul(x, w);
  return b >= 0 ? add(y, b) : y;
}

}  // namespace rlx
