// lstm / gru / rnn against a scalar float64 reference written here from the textbook equations
// (PyTorch's and ONNX's docs): weights are drawn per (layer, direction) in canonical gate order,
// then packed into the op's inputs as each configuration asks (flat or [..., in] w_ih, summed or
// split bias, ONNX gate order by permuting row blocks, seq-first by transposing), so the
// packing, the gate order and the layouts are checked too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx::recurrent_test {
namespace {

enum class Act { sigmoid, tanh, relu };
double act(Act a, double v) {
  switch (a) {
    case Act::sigmoid:
      return 1 / (1 + std::exp(-v));
    case Act::tanh:
      return std::tanh(v);
    case Act::relu:
      return v > 0 ? v : 0;
  }
  return 0;
}
const char* act_name(Act a) {
  return a == Act::sigmoid ? "sigmoid" : a == Act::tanh ? "tanh" : "relu";
}

struct Config {
  Op op = Op::Lstm;
  int64_t B = 2, S = 4, in = 3, h = 5, L = 1;
  int dirs = 1;
  bool reverse = false, batch_first = true, carry = false, lengths = false;
  bool onnx = false, split_bias = true, flat_w = false, peephole = false, lbr = true;
  double clip = 0;  // 0: none
  Act f = Act::sigmoid, g = Act::tanh, hact = Act::tanh;
  std::vector<int64_t> lens;
};

int64_t gates(Op op) { return op == Op::Lstm ? 4 : op == Op::Gru ? 3 : 1; }

// Canonical parameters, per (layer, direction) ld.
struct Params {
  std::vector<std::vector<double>> w_ih, w_hh, b_ih, b_hh, peep, h0, c0;  // [G*h][in_l] etc.
  std::vector<double> x;                                                  // [B][S][in]
};

struct Outputs {
  std::vector<double> y, hn, cn;  // y [B][S][D*h]; hn/cn [L*D][B][h]
};

double clipv(const Config& c, double v) { return c.clip > 0 ? std::clamp(v, -c.clip, c.clip) : v; }

Outputs reference(const Config& c, const Params& p) {
  const int64_t B = c.B, S = c.S, H = c.h, D = c.dirs;
  Outputs o;
  o.hn.assign(size_t(c.L * D * B * H), 0);
  o.cn = o.hn;
  std::vector<double> seq = p.x;  // [B][S][in_l]
  int64_t in_l = c.in;
  for (int64_t l = 0; l < c.L; ++l) {
    std::vector<double> out(size_t(B * S * D * H), 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const size_t ld = size_t(l * D + d);
      const auto &Wi = p.w_ih[ld], &Wh = p.w_hh[ld], &bi = p.b_ih[ld], &bh = p.b_hh[ld];
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> hs(static_cast<size_t>(H)), cs(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          hs[size_t(j)] = c.carry ? p.h0[ld][size_t(b * H + j)] : 0;
          cs[size_t(j)] = c.carry && c.op == Op::Lstm ? p.c0[ld][size_t(b * H + j)] : 0;
        }
        const int64_t n = c.lengths ? c.lens[size_t(b)] : S;
        for (int64_t k = 0; k < n; ++k) {
          const int64_t t = (c.reverse || d == 1) ? n - 1 - k : k;
          const double* xt = &seq[size_t((b * S + t) * in_l)];
          // a[g][j] = W_ih x + b_ih, r[g][j] = W_hh h + b_hh, per canonical gate g
          const int64_t G = gates(c.op);
          std::vector<double> a(size_t(G * H)), r(size_t(G * H));
          for (int64_t q = 0; q < G * H; ++q) {
            double s1 = bi[size_t(q)], s2 = bh[size_t(q)];
            for (int64_t i = 0; i < in_l; ++i) s1 += Wi[size_t(q * in_l + i)] * xt[i];
            for (int64_t i = 0; i < H; ++i) s2 += Wh[size_t(q * H + i)] * hs[size_t(i)];
            a[size_t(q)] = s1;
            r[size_t(q)] = s2;
          }
          std::vector<double> hn(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) {
            auto z = [&](int64_t gi) { return a[size_t(gi * H + j)] + r[size_t(gi * H + j)]; };
            if (c.op == Op::Lstm) {
              const double* P = c.peephole ? &p.peep[ld][0] : nullptr;  // i, o, f
              const double cp = cs[size_t(j)];
              const double i = act(c.f, clipv(c, z(0) + (P ? P[j] * cp : 0)));
              const double f = act(c.f, clipv(c, z(1) + (P ? P[2 * H + j] * cp : 0)));
              const double gg = act(c.g, clipv(c, z(2)));
              const double cc = f * cp + i * gg;
              const double oo = act(c.f, clipv(c, z(3) + (P ? P[H + j] * cc : 0)));
              cs[size_t(j)] = cc;
              hn[size_t(j)] = oo * act(c.hact, cc);
            } else if (c.op == Op::Gru) {
              const double rr = act(c.f, clipv(c, z(0)));
              const double zz = act(c.f, clipv(c, z(1)));
              double nin;
              if (c.lbr) {
                nin = a[size_t(2 * H + j)] + rr * r[size_t(2 * H + j)];
              } else {  // (r * h) W_hn^T + b_hn
                double s = bh[size_t(2 * H + j)];
                for (int64_t i = 0; i < H; ++i) {
                  const double ri = act(c.f, clipv(c, a[size_t(i)] + r[size_t(i)]));
                  s += Wh[size_t((2 * H + j) * H + i)] * ri * hs[size_t(i)];
                }
                nin = a[size_t(2 * H + j)] + s;
              }
              const double nn = act(c.g, clipv(c, nin));
              hn[size_t(j)] = (1 - zz) * nn + zz * hs[size_t(j)];
            } else {
              hn[size_t(j)] = act(c.f, clipv(c, z(0)));
            }
          }
          hs = hn;
          for (int64_t j = 0; j < H; ++j)
            out[size_t((b * S + t) * D * H + d * H + j)] = hs[size_t(j)];
        }
        for (int64_t j = 0; j < H; ++j) {
          o.hn[size_t((ld * B + b) * H + j)] = hs[size_t(j)];
          o.cn[size_t((ld * B + b) * H + j)] = cs[size_t(j)];
        }
      }
    }
    seq = out;
    in_l = D * H;
  }
  o.y = seq;
  return o;
}

