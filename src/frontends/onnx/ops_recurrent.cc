// ONNX LSTM / GRU / RNN -> one lstm / gru / rnn node with gates=onnx (LSTM i,o,f,c; GRU z,r,h),
// so W [D, G*h, in], R [D, G*h, h] and B [D, 2*G*h] are read as they are, without copies.
// layout 0 (X [S, B, in], Y [S, D, B, h], Y_h [D, B, h]) maps to batch_first=false, layout 1
// (X [B, S, in], Y [B, S, D, h], Y_h [B, D, h]) to batch_first=true; Y is rlx's [.., D*h] reshaped
// (and transposed for layout 0).
#include <algorithm>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {

namespace {

std::string activation(Ctx& c, const std::string& name) {
  std::string l = name;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (l == "sigmoid" || l == "tanh" || l == "relu") return l;
  c.unsupported("activation '" + name + "' (rlx's recurrent ops take Sigmoid, Tanh and Relu)");
}

std::vector<Val> lower_recurrent(Ctx& c, Op op) {
  const bool lstm = op == Op::Lstm, gru = op == Op::Gru;
  const int64_t G = lstm ? 4 : gru ? 3 : 1;
  const std::string dir = c.s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.unsupported("direction '" + dir + "'");
  const int64_t D = dir == "bidirectional" ? 2 : 1;
  const int64_t layout = c.i("layout", 0);
  if (layout != 0 && layout != 1) c.unsupported("layout " + std::to_string(layout));
  if (lstm && c.i("input_forget", 0) != 0) c.unsupported("input_forget=1");
  const NodeId x = c.in(0), w = c.in(1), r = c.in(2);
  const Shape xs = c.shape_of(x), rs = c.shape_of(r);
  RLX_CHECK(xs.rank() == 3, "X must be rank 3, got ", xs.str());
  RLX_CHECK(rs.rank() == 3 && rs.dims[2].is_static(), "R must be [D, G*hidden, hidden], got ",
            rs.str());
  const int64_t h = c.has_attr("hidden_size") ? c.i("hidden_size") : rs.dims[2].value;
  const DType dt = xs.dtype;
  const bool bf = layout == 1;
  const Dim Bd = bf ? xs.dims[0] : xs.dims[1];

  NodeId b = c.has(3) ? c.in(3) : c.b().full({D, 2 * G * h}, 0.0, dt);
  constexpr size_t ih = 5, ic = 6, ip = 7;  // initial_h, initial_c, P
  std::vector<NodeId> state;
  // [B, D, h] (layout 1) -> [D, B, h]
  auto to_dbh = [&](NodeId s) { return bf ? c.b().transpose(s, {1, 0, 2}) : s; };
  auto zeros = [&](const char* what) {
    if (!Bd.is_static()) c.unsupported(std::string(what) + " absent with a dynamic batch");
    return c.b().full({D, Bd.value, h}, 0.0, dt);
  };
  const bool has_h = c.has(ih), has_c = lstm && c.has(ic);
  if (has_h || has_c) {
    state.push_back(has_h ? to_dbh(c.in(ih)) : zeros("initial_h"));
    if (lstm) state.push_back(has_c ? to_dbh(c.in(ic)) : zeros("initial_c"));
  }
  std::vector<NodeId> in{x, w, r, b};
  in.insert(in.end(), state.begin(), state.end());
  const bool lengths = c.has(4);
  if (lengths) in.push_back(c.in(4));
  const bool peephole = lstm && c.has(ip);
  if (peephole) in.push_back(c.in(ip));

  Attrs a{{"hidden", h},
          {"direction", dir},
          {"batch_first", bf},
          {"carry", !state.empty()},
          {"lengths", lengths}};
  if (op != Op::Rnn) a.set("gates", std::string("onnx"));
  if (lstm) a.set("peephole", peephole);
  if (gru) a.set("linear_before_reset", c.i("linear_before_reset", 0) != 0);
  if (c.has_attr("clip")) a.set("clip", c.f("clip", 0));
  if (c.has_attr("activations")) {
    const std::vector<std::string> acts = c.node.attr("activations")->strings;
    const size_t per = size_t(lstm ? 3 : gru ? 2 : 1);
    if (acts.size() != per * size_t(D))
      c.unsupported("activations with " + std::to_string(acts.size()) + " entries (expected " +
                    std::to_string(per * size_t(D)) + ")");
    for (size_t k = 0; k < per; ++k) {
      const std::string f = activation(c, acts[k]);
      if (D == 2 && activation(c, acts[per + k]) != f)
        c.unsupported("different activations per direction");
      a.set(k == 0 ? "act_f" : k == 1 ? "act_g" : "act_h", f);
    }
  }
  const std::vector<NodeId> outs = c.b().results(op, std::move(in), std::move(a));
  // Y: [S, B, D*h] -> [S, B, D, h] -> [S, D, B, h]; or [B, S, D*h] -> [B, S, D, h].
  const Shape ys = c.shape_of(outs[0]);
  std::vector<int64_t> split;
  for (int k = 0; k < 2; ++k)
    split.push_back(ys.dims[size_t(k)].is_static() ? ys.dims[size_t(k)].value : 0);
  // reshape with 0 = "copy this dim" is not rlx's rule; symbolic dims need -1 (one at most).
  int unknown = 0;
  for (int64_t& v : split)
    if (v == 0) v = -1, ++unknown;
  if (unknown > 1) c.unsupported("Y with symbolic batch and sequence dims");
  NodeId y = c.b().reshape(outs[0], {split[0], split[1], D, h});
  if (!bf) y = c.b().transpose(y, {0, 2, 1, 3});
  std::vector<Val> res{node_val(y)};
  for (size_t k = 1; k < outs.size(); ++k)
    res.push_back(node_val(bf ? c.b().transpose(outs[k], {1, 0, 2}) : outs[k]));
  return res;
}

}  // namespace

void register_recurrent(Registry& r) {
  r.add("LSTM", [](Ctx& c) { return lower_recurrent(c, Op::Lstm); });
  r.add("GRU", [](Ctx& c) { return lower_recurrent(c, Op::Gru); });
  r.add("RNN", [](Ctx& c) { return lower_recurrent(c, Op::Rnn); });
}

}  // namespace rlx::onnx
