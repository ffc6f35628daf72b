// gated_delta_net / selective_scan against float64 step-form references written here straight
// from /work/shared/ref/recurrent-and-qat.md's formulas; shapes cover B = 2, several heads,
// S = 1, odd N, channel counts past the kernel's channel block, carried and zero states, D-skip
// present and absent; then the final state carried into a second call, the shape rules' errors
// and autodiff's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/gated_delta_net.h"
#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx::state_space_test {
namespace {

using Vec = std::vector<double>;

// Uniform in [lo, hi), rounded to f32 so both dtypes see the same values.
Vec draw(std::mt19937& rng, int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (double& e : v) e = double(float(u(rng)));
  return v;
}

Tensor tensor(const Dims& d, const Vec& v, DType t) { return Tensor::from_vector(d, v, t); }

// f32 against the float64 reference: 1e-5 relative to each element, and to the largest
// magnitude for elements near zero; f64 to round-off.
void expect_close(const Tensor& got, const Dims& dims, const Vec& want, const char* what) {
  double big = 0;
  for (double w : want) big = std::max(big, std::abs(w));
  const double tol = got.dtype() == DType::F64 ? 1e-12 : 1e-5;
  EXPECT_TRUE(testing::all_close(got, tensor(dims, want, DType::F64), tol * big, tol)) << what;
}

// ---- gated_delta_net

struct Gdn {
  int64_t B, S, H, N;
  bool carry;
  DType dtype = DType::F32;
};

struct GdnData {
  Vec q, k, v, g, beta, state;  // [B,S,H,N] x3, [B,S,H] x2, [B,H,N,N]
};

GdnData gdn_data(const Gdn& c, uint32_t seed) {
  std::mt19937 rng{seed};
  const int64_t tok = c.B * c.S * c.H * c.N, heads = c.B * c.S * c.H;
  const double kscale = 1 / std::sqrt(double(c.N));  // |k|^2 ~ 1/3: the delta rule stays stable
  GdnData d;
  d.q = draw(rng, tok, -1, 1);
  d.k = draw(rng, tok, -kscale, kscale);
  d.v = draw(rng, tok, -1, 1);
  d.g = draw(rng, heads, -1, 0);
  d.beta = draw(rng, heads, 0, 1);
  d.state = draw(rng, c.B * c.H * c.N * c.N, -1, 1);
  return d;
}

// o [B,S,H,N] and the final state [B,H,N,N], step by step as the reference states it.
std::pair<Vec, Vec> gdn_reference(const Gdn& c, const GdnData& d) {
  const int64_t B = c.B, S = c.S, H = c.H, N = c.N;
  Vec o(size_t(B * S * H * N)), fin(size_t(B * H * N * N));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      Vec St(size_t(N * N), 0.0);
      if (c.carry)
        for (int64_t i = 0; i < N * N; ++i)
          St[size_t(i)] = d.state[size_t((b * H + h) * N * N + i)];
      for (int64_t t = 0; t < S; ++t) {
        const size_t tok = size_t(((b * S + t) * H + h) * N), head = size_t((b * S + t) * H + h);
        const double* q = &d.q[tok];
        const double* k = &d.k[tok];
        const double* v = &d.v[tok];
        for (double& s : St) s *= std::exp(d.g[head]);  // 1. S = exp(g) S
        Vec u(static_cast<size_t>(N));
        for (int64_t j = 0; j < N; ++j) {  // 2. u = beta (v - k S)
          double kS = 0;
          for (int64_t i = 0; i < N; ++i) kS += k[i] * St[size_t(i * N + j)];
          u[size_t(j)] = d.beta[head] * (v[j] - kS);
        }
        for (int64_t i = 0; i < N; ++i)  // 3. S = S + k^T u
          for (int64_t j = 0; j < N; ++j) St[size_t(i * N + j)] += k[i] * u[size_t(j)];
        for (int64_t j = 0; j < N; ++j) {  // 4. o = q S / sqrt(N)
          double qS = 0;
          for (int64_t i = 0; i < N; ++i) qS += q[i] * St[size_t(i * N + j)];
          o[tok + size_t(j)] = qS / std::sqrt(double(N));
        }
      }
      std::copy(St.begin(), St.end(), fin.begin() + (b * H + h) * N * N);
    }
  return {o, fin};
}

