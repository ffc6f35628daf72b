// Shape rules of gated_delta_net and selective_scan: every input is checked against the others
// (and against state_size), and a mismatch names the input, its shape and the shape it should
// have; the caller adds the node.
#include "ir/shape_infer_state_space.h"

#include <string>

#include "rlx/error.h"
#include "rlx/state_space.h"

namespace rlx {
namespace {

using In = std::vector<const Shape*>;

bool dims_match(const Shape& s, const std::vector<Dim>& want) {
  if (s.rank() != int(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    const Dim &a = s.dims[i], &b = want[i];
    if (a.is_static() && b.is_static() && a.value != b.value) return false;
  }
  return true;
}

// "[B,S,H] (names)" with each dim's value or symbol.
std::string want_str(const std::vector<Dim>& dims, const char* names) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + dims[i].str();
  return out + "] (" + names + ")";
}

// Every input is a float tensor of the first input's dtype.
void check_dtypes(const char* op, const In& in, const char* const* names) {
  const Shape& x = *in[0];
  RLX_CHECK(x.dtype == DType::F32 || x.dtype == DType::F64 || x.dtype == DType::F16 ||
                x.dtype == DType::BF16,
            op, ": ", names[0], " must be f32, f64, f16 or bf16, got ", x.str());
  for (size_t i = 1; i < in.size(); ++i)
    RLX_CHECK(in[i]->dtype == x.dtype, op, ": ", names[i], " ", in[i]->str(), " must have ",
              names[0], "'s dtype (", names[0], " ", x.str(), ")");
}

void check_dims(const char* op, const char* what, const Shape& s, const std::vector<Dim>& want,
                const char* names) {
  RLX_CHECK(dims_match(s, want), op, ": ", what, " ", s.str(), " must be ", want_str(want, names));
}

}  // namespace

std::vector<Shape> infer_gated_delta_net(const Node& n, const In& in) {
  const char* op = "gated_delta_net";
  const GatedDeltaNetSpec s = gated_delta_net_spec(n);
  static const char* const names[] = {"q", "k", "v", "g", "beta", "state"};
  check_dtypes(op, in, names);
  const Shape& q = *in[0];
  RLX_CHECK(q.rank() == 4, op, ": q must be [B, S, H, N], got ", q.str());
  const Dim &B = q.dims[0], &S = q.dims[1], &H = q.dims[2], &N = q.dims[3];
  RLX_CHECK(N.is_static() && N.value == s.state_size, op, ": q ", q.str(),
            "'s last dim must equal state_size=", s.state_size);
  check_dims(op, "k", *in[1], q.dims, "q's [B, S, H, N]");
  check_dims(op, "v", *in[2], q.dims, "q's [B, S, H, N]");
  check_dims(op, "g", *in[3], {B, S, H}, "[B, S, H]");
  check_dims(op, "beta", *in[4], {B, S, H}, "[B, S, H]");
  const Shape state({B, H, N, N}, q.dtype);
  if (s.state >= 0) check_dims(op, "state", *in[size_t(s.state)], state.dims, "[B, H, N, N]");
  return {q, state};
}

std::vector<Shape> infer_selective_scan(const Node& n, const In& in) {
  const char* op = "selective_scan";
  const SelectiveScanSpec s = selective_scan_spec(n);
  RLX_CHECK(int(in.size()) == s.num_inputs, op, ": expected ", s.num_inputs,
            " inputs (x, delta, A, B, C", s.d_skip >= 0 ? ", D_skip" : "", s.h0 >= 0 ? ", h0" : "",
            ") for these attributes, got ", in.size());
  std::vector<const char*> names{"x", "delta", "A", "B", "C"};
  if (s.d_skip >= 0) names.push_back("D_skip");
  if (s.h0 >= 0) names.push_back("h0");
  check_dtypes(op, in, names.data());
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() == 3, op, ": x must be [B, L, D], got ", x.str());
  const Dim &B = x.dims[0], &L = x.dims[1], &D = x.dims[2];
  check_dims(op, "delta", *in[1], x.dims, "x's [B, L, D]");
  const Shape& A = *in[2];
  RLX_CHECK(A.rank() == 2, op, ": A must be [D, N], got ", A.str());
  const Dim& N = A.dims[1];
  check_dims(op, "A", A, {D, N}, "[D, N], D of x");
  check_dims(op, "B", *in[3], {B, L, N}, "[B, L, N], N of A");
  check_dims(op, "C", *in[4], {B, L, N}, "[B, L, N], N of A");
  if (s.d_skip >= 0) check_dims(op, "D_skip", *in[size_t(s.d_skip)], {D}, "[D]");
  const Shape h({B, D, N}, x.dtype);
  if (s.h0 >= 0) check_dims(op, "h0", *in[size_t(s.h0)], h.dims, "[B, D, N]");
  return {x, h};
}

}  // namespace rlx