std::vector<double> draw(std::mt19937& rng, size_t n, double scale = 1) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& e : v) e = double(float(u(rng)));  // exactly representable in f32
  return v;
}

Tensor f32(const Dims& d, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_vector(d, f, DType::F32);
}

// Canonical row block q of gate `gi` -> the op's row block under ONNX order.
int64_t onnx_block(Op op, int64_t gi) {
  if (op == Op::Lstm) return std::array<int64_t, 4>{0, 2, 3, 1}[size_t(gi)];  // i o f c
  if (op == Op::Gru) return std::array<int64_t, 3>{1, 0, 2}[size_t(gi)];      // z r h
  return gi;
}

std::vector<double> permute_rows(const Config& c, const std::vector<double>& w, int64_t cols) {
  if (!c.onnx) return w;
  std::vector<double> out(w.size());
  const int64_t H = c.h;
  for (int64_t gi = 0; gi < gates(c.op); ++gi)
    for (int64_t j = 0; j < H * cols; ++j)
      out[size_t(onnx_block(c.op, gi) * H * cols + j)] = w[size_t(gi * H * cols + j)];
  return out;
}

void check(const Config& c, uint64_t seed) {
  std::mt19937 rng{uint32_t(seed)};
  const int64_t G = gates(c.op), H = c.h, D = c.dirs, LD = c.L * D;
  Params p;
  p.x = draw(rng, size_t(c.B * c.S * c.in));
  for (int64_t l = 0; l < c.L; ++l)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t in_l = l == 0 ? c.in : D * H;
      p.w_ih.push_back(draw(rng, size_t(G * H * in_l), 0.6));
      p.w_hh.push_back(draw(rng, size_t(G * H * H), 0.6));
      p.b_ih.push_back(draw(rng, size_t(G * H), 0.5));
      p.b_hh.push_back(draw(rng, size_t(G * H), 0.5));
      p.peep.push_back(draw(rng, size_t(3 * H), 0.5));
      p.h0.push_back(draw(rng, size_t(c.B * H)));
      p.c0.push_back(draw(rng, size_t(c.B * H)));
    }
  const Outputs want = reference(c, p);

  // Pack.
  std::vector<double> x(p.x.size()), wi, wh, bias, h0, c0, peep;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.S; ++t)
      for (int64_t i = 0; i < c.in; ++i)
        x[size_t(((c.batch_first ? b * c.S + t : t * c.B + b)) * c.in + i)] =
            p.x[size_t((b * c.S + t) * c.in + i)];
  for (int64_t ld = 0; ld < LD; ++ld) {
    const int64_t in_l = ld < D ? c.in : D * H;
    auto a = permute_rows(c, p.w_ih[size_t(ld)], in_l);
    wi.insert(wi.end(), a.begin(), a.end());
    a = permute_rows(c, p.w_hh[size_t(ld)], H);
    wh.insert(wh.end(), a.begin(), a.end());
    auto bi = permute_rows(c, p.b_ih[size_t(ld)], 1), bh = permute_rows(c, p.b_hh[size_t(ld)], 1);
    if (c.split_bias) {
      bias.insert(bias.end(), bi.begin(), bi.end());
      bias.insert(bias.end(), bh.begin(), bh.end());
    } else {
      for (size_t k = 0; k < bi.size(); ++k) bias.push_back(double(float(bi[k]) + float(bh[k])));
    }
    h0.insert(h0.end(), p.h0[size_t(ld)].begin(), p.h0[size_t(ld)].end());
    c0.insert(c0.end(), p.c0[size_t(ld)].begin(), p.c0[size_t(ld)].end());
    peep.insert(peep.end(), p.peep[size_t(ld)].begin(), p.peep[size_t(ld)].end());
  }
  const bool uniform = c.L == 1 || c.in == D * H;
  std::vector<Tensor> in{
      f32(c.batch_first ? Dims{c.B, c.S, c.in} : Dims{c.S, c.B, c.in}, x),
      f32(c.flat_w || !uniform ? Dims{int64_t(wi.size())} : Dims{LD, G * H, c.in}, wi),
      f32(c.flat_w ? Dims{int64_t(wh.size())} : Dims{LD, G * H, H}, wh),
      f32({LD, int64_t(bias.size()) / LD}, bias)};
  if (c.carry) {
    in.push_back(f32({LD, c.B, H}, h0));
    if (c.op == Op::Lstm) in.push_back(f32({LD, c.B, H}, c0));
  }
  if (c.lengths) in.push_back(Tensor::from_vector({c.B}, c.lens, DType::I64));
  if (c.peephole) in.push_back(f32({LD, 3 * H}, peep));
  Attrs a{{"hidden", H},
          {"num_layers", c.L},
          {"direction", std::string(D == 2      ? "bidirectional"
                                    : c.reverse ? "reverse"
                                                : "forward")},
          {"batch_first", c.batch_first},
          {"carry", c.carry},
          {"lengths", c.lengths},
          {"act_f", std::string(act_name(c.f))}};
  if (c.op != Op::Rnn) {
    a.set("gates", std::string(c.onnx ? "onnx" : "pytorch"));
    a.set("act_g", std::string(act_name(c.g)));
  }
  if (c.op == Op::Lstm) {
    a.set("act_h", std::string(act_name(c.hact)));
    a.set("peephole", c.peephole);
  }
  if (c.op == Op::Gru) a.set("linear_before_reset", c.lbr);
  if (c.clip > 0) a.set("clip", c.clip);
  const std::vector<Tensor> got = testing::run_op_outputs(c.op, in, a);
  ASSERT_EQ(got.size(), c.op == Op::Lstm ? 3u : 2u);

  std::vector<double> y(want.y.size());
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.S; ++t)
      for (int64_t j = 0; j < D * H; ++j)
        y[size_t(((c.batch_first ? b * c.S + t : t * c.B + b)) * D * H + j)] =
            want.y[size_t((b * c.S + t) * D * H + j)];
  const double tol = 2e-6 * double(c.S * c.L);
  EXPECT_TRUE(testing::all_close(
      got[0], f32(c.batch_first ? Dims{c.B, c.S, D * H} : Dims{c.S, c.B, D * H}, y), tol, 0))
      << "y";
  EXPECT_TRUE(testing::all_close(got[1], f32({LD, c.B, H}, want.hn), tol, 0)) << "h_n";
  if (c.op == Op::Lstm) {
    EXPECT_TRUE(testing::all_close(got[2], f32({LD, c.B, H}, want.cn), tol, 0)) << "c_n";
  }
}