std::vector<Tensor> gdn_inputs(const Gdn& c, const GdnData& d) {
  const Dims tok{c.B, c.S, c.H, c.N}, head{c.B, c.S, c.H};
  std::vector<Tensor> in{tensor(tok, d.q, c.dtype), tensor(tok, d.k, c.dtype),
                         tensor(tok, d.v, c.dtype), tensor(head, d.g, c.dtype),
                         tensor(head, d.beta, c.dtype)};
  if (c.carry) in.push_back(tensor({c.B, c.H, c.N, c.N}, d.state, c.dtype));
  return in;
}

void check_gdn(const Gdn& c, uint32_t seed) {
  SCOPED_TRACE("B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) +
               " H=" + std::to_string(c.H) + " N=" + std::to_string(c.N) +
               (c.carry ? " carry" : "") + " " + std::string(dtype_name(c.dtype)));
  const GdnData d = gdn_data(c, seed);
  const auto [o, fin] = gdn_reference(c, d);
  const std::vector<Tensor> got =
      testing::run_op_outputs(Op::GatedDeltaNet, gdn_inputs(c, d), {{"state_size", c.N}});
  ASSERT_EQ(got.size(), 2u);
  expect_close(got[0], {c.B, c.S, c.H, c.N}, o, "o");
  expect_close(got[1], {c.B, c.H, c.N, c.N}, fin, "final state");
}

TEST(StateSpace, GatedDeltaNetMatchesTheStepReference) {
  check_gdn({1, 1, 1, 1, false}, 1);
  check_gdn({2, 5, 3, 7, false}, 2);  // odd N, several heads
  check_gdn({2, 5, 3, 7, true}, 3);
  check_gdn({2, 1, 2, 4, true}, 4);    // one step from a carried state
  check_gdn({1, 9, 2, 33, false}, 5);  // past a vector width, with a tail
  check_gdn({3, 4, 1, 16, true}, 6);
  check_gdn({2, 6, 2, 5, true, DType::F64}, 7);
  check_gdn({2, 100, 2, 6, true}, 9);  // long enough for the kernel to take the chunked form
  // A hard reset (g = -inf: the state forgotten) in a long call: the kernel's step form.
  const Gdn reset{1, 70, 2, 4, true};
  GdnData d = gdn_data(reset, 10);
  d.g[40] = -INFINITY;
  const auto [o, fin] = gdn_reference(reset, d);
  const std::vector<Tensor> got =
      testing::run_op_outputs(Op::GatedDeltaNet, gdn_inputs(reset, d), {{"state_size", 4}});
  expect_close(got[0], {1, 70, 2, 4}, o, "o after a reset");
  expect_close(got[1], {1, 2, 4, 4}, fin, "final state after a reset");
}

TEST(StateSpace, GatedDeltaNetFinalStateContinuesTheSequence) {
  // The sequence in two calls (the second carrying the first's final state) is the whole one.
  const Gdn whole{2, 6, 2, 5, false};
  const GdnData d = gdn_data(whole, 8);
  const auto [o, fin] = gdn_reference(whole, d);
  auto half = [&](const Vec& v, int64_t per_step, int64_t t0) {
    Vec out;
    for (int64_t b = 0; b < whole.B; ++b) {
      auto first = v.begin() + (b * whole.S + t0) * per_step;
      out.insert(out.end(), first, first + 3 * per_step);
    }
    return out;
  };
  const int64_t tok = whole.H * whole.N, head = whole.H;
  std::vector<Tensor> state;
  Vec o_parts;
  for (int64_t t0 : {0, 3}) {
    const Gdn part{2, 3, 2, 5, false};  // its state, from the first call, is added below
    GdnData p{half(d.q, tok, t0),  half(d.k, tok, t0),     half(d.v, tok, t0),
              half(d.g, head, t0), half(d.beta, head, t0), {}};
    std::vector<Tensor> in = gdn_inputs(part, p);
    if (t0 > 0) in.push_back(state[1]);
    state = testing::run_op_outputs(Op::GatedDeltaNet, in, {{"state_size", whole.N}});
    for (int64_t b = 0; b < whole.B; ++b)
      for (int64_t i = 0; i < 3 * tok; ++i)
        EXPECT_NEAR(state[0].item_as_double(b * 3 * tok + i),
                    o[size_t((b * whole.S + t0) * tok + i)], 1e-5)
            << "o at b=" << b << " t0=" << t0 << " i=" << i;
  }
  expect_close(state[1], {2, 2, 5, 5}, fin, "final state after two calls");
}

