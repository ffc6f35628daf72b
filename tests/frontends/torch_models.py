"""Exports whole models for tests/frontends/torch_models_test.cc and bench/torch_models.sh.

usage: torch_models.py OUT_DIR [--size N] NAME...   (writes OUT_DIR/NAME/, one export each)
--size sets the image side for the torchvision models (default 64).
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python")]

import rlx_torch  # noqa: E402
import rlx_torch_models as M  # noqa: E402

SIZE = 64


def transformer_fast_norm_first():
    """Fast path with norm_first and gelu (use_gelu=True, norm_first=True in the fused op)."""
    M._seed(1)
    m = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, activation="gelu", norm_first=True,
                                   batch_first=True)
    M._reinit(m)
    return m, (torch.randn(2, 7, 32),)


def _vision(name, **kw):
    import torchvision
    M._seed()
    m = getattr(torchvision.models, name)(num_classes=10, **kw)
    if any(isinstance(x, nn.modules.batchnorm._BatchNorm) for x in m.modules()):
        M._reestimate_bn(m, (4, 3, SIZE, SIZE), steps=3)
    m.eval()
    return m, (torch.randn(1, 3, SIZE, SIZE),)


class _Recurrent(nn.Module):
    """nn.LSTM / GRU / RNN with the initial state as separate inputs (x[, h0[, c0]])."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        if not state:
            return self.rnn(x)
        return self.rnn(x, state if len(state) == 2 else state[0])


def _recurrent(kind, init, batch=3, seq=6, feat=5, **kw):
    """One recurrent module with random weights; init: pass the initial state as inputs."""
    def make():
        M._seed(7)
        m = getattr(nn, kind)(feat, 8, **kw).eval()
        L = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        x = torch.randn(batch, seq, feat) if kw.get("batch_first") else torch.randn(seq, batch, feat)
        inputs = (x,)
        if init:  # h0 (proj_size wide with a projection), then an LSTM's c0
            inputs += (torch.randn(L, batch, kw.get("proj_size", 0) or 8),)
            if kind == "LSTM":
                inputs += (torch.randn(L, batch, 8),)
        return _Recurrent(m), inputs
    return make


RECURRENT = {
    "lstm_uni": _recurrent("LSTM", False),
    "lstm_bi2_bf_init": _recurrent("LSTM", True, num_layers=2, bidirectional=True,
                                   batch_first=True),
    "lstm_bi_nobias": _recurrent("LSTM", False, bidirectional=True, bias=False),
    "lstm_proj_bi2_init": _recurrent("LSTM", True, num_layers=2, bidirectional=True, proj_size=3),
    "gru_2_bf_init": _recurrent("GRU", True, num_layers=2, batch_first=True),
    "gru_bi": _recurrent("GRU", False, bidirectional=True),
    "rnn_tanh_bi2_bf_init": _recurrent("RNN", True, num_layers=2, bidirectional=True,
                                       batch_first=True),
    "rnn_relu": _recurrent("RNN", False, nonlinearity="relu"),
}

MODELS = {
    **RECURRENT,
    "mlp": M.mlp,
    "cnn_bn": M.cnn_bn,
    "transformer_fast": M.transformer_fast,
    "transformer_fast_norm_first": transformer_fast_norm_first,
    "transformer_slow": M.transformer_slow,
    "gpt": M.gpt,
    "resnet18": lambda: _vision("resnet18"),
    "mobilenet_v2": lambda: _vision("mobilenet_v2"),
    "squeezenet1_1": lambda: _vision("squeezenet1_1"),
    "shufflenet_v2_x1_0": lambda: _vision("shufflenet_v2_x1_0"),
}


def main(argv):
    global SIZE
    out = argv[0]
    names = argv[1:]
    if names[:1] == ["--size"]:
        SIZE = int(names[1])
        names = names[2:]
    torch.set_num_threads(1)  # test processes share the machine
    for name in names:
        model, inputs = MODELS[name]()
        rlx_torch.export(model, inputs, os.path.join(out, name), name=name)


if __name__ == "__main__":
    main(sys.argv[1:])