TEST(Recurrent, LstmConfigurations) {
  Config c;  // one layer, batch first, zero state, split bias
  check(c, 1);
  c.split_bias = false;  // summed bias
  c.flat_w = true;
  check(c, 2);
  Config b;  // 2 layers, bidirectional, seq first, initial states, lengths
  b.L = 2;
  b.dirs = 2;
  b.batch_first = false;
  b.carry = true;
  b.lengths = true;
  b.B = 3;
  b.lens = {4, 1, 0};
  check(b, 3);
  Config o;  // ONNX flavour: gate order iofc, peepholes, clip, reverse, custom activations
  o.onnx = true;
  o.peephole = true;
  o.clip = 0.7;
  o.reverse = true;
  o.lengths = true;
  o.lens = {2, 4};
  o.carry = true;
  check(o, 4);
  o.f = Act::sigmoid;
  o.g = Act::relu;
  o.hact = Act::sigmoid;
  o.clip = 0;
  check(o, 5);
  Config w;  // wide enough for the vector paths' tails (h = 19), 3 layers
  w.h = 19;
  w.in = 7;
  w.S = 6;
  w.L = 3;
  w.B = 3;
  check(w, 6);
}

TEST(Recurrent, GruConfigurations) {
  Config c;
  c.op = Op::Gru;
  check(c, 11);
  c.dirs = 2;
  c.L = 2;
  c.carry = true;
  check(c, 12);
  Config o;  // ONNX's default form: zrh order, linear_before_reset = 0, seq first, lengths
  o.op = Op::Gru;
  o.onnx = true;
  o.lbr = false;
  o.batch_first = false;
  o.lengths = true;
  o.lens = {3, 4};
  o.carry = true;
  o.h = 9;
  check(o, 13);
  o.dirs = 2;
  o.clip = 0.4;
  check(o, 14);
}