// Both CPU forms called directly (the kernel picks one), f32 and f64; chunks of kGdnChunk steps
// with a partial last one, and strong decays (g down to -8) for the chunked form's decay ratios.
void check_gdn_form(const Gdn& c, cpu::GdnForm form, double g_lo, uint32_t seed) {
  SCOPED_TRACE("S=" + std::to_string(c.S) + " N=" + std::to_string(c.N) +
               (form == cpu::GdnForm::chunked ? " chunked" : " step") + (c.carry ? " carry" : "") +
               " g >= " + std::to_string(g_lo));
  GdnData d = gdn_data(c, seed);
  std::mt19937 rng{seed + 1000};
  d.g = draw(rng, c.B * c.S * c.H, g_lo, 0);
  const auto [o, fin] = gdn_reference(c, d);
  std::vector<Tensor> in = gdn_inputs(c, d);
  Tensor out(Dims{c.B, c.S, c.H, c.N}, c.dtype);
  Tensor state = c.carry ? in[5].clone() : Tensor(Dims{c.B, c.H, c.N, c.N}, c.dtype);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const cpu::GdnView<T> v{in[0].data<T>(),
                            in[1].data<T>(),
                            in[2].data<T>(),
                            in[3].data<T>(),
                            in[4].data<T>(),
                            out.data<T>(),
                            state.data<T>(),
                            c.B,
                            c.S,
                            c.H,
                            c.N};
    cpu::gated_delta_net_run(v, form);
  };
  if (c.dtype == DType::F32)
    run(float{});
  else
    run(double{});
  expect_close(out, {c.B, c.S, c.H, c.N}, o, "o");
  expect_close(state, {c.B, c.H, c.N, c.N}, fin, "final state");
}

TEST(StateSpace, GatedDeltaNetStepAndChunkedFormsMatchTheReference) {
  for (const cpu::GdnForm form : {cpu::GdnForm::step, cpu::GdnForm::chunked}) {
    check_gdn_form({2, 150, 2, 16, true}, form, -1, 31);  // 3 chunks, the last partial
    check_gdn_form({1, 64, 3, 9, false}, form, -1, 32);   // exactly one chunk, odd N
    check_gdn_form({1, 5, 1, 7, true}, form, -1, 33);     // a partial chunk only
    check_gdn_form({1, 130, 1, 8, true}, form, -8, 34);   // decay ratios down to e^-500
    check_gdn_form({2, 70, 2, 5, true, DType::F64}, form, -2, 35);
  }
}

// ---- selective_scan

struct Ssm {
  int64_t B, L, D, N;
  bool d_skip, carry;
  DType dtype = DType::F32;
};

struct SsmData {
  Vec x, delta, A, Bm, C, Dskip, h0;
};

SsmData ssm_data(const Ssm& c, uint32_t seed) {
  std::mt19937 rng{seed};
  SsmData d;
  d.x = draw(rng, c.B * c.L * c.D, -1, 1);
  d.delta = draw(rng, c.B * c.L * c.D, 0.05, 1);  // softplus'd in Mamba: positive
  d.A = draw(rng, c.D * c.N, -1.5, -0.1);         // -exp(A_log) in Mamba: negative
  d.Bm = draw(rng, c.B * c.L * c.N, -1, 1);
  d.C = draw(rng, c.B * c.L * c.N, -1, 1);
  d.Dskip = draw(rng, c.D, -1, 1);
  d.h0 = draw(rng, c.B * c.D * c.N, -1, 1);
  return d;
}

// y [B,L,D] and the final state [B,D,N].
std::pair<Vec, Vec> ssm_reference(const Ssm& c, const SsmData& d) {
  const int64_t B = c.B, L = c.L, D = c.D, N = c.N;
  Vec y(size_t(B * L * D)), h(size_t(B * D * N), 0.0);
  if (c.carry) h = d.h0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t ch = 0; ch < D; ++ch) {
        const size_t r = size_t((b * L + t) * D + ch);
        const double dt = d.delta[r], x = d.x[r];
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& hv = h[size_t((b * D + ch) * N + n)];
          hv = std::exp(dt * d.A[size_t(ch * N + n)]) * hv +
               dt * x * d.Bm[size_t((b * L + t) * N + n)];
          acc += hv * d.C[size_t((b * L + t) * N + n)];
        }
        y[r] = acc + (c.d_skip ? d.Dskip[size_t(ch)] * x : 0);
      }
  return {y, h};
}

