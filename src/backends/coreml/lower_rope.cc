// rope composed from MIL primitives, with the CPU kernel's math (src/backends/cpu/rope.cc):
//   freq_i = theta^(-2i/rd) / freq_factor_i, angle[s, i] = pos[s] * freq_i,
//   (a, b) -> (a cos - b sin, b cos + a sin) over pairs (i, i + rd/2) (neox) or (2i, 2i+1)
//   (interleaved); dims >= rd pass through.
// Angles, cos and sin are computed in fp32 even in an fp16 program (fp16 angles lose the
// position beyond ~2048), then cast to the program's float type.
#include <cmath>

#include "lower.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

// x[..., start:end:step] on the last axis of a rank-4 value.
Val slice_last(Lowering& L, const Val& x, int64_t start, int64_t end, int64_t step,
               const std::string& h) {
  auto bools = [&](std::vector<bool> v, const char* s) {
    Tensor t(Dims{int64_t(v.size())}, DType::Bool);
    for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
    return L.b.constant(t, pb::BOOL, h + s);
  };
  Type t = x.type;
  t.dims[3] = (end - start + step - 1) / step;
  return L.b.op("slice_by_index",
                {{"x", x},
                 {"begin", L.b.ints({0, 0, 0, start}, h + "_begin")},
                 {"end", L.b.ints({0, 0, 0, end}, h + "_end")},
                 {"stride", L.b.ints({1, 1, 1, step}, h + "_stride")},
                 {"begin_mask", bools({true, true, true, false}, "_bmask")},
                 {"end_mask", bools({true, true, true, false}, "_emask")},
                 {"squeeze_mask", bools({false, false, false, false}, "_smask")}},
                t, h);
}

Val concat_last(Lowering& L, const std::vector<Val>& vs, bool interleave, const std::string& h) {
  Type t = vs[0].type;
  t.dims[3] = 0;
  for (const auto& v : vs) t.dims[3] += v.type.dims[3];
  return L.b.op("concat",
                {{"values", vs},
                 {"axis", L.b.int_scalar(-1, h + "_axis")},
                 {"interleave", L.b.boolean(interleave, h + "_il")}},
                t, h);
}

Val lower_rope(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &pos = L.in(n, 1);
  const std::string h = L.hint(n);
  const int64_t D = x.type.dims[3];
  RLX_CHECK(D >= 0, "coreml: rope needs a static head dim");
  const auto& ra = n.attrs_as<RopeAttrs>();
  const int64_t rd = ra.rotary_dims.value_or(D), half = rd / 2;
  const bool neox = ra.style == RopeStyle::neox;
  if (rd == 0) return L.b.op("identity", {{"x", x}}, L.type_of(n), h);
  const double theta = ra.theta;
  Tensor inv(Dims{half}, DType::F32);
  for (int64_t i = 0; i < half; ++i)
    inv.data<float>()[i] = float(std::pow(theta, -2.0 * double(i) / double(rd)));
  Val freq = L.b.constant(inv, pb::FLOAT32, h + "_inv_freq");
  if (n.inputs.size() == 3) {
    Val ff = L.in(n, 2);
    if (ff.type.dt != pb::FLOAT32) ff = L.cast(ff, pb::FLOAT32, h + "_ff32");
    freq = L.binary("real_div", freq, ff, h + "_freq");
  }
  Val p = L.cast(pos, pb::FLOAT32, h + "_pos");
  Type pt = p.type;
  pt.dims.push_back(1);
  p = L.b.op("expand_dims", {{"x", p}, {"axes", L.b.ints({-1}, h + "_pax")}}, pt, h + "_pos2");
  Val ang = L.binary("mul", p, freq, h + "_angle");  // [S, half]
  Val cs = L.unary("cos", ang, h + "_cos32"), sn = L.unary("sin", ang, h + "_sin32");
  if (x.type.dt != pb::FLOAT32) {
    cs = L.cast(cs, x.type.dt, h + "_cos");
    sn = L.cast(sn, x.type.dt, h + "_sin");
  }
  Val a = neox ? slice_last(L, x, 0, half, 1, h + "_a") : slice_last(L, x, 0, rd, 2, h + "_a");
  Val b = neox ? slice_last(L, x, half, rd, 1, h + "_b") : slice_last(L, x, 1, rd, 2, h + "_b");
  Val ya = L.binary("sub", L.binary("mul", a, cs, h + "_acos"), L.binary("mul", b, sn, h + "_bsin"),
                    h + "_ya");
  Val yb = L.binary("add", L.binary("mul", b, cs, h + "_bcos"), L.binary("mul", a, sn, h + "_asin"),
                    h + "_yb");
  Val rot = concat_last(L, {ya, yb}, !neox, h + "_rot");
  if (rd == D) return L.b.op("identity", {{"x", rot}}, L.type_of(n), h);
  Val rest = slice_last(L, x, rd, D, 1, h + "_pass");
  return L.b.op("concat",
                {{"values", std::vector<Val>{rot, rest}},
                 {"axis", L.b.int_scalar(-1, h + "_axis")},
                 {"interleave", L.b.boolean(false, h + "_il")}},
                L.type_of(n), h);
}

}  // namespace

void register_rope(LowerTable& t) { t.one[size_t(Op::Rope)] = lower_rope; }

}  // namespace rlx::coreml
