// aten.lstm.input / aten.gru.input / aten.rnn_tanh.input / aten.rnn_relu.input (nn.LSTM,
// nn.GRU, nn.RNN: rlx_torch traces each module call to one such node, python/rlx_torch/
// _recurrent.py) -> one lstm / gru / rnn node. PyTorch's flat weight list (per layer and
// direction: w_ih, w_hh[, b_ih, b_hh]) is packed as rlx/recurrent.h reads it: w_ih flattened
// and concatenated, w_hh stacked, bias [L*D, 2*G*h] (b_ih | b_hh; zeros without biases).
#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {

namespace {

Value lower_recurrent(LowerCtx& c, Op op, const char* act) {
  const bool lstm = op == Op::Lstm;
  const NodeId x = c.tensor(0, "input");
  const std::vector<NodeId> hx = lstm ? c.tensors(1, "hx") : std::vector<NodeId>{c.tensor(1, "hx")};
  const std::vector<NodeId> params = c.tensors(2, "params");
  const bool has_biases = c.flag(3, "has_biases", true);
  const int64_t layers = c.i(4, "num_layers");
  const double dropout = c.f(5, "dropout", 0);
  const bool train = c.flag(6, "train", false);
  const bool bidi = c.flag(7, "bidirectional", false);
  const bool batch_first = c.flag(8, "batch_first", false);
  const int64_t D = bidi ? 2 : 1, G = lstm ? 4 : op == Op::Gru ? 3 : 1;
  // An LSTM with proj_size has a fifth weight per layer and direction: w_hr [proj, hidden].
  const bool proj =
      lstm && layers >= 1 && int64_t(params.size()) == layers * D * (has_biases ? 5 : 3);
  const int64_t per = (has_biases ? 4 : 2) + (proj ? 1 : 0);
  RLX_CHECK(layers >= 1 && int64_t(params.size()) == layers * D * per, c.node.op, ": expected ",
            layers * D * per, " weights (num_layers=", layers, ", directions=", D,
            has_biases ? ", w_ih, w_hh, b_ih, b_hh" : ", w_ih, w_hh", lstm ? "[, w_hr]" : "",
            " each), got ", params.size());
  RLX_CHECK(dropout == 0 || !train, c.node.op, ": dropout=", dropout,
            " between layers in training mode is not supported (export in eval mode)");
  RLX_CHECK(c.rank(params[1]) == 2 && c.dims(params[1])[0] % G == 0, c.node.op,
            ": w_hh_l0 must be [G*hidden, hidden or proj_size], got ", c.shape(params[1]).str());
  const int64_t h = c.dims(params[1])[0] / G;
  const DType dt = c.shape(x).dtype;
  std::vector<NodeId> wi, wh, bias, hr;
  for (int64_t ld = 0; ld < layers * D; ++ld) {
    const NodeId* p = &params[size_t(ld * per)];
    wi.push_back(c.b.reshape(p[0], {-1}));
    wh.push_back(p[1]);
    if (has_biases) {
      bias.push_back(p[2]);
      bias.push_back(p[3]);
    }
    if (proj) hr.push_back(c.b.reshape(p[per - 1], {-1}));
  }
  const NodeId w_ih = wi.size() == 1 ? wi[0] : c.b.concat(wi, 0);
  const NodeId w_hh = wh.size() == 1 ? wh[0] : c.b.concat(wh, 0);
  const std::vector<int64_t> bias_dims{layers * D, 2 * G * h};
  const NodeId b =
      has_biases
          ? c.b.reshape(c.b.concat(bias, 0), bias_dims)
          : c.b.op(Op::Full, {},
                   {{"shape", bias_dims}, {"value", 0.0}, {"dtype", std::string(dtype_name(dt))}});
  std::vector<NodeId> in{x, w_ih, w_hh, b};
  in.insert(in.end(), hx.begin(), hx.end());
  if (proj) in.push_back(hr.size() == 1 ? hr[0] : c.b.concat(hr, 0));
  Attrs a{{"hidden", h},
          {"num_layers", layers},
          {"direction", std::string(bidi ? "bidirectional" : "forward")},
          {"batch_first", batch_first},
          {"carry", true}};
  if (act) a.set("act_f", std::string(act));
  if (proj) a.set("proj_size", c.dims(params[size_t(per - 1)])[0]);
  return Value::tuple(c.b.results(op, std::move(in), std::move(a)));
}

}  // namespace

void register_recurrent(Registry& r) {
  r.add("aten.lstm.input", [](LowerCtx& c) { return lower_recurrent(c, Op::Lstm, nullptr); });
  r.add("aten.gru.input", [](LowerCtx& c) { return lower_recurrent(c, Op::Gru, nullptr); });
  r.add("aten.rnn_tanh.input", [](LowerCtx& c) { return lower_recurrent(c, Op::Rnn, "tanh"); });
  r.add("aten.rnn_relu.input", [](LowerCtx& c) { return lower_recurrent(c, Op::Rnn, "relu"); });
}

}  // namespace rlx::torch_ir