Attrs ssm_attrs(const Ssm& c) { return {{"d_skip", c.d_skip}, {"carry", c.carry}}; }

void check_ssm(const Ssm& c, uint32_t seed) {
  SCOPED_TRACE("B=" + std::to_string(c.B) + " L=" + std::to_string(c.L) + " D=" +
               std::to_string(c.D) + " N=" + std::to_string(c.N) + (c.d_skip ? " d_skip" : "") +
               (c.carry ? " carry" : "") + " " + std::string(dtype_name(c.dtype)));
  const SsmData d = ssm_data(c, seed);
  const auto [y, h] = ssm_reference(c, d);
  std::vector<Tensor> in{tensor({c.B, c.L, c.D}, d.x, c.dtype),
                         tensor({c.B, c.L, c.D}, d.delta, c.dtype),
                         tensor({c.D, c.N}, d.A, c.dtype), tensor({c.B, c.L, c.N}, d.Bm, c.dtype),
                         tensor({c.B, c.L, c.N}, d.C, c.dtype)};
  if (c.d_skip) in.push_back(tensor({c.D}, d.Dskip, c.dtype));
  if (c.carry) in.push_back(tensor({c.B, c.D, c.N}, d.h0, c.dtype));
  const std::vector<Tensor> got = testing::run_op_outputs(Op::SelectiveScan, in, ssm_attrs(c));
  ASSERT_EQ(got.size(), 2u);
  expect_close(got[0], {c.B, c.L, c.D}, y, "y");
  expect_close(got[1], {c.B, c.D, c.N}, h, "final state");
}

TEST(StateSpace, SelectiveScanMatchesTheStepReference) {
  check_ssm({1, 1, 1, 1, false, false}, 11);
  check_ssm({2, 6, 5, 3, true, false}, 12);
  check_ssm({2, 1, 70, 4, true, true}, 13);  // two channel blocks, the second partial; S = 1
  check_ssm({1, 7, 9, 16, false, true}, 14);
  check_ssm({2, 5, 131, 9, false, false}, 15);  // three blocks, odd N
  check_ssm({2, 4, 6, 5, true, true, DType::F64}, 16);
}

// ---- errors

struct GdnGraph {
  Graph g;
  NodeId q, k, v, gate, beta;
  explicit GdnGraph(Dims k_dims = {2, 3, 2, 4}) {
    q = g.input("q", Shape(Dims{2, 3, 2, 4}, DType::F32));
    k = g.input("k", Shape(k_dims, DType::F32));
    v = g.input("v", Shape(Dims{2, 3, 2, 4}, DType::F32));
    gate = g.input("g", Shape(Dims{2, 3, 2}, DType::F32));
    beta = g.input("beta", Shape(Dims{2, 3, 2}, DType::F32));
  }
  std::string error(std::vector<NodeId> in, int64_t state_size = 4) {
    return testing::error_of([&] {
      g.add(Op::GatedDeltaNet, in, {{"state_size", state_size}}, "mixer");
    });
  }
};

void expect_has(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos) << "no '" << part << "' in: " << msg;
}

TEST(StateSpace, GatedDeltaNetShapeErrorsNameTheNodeAndShapes) {
  GdnGraph t;
  std::string msg = t.error({t.q, t.k, t.v, t.gate, t.beta}, 5);
  expect_has(msg, "gated_delta_net 'mixer'");
  expect_has(msg, "q [2,3,2,4] f32's last dim must equal state_size=5");
  GdnGraph bad_k({2, 3, 1, 4});
  msg = bad_k.error({bad_k.q, bad_k.k, bad_k.v, bad_k.gate, bad_k.beta});
  expect_has(msg, "k [2,3,1,4] f32 must be [2,3,2,4]");
  msg = t.error({t.q, t.k, t.v, t.beta, t.q});  // beta given the shape of q
  expect_has(msg, "beta [2,3,2,4] f32 must be [2,3,2] ([B, S, H])");
  const NodeId q3 = t.g.input("q3", Shape(Dims{2, 3, 8}, DType::F32));
  msg = t.error({q3, t.k, t.v, t.gate, t.beta});
  expect_has(msg, "q must be [B, S, H, N], got [2,3,8] f32");
  const NodeId state = t.g.input("s", Shape(Dims{2, 2, 4, 3}, DType::F32));
  msg = t.error({t.q, t.k, t.v, t.gate, t.beta, state});
  expect_has(msg, "state [2,2,4,3] f32 must be [2,2,4,4] ([B, H, N, N])");
  const NodeId v64 = t.g.input("v64", Shape(Dims{2, 3, 2, 4}, DType::F64));
  msg = t.error({t.q, t.k, v64, t.gate, t.beta});
  expect_has(msg, "v [2,3,2,4] f64 must have q's dtype");
  msg = t.error({t.q, t.k, t.v, t.gate, t.beta}, 0);
  expect_has(msg, "state_size must be >= 1");
}