TEST(Recurrent, RnnConfigurations) {
  Config c;
  c.op = Op::Rnn;
  c.f = Act::tanh;
  check(c, 21);
  c.f = Act::relu;
  c.dirs = 2;
  c.L = 2;
  c.carry = true;
  c.split_bias = false;
  check(c, 22);
  c.reverse = false;
  c.dirs = 1;
  c.lengths = true;
  c.lens = {0, 3};
  c.clip = 0.3;
  check(c, 23);
}

TEST(Recurrent, BadShapesNameTheNodeOpAndShapes) {
  Graph g;
  NodeId x = g.input("x", Shape(Dims{2, 4, 3}, DType::F32));
  NodeId wi = g.input("wi", Shape(Dims{20, 3}, DType::F32));
  NodeId wh_bad = g.input("wh", Shape(Dims{20, 4}, DType::F32));  // hidden is 5
  NodeId b = g.input("b", Shape(Dims{1, 40}, DType::F32));
  std::string msg = testing::error_of([&] {
    g.add(Op::Lstm, {x, wi, wh_bad, b}, {{"hidden", 5}}, "enc", "aten.lstm.input");
  });
  EXPECT_NE(msg.find("lstm 'enc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("w_hh [20,4] f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hidden=5"), std::string::npos) << msg;
  // The wrong input count for the attributes, and gru's summed bias.
  NodeId wh = g.input("wh5", Shape(Dims{20, 5}, DType::F32));
  msg = testing::error_of([&] {
    g.add(Op::Lstm, {x, wi, wh, b}, {{"hidden", 5}, {"carry", true}});
  });
  EXPECT_NE(msg.find("expected 6 inputs (x, w_ih, w_hh, bias, h0, c0)"), std::string::npos) << msg;
  NodeId gwi = g.input("gwi", Shape(Dims{15, 3}, DType::F32));
  NodeId gwh = g.input("gwh", Shape(Dims{15, 5}, DType::F32));
  NodeId gb = g.input("gb", Shape(Dims{1, 15}, DType::F32));
  msg = testing::error_of([&] { g.add(Op::Gru, {x, gwi, gwh, gb}, {{"hidden", 5}}); });
  EXPECT_NE(msg.find("gru keeps b_hn apart"), std::string::npos) << msg;
  // A length past the sequence, found at run time.
  msg = testing::error_of([&] {
    testing::run_op_outputs(
        Op::Rnn,
        {testing::random_tensor({2, 4, 3}, DType::F32, 1),
         testing::random_tensor({5, 3}, DType::F32, 2),
         testing::random_tensor({5, 5}, DType::F32, 3), testing::random_tensor({5}, DType::F32, 4),
         Tensor::from_vector<int64_t>({2}, {4, 5}, DType::I64)},
        {{"hidden", 5}, {"lengths", true}});
  });
  EXPECT_NE(msg.find("lengths[1] = 5 is outside [0, 4]"), std::string::npos) << msg;
}

TEST(Recurrent, AutodiffOverADynamicSequenceIsAnErrorNamingTheNode) {
  // Backpropagation through time unrolls the sequence: its length must be known.
  Graph g;
  NodeId x = g.input("x", Shape({Dim(2), Dim::symbol("seq"), Dim(3)}, DType::F32));
  NodeId wi = g.input("wi", Shape(Dims{5, 3}, DType::F32));
  NodeId wh = g.input("wh", Shape(Dims{5, 5}, DType::F32));
  NodeId b = g.input("b", Shape(Dims{5}, DType::F32));
  NodeId r = g.add(Op::Rnn, {x, wi, wh, b}, {{"hidden", 5}}, "encoder");
  const NodeId y = g.result(r, 0);
  const NodeId ct = g.input("ct", g.node(y).shape);
  const std::string msg = testing::error_of([&] { vjp(g, {y}, {ct}, {wi}); });
  EXPECT_NE(msg.find("rnn 'encoder'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unrolls over a static sequence"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx::recurrent_test
