"""nn.LSTM / nn.GRU / nn.RNN as one node each.

aten::lstm / gru / rnn_tanh / rnn_relu are CompositeImplicitAutograd: make_fx
never sees them, only their unrolled per-step decomposition (unsafe_split,
addmm, sigmoid, ... per time step). While tracing, torch._VF's entry points are
swapped for custom ops rlx_rnn::lstm etc. with the same schema (their CPU kernel is
the real aten op), so each module call becomes one node, written to the JSON
under the aten name (aten.lstm.input, ...). Packed sequences (the .data
overloads) and dropout between layers in training keep the decomposition.
"""
import contextlib

import torch

from . import _stand_in

# custom op -> the aten overload it stands for (the name written to torch-ir.json)
ATEN_NAME = {
    "rlx_rnn.lstm.default": "aten.lstm.input",
    "rlx_rnn.gru.default": "aten.gru.input",
    "rlx_rnn.rnn_tanh.default": "aten.rnn_tanh.input",
    "rlx_rnn.rnn_relu.default": "aten.rnn_relu.input",
}

_SCHEMA = {
    "lstm": "lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, "
            "float dropout, bool train, bool bidirectional, bool batch_first) "
            "-> (Tensor, Tensor, Tensor)",
}
for _n in ("gru", "rnn_tanh", "rnn_relu"):
    _SCHEMA[_n] = (f"{_n}(Tensor input, Tensor hx, Tensor[] params, bool has_biases, "
                   "int num_layers, float dropout, bool train, bool bidirectional, "
                   "bool batch_first) -> (Tensor, Tensor)")


def _library():
    _stand_in.define("rlx_rnn", _SCHEMA, lambda name: getattr(torch.ops.aten, name).input)


@contextlib.contextmanager
def recurrent_as_one_node():
    """While active, nn.LSTM/GRU/RNN calls trace to one rlx_rnn::<op> node each."""
    _library()
    vf = torch._VF
    saved = {n: getattr(vf, n) for n in _SCHEMA}

    def wrap(name, orig):
        def call(*args):
            # The .input overload: (input, hx, params, has_biases, layers, dropout, train, bidi,
            # batch_first); lstm's hx is a list, gru/rnn's a tensor; params is a list.
            is_input = (len(args) == 9 and isinstance(args[2], (list, tuple))
                        and (name != "lstm" or isinstance(args[1], (list, tuple))))
            if not is_input or (args[5] > 0 and args[6]):
                return orig(*args)
            return getattr(torch.ops.rlx_rnn, name)(*args)
        return call

    try:
        for n, f in saved.items():
            setattr(vf, n, wrap(n, f))
        yield
    finally:
        for n, f in saved.items():
            setattr(vf, n, f)
