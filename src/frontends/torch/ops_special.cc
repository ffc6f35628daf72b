// torch.special and the gamma family onto special_unary / special_binary (one
// IR op per arity, the function an attribute): lgamma, digamma, polygamma,
// mvlgamma (composed from lgamma), erfinv, the Bessel functions, zeta, the
// incomplete gamma functions and the orthogonal polynomials. Integer inputs
// compute in the (float) output dtype, as PyTorch promotes them.
#include <cmath>
#include <numbers>
#include <string>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {

namespace {

NodeId special_operand(LowerCtx& c, size_t pos, const char* name) {
  const Value* v = c.arg(pos, name);
  RLX_CHECK(v, "missing operand ", name);
  return c.as_tensor(*v, c.out_dtype());
}

NodeId special1(LowerCtx& c, NodeId x, const std::string& fn) {
  return c.b.op(Op::SpecialUnary, {x}, {{"fn", fn}});
}

}  // namespace

void register_special(Registry& r) {
  // aten name (after "aten.") -> special_unary's fn
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, const char*>>{
           {"lgamma", "lgamma"},
           {"digamma", "digamma"},
           {"special_digamma", "digamma"},
           {"erfinv", "erfinv"},
           {"special_erfinv", "erfinv"},
           {"i0", "i0"},
           {"special_i0", "i0"},
           {"special_i0e", "i0e"},
           {"special_i1", "i1"},
           {"special_i1e", "i1e"},
           {"special_ndtri", "ndtri"},
           {"special_log_ndtr", "log_ndtr"},
           {"special_erfcx", "erfcx"},
           {"special_bessel_j0", "bessel_j0"},
           {"special_bessel_j1", "bessel_j1"},
           {"special_bessel_y0", "bessel_y0"},
           {"special_bessel_y1", "bessel_y1"},
           {"special_modified_bessel_i0", "i0"},
           {"special_modified_bessel_i1", "i1"},
           {"special_modified_bessel_k0", "modified_bessel_k0"},
           {"special_modified_bessel_k1", "modified_bessel_k1"},
           {"special_scaled_modified_bessel_k0", "scaled_modified_bessel_k0"},
           {"special_scaled_modified_bessel_k1", "scaled_modified_bessel_k1"},
           {"special_spherical_bessel_j0", "spherical_bessel_j0"},
           {"special_airy_ai", "airy_ai"}}) {
    r.add(std::string("aten.") + name, [fn = std::string(fn)](LowerCtx& c) {
      return Value::tensor(special1(c, special_operand(c, 0, "self"), fn));
    });
  }
  // aten name -> special_binary's fn, operands in aten's order (x, n for the polynomials)
  for (auto [name, fn] : std::initializer_list<std::pair<const char*, const char*>>{
           {"special_zeta", "zeta"},
           {"igamma", "igamma"},
           {"special_gammainc", "igamma"},
           {"igammac", "igammac"},
           {"special_gammaincc", "igammac"},
           {"special_chebyshev_polynomial_t", "chebyshev_t"},
           {"special_chebyshev_polynomial_u", "chebyshev_u"},
           {"special_chebyshev_polynomial_v", "chebyshev_v"},
           {"special_chebyshev_polynomial_w", "chebyshev_w"},
           {"special_shifted_chebyshev_polynomial_t", "shifted_chebyshev_t"},
           {"special_shifted_chebyshev_polynomial_u", "shifted_chebyshev_u"},
           {"special_shifted_chebyshev_polynomial_v", "shifted_chebyshev_v"},
           {"special_shifted_chebyshev_polynomial_w", "shifted_chebyshev_w"},
           {"special_hermite_polynomial_h", "hermite_h"},
           {"special_hermite_polynomial_he", "hermite_he"},
           {"special_laguerre_polynomial_l", "laguerre_l"},
           {"special_legendre_polynomial_p", "legendre_p"},
           {"nextafter", "nextafter"}}) {
    const bool poly = std::string(name).find("polynomial") != std::string::npos;
    r.add(std::string("aten.") + name, [fn = std::string(fn), poly](LowerCtx& c) {
      const NodeId a = special_operand(c, 0, poly ? "x" : "self"),
                   b = special_operand(c, 1, poly ? "n" : "other");
      return Value::tensor(c.b.op(Op::SpecialBinary, {a, b}, {{"fn", fn}}));
    });
  }
  // polygamma(n, x): n a Python int
  r.add("aten.polygamma", [](LowerCtx& c) {
    const int64_t n = c.i(0, "n");
    RLX_CHECK(n >= 0, "polygamma does not support negative n, got ", n);
    const NodeId x = special_operand(c, 1, "self");
    return Value::tensor(c.b.op(Op::SpecialBinary, {c.scalar(double(n), c.out_dtype()), x},
                                {{"fn", std::string("polygamma")}}));
  });
  // mvlgamma(x, p) = p (p - 1) / 4 log(pi) + sum_{j < p} lgamma(x - j / 2)
  r.add("aten.mvlgamma", [](LowerCtx& c) {
    const int64_t p = c.i(1, "p");
    RLX_CHECK(p >= 1, "mvlgamma needs p >= 1, got ", p);
    const DType t = c.out_dtype();
    const NodeId x = special_operand(c, 0, "self");
    NodeId sum = c.scalar(double(p) * double(p - 1) / 4 * std::log(std::numbers::pi), t);
    for (int64_t j = 0; j < p; ++j)
      sum = c.b.add(sum, special1(c, c.b.sub(x, c.scalar(double(j) / 2, t)), "lgamma"));
    return Value::tensor(sum);
  });
}

}  // namespace rlx::torch_ir
