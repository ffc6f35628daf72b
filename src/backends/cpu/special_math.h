// Scalar special functions in double, with PyTorch's definitions and edge
// cases (torch.special and aten's lgamma, digamma, polygamma, igamma, ...).
// The kernels of special_unary / special_binary (special.cc) call these per
// element; float inputs are widened, so a float result is the correctly
// rounded value of a double computation, not a float recurrence.
#pragma once
#include "rlx/op_attrs.h"

namespace rlx::cpu {

double special_unary_value(SpecialFn fn, double x);
// (a, b) as special_binary takes them: polygamma(n = a, x = b), zeta(x = a, q = b),
// igamma(c)(a, x = b), and the polynomials of x = a with degree n = b.
double special_binary_value(SpecialFn2 fn, double a, double b);

}  // namespace rlx::cpu
