// Memory-bound ops on [B,S,D] activations: softmax and layer_norm over the last
// axis, binary add/mul and unary gelu (erf)/silu. Bytes = bytes read + written
// (each input once, the output once), the minimum traffic of a fused kernel.
#include "bench_util.h"

namespace rlx::bench {

namespace {

std::string dims_name(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

void add_unary(const std::string& op_name, Op op, Attrs attrs, const Dims& d) {
  const double n = double(numel(d));
  add(
      op_name + "/" + dims_name(d),
      [=] {
        Case c;
        Builder b(c.graph);
        auto x = b.input("x", Shape(d, DType::F32));
        c.graph.add_output("y", b.op(op, {x}, attrs));
        c.inputs["x"] = random_f32(d, 3, -4, 4);
        return c;
      },
      0, 2 * 4 * n);
}

void add_binary(const std::string& op_name, Op op, const Dims& d) {
  const double n = double(numel(d));
  add(
      op_name + "/" + dims_name(d),
      [=] {
        Case c;
        Builder b(c.graph);
        auto x = b.input("x", Shape(d, DType::F32));
        auto y = b.input("y", Shape(d, DType::F32));
        c.graph.add_output("z", b.binary(op, x, y));
        c.inputs["x"] = random_f32(d, 4);
        c.inputs["y"] = random_f32(d, 5);
        return c;
      },
      0, 3 * 4 * n);
}

void add_layer_norm(const Dims& d) {
  const double n = double(numel(d)), D = double(d.back());
  add(
      "layer_norm/" + dims_name(d),
      [=] {
        Case c;
        Builder b(c.graph);
        auto x = b.input("x", Shape(d, DType::F32));
        auto g = b.input("gamma", Shape(Dims{d.back()}, DType::F32));
        auto be = b.input("beta", Shape(Dims{d.back()}, DType::F32));
        c.graph.add_output("y",
                           b.op(Op::LayerNorm, {x, g, be}, {{"naxes", int64_t(1)}, {"eps", 1e-5}}));
        c.inputs["x"] = random_f32(d, 6);
        c.inputs["gamma"] = random_f32({d.back()}, 7, 0.5, 1.5);
        c.inputs["beta"] = random_f32({d.back()}, 8);
        return c;
      },
      0, 2 * 4 * n + 2 * 4 * D);
}

// An element-wise region as the elementwise pass fuses it ("fused") and as
// separate nodes ("unfused": the pass disabled), on the same graph: GPT-2's
// gelu_new written out (8 ops over x and 5 scalars) and SwiGLU's silu(a) * b.
void add_region(const std::string& name, const Dims& d) {
  const double n = double(numel(d));
  const bool swiglu = name == "silu_mul";
  for (bool fused : {true, false})
    add(
        name + (fused ? "/fused/" : "/unfused/") + dims_name(d),
        [=] {
          Case c;
          Builder b(c.graph);
          auto x = b.input("x", Shape(d, DType::F32));
          c.inputs["x"] = random_f32(d, 9, -4, 4);
          if (swiglu) {
            auto y = b.input("y", Shape(d, DType::F32));
            c.inputs["y"] = random_f32(d, 10);
            c.graph.add_output("z", b.mul(b.unary(Op::Silu, x), y));
          } else {
            auto x3 = b.binary(Op::Pow, x, b.scalar(3));
            auto inner = b.mul(b.add(x, b.mul(x3, b.scalar(0.044715f))), b.scalar(0.7978845608f));
            auto t = b.add(b.unary(Op::Tanh, inner), b.scalar(1));
            c.graph.add_output("z", b.mul(b.mul(x, b.scalar(0.5f)), t));
          }
          if (!fused) c.options.disabled_passes = {"elementwise"};
          return c;
        },
        0, (swiglu ? 3 : 2) * 4 * n);
}

}  // namespace

void register_elementwise() {
  for (const Dims& d : {Dims{128, 3072}, Dims{512, 3072}}) {
    add_region("gelu_new", d);
    add_region("silu_mul", d);
  }
  const Dims sizes[] = {{4, 512, 768}, {1, 128, 768}};
  for (const Dims& d : sizes) {
    add_unary("softmax", Op::Softmax, {{"axis", int64_t(-1)}}, d);
    add_layer_norm(d);
    add_binary("add", Op::Add, d);
    add_binary("mul", Op::Mul, d);
    add_unary("gelu", Op::Gelu, {}, d);
    add_unary("gelu_tanh", Op::GeluTanh, {}, d);
    add_unary("silu", Op::Silu, {}, d);
  }
}

}  // namespace rlx::bench