TEST(StateSpace, SelectiveScanShapeErrorsNameTheNodeAndShapes) {
  Graph g;
  auto in = [&](const char* name, Dims d) { return g.input(name, Shape(d, DType::F32)); };
  const NodeId x = in("x", {2, 5, 6}), dt = in("dt", {2, 5, 6}), A = in("A", {6, 3}),
               B = in("B", {2, 5, 3}), C = in("C", {2, 5, 3}), Ab = in("Ab", {6, 4}),
               Ds = in("Ds", {5}), h0 = in("h0", {2, 6, 3});
  auto error = [&](std::vector<NodeId> ins, Attrs a = {}) {
    return testing::error_of([&] { g.add(Op::SelectiveScan, ins, a, "ssm"); });
  };
  std::string msg = error({x, dt, Ab, B, C});
  expect_has(msg, "selective_scan 'ssm'");
  expect_has(msg, "B [2,5,3] f32 must be [2,5,4] ([B, L, N], N of A)");
  msg = error({x, dt, A, B, C, h0}, {{"d_skip", true}, {"carry", true}});
  expect_has(msg, "expected 7 inputs (x, delta, A, B, C, D_skip, h0) for these attributes, got 6");
  msg = error({x, dt, A, B, C, Ds}, {{"d_skip", true}});
  expect_has(msg, "D_skip [5] f32 must be [6] ([D])");
  msg = error({x, dt, A, B, C, B}, {{"carry", true}});
  expect_has(msg, "h0 [2,5,3] f32 must be [2,6,3] ([B, D, N])");
  msg = error({A, dt, A, B, C});
  expect_has(msg, "x must be [B, L, D], got [6,3] f32");
  msg = error({x, B, A, B, C});
  expect_has(msg, "delta [2,5,3] f32 must be [2,5,6]");
}

TEST(StateSpace, RunTimeDimsThatDisagreeAreAnError) {
  // Two symbols inference cannot tell apart, bound to different sizes at run time.
  Graph g;
  const Dim b = Dim::symbol("b"), c = Dim::symbol("c");
  const NodeId q = g.input("q", Shape({b, Dim(2), Dim(1), Dim(3)}, DType::F32));
  const NodeId k = g.input("k", Shape({c, Dim(2), Dim(1), Dim(3)}, DType::F32));
  const NodeId gb = g.input("g", Shape({b, Dim(2), Dim(1)}, DType::F32));
  const NodeId y = g.add(Op::GatedDeltaNet, {q, k, q, gb, gb}, {{"state_size", 3}}, "mixer");
  g.add_output("o", g.result(y, 0));
  const TensorMap feed{{"q", testing::random_tensor({2, 2, 1, 3}, DType::F32, 1)},
                       {"k", testing::random_tensor({1, 2, 1, 3}, DType::F32, 2)},
                       {"g", testing::random_tensor({2, 2, 1}, DType::F32, 3)}};
  const std::string msg = testing::error_of([&] { testing::run_graph(g, feed, {}, 0); });
  expect_has(msg, "k [1,2,1,3] f32");
}

TEST(StateSpace, AutodiffGoesThroughTheScan) {
  // The rule differentiates the unrolled scan (values: AutodiffFD's samples).
  GdnGraph t;
  const NodeId y =
      t.g.add(Op::GatedDeltaNet, {t.q, t.k, t.v, t.gate, t.beta}, {{"state_size", 4}}, "mixer");
  const NodeId loss = t.g.add(Op::ReduceSum, {t.g.result(y, 0)}, {});
  const std::vector<NodeId> dq = grad(t.g, loss, {t.q});
  EXPECT_EQ(t.g.node(dq[0]).shape, t.g.node(t.q).shape);
}

}  // namespace
}  // namespace rlx::state_space_test
