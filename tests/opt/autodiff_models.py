"""Whole-model gradients for tests/opt/autodiff_torch_test.cc.

usage: autodiff_models.py OUT_DIR NAME...   (writes OUT_DIR/NAME/, one export each)

Each model is exported by rlx_torch (float32, eval mode) and its gradients
are computed by torch.autograd in float64 on the same weights and inputs:
OUT_DIR/NAME/grads.safetensors holds "ct::out::<i>" (a random float32
cotangent per output, what rlx is fed) and "grad::<name>" for every
parameter (state_dict name) and float input, the reference rlx must match.
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python"),
                os.path.join(ROOT, "tests", "frontends")]

import rlx_torch  # noqa: E402
import rlx_torch._safetensors as st  # noqa: E402
import rlx_torch_models as M  # noqa: E402
import torch_models as T  # noqa: E402


def transformer():
    """An encoder block: layer_norm + multi-head attention + gelu MLP (norm first)."""
    M._seed(3)
    m = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, activation="gelu", norm_first=True,
                                   batch_first=True, dropout=0.0)
    M._reinit(m)
    return m, (torch.randn(2, 7, 32),)


MODELS = {
    "mlp": M.mlp,
    "cnn": M.cnn_bn,
    "transformer": transformer,
    "gpt": M.gpt,
    "cnn_groupnorm": M.cnn_misc,
    # Backpropagation through time: every output (y, h_n[, c_n]) gets a cotangent.
    "lstm": T.RECURRENT["lstm_bi2_bf_init"],
    "lstm_proj": T.RECURRENT["lstm_proj_bi2_init"],
    "gru": T.RECURRENT["gru_bi"],
    "rnn": T.RECURRENT["rnn_tanh_bi2_bf_init"],
}


def flatten(v):
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in flatten(x)]
    return [v]


def main(argv):
    out = argv[0]
    torch.set_num_threads(1)  # test processes share the machine
    for name in argv[1:]:
        model, inputs = MODELS[name]()
        d = os.path.join(out, name)
        doc = rlx_torch.export(model, inputs, d, name=name)
        model = model.double().eval()
        # The export's inputs are the example tensors in order, named by id.
        ids = [j["id"] for j in doc["inputs"]]
        args = [t.detach().double().requires_grad_(True) if t.is_floating_point() else t
                for t in inputs]
        outs = model(*args)
        outs = flatten(outs)  # nn.LSTM's (y, (h, c)) as the export's outputs: y, h, c
        gen = torch.Generator().manual_seed(11)
        cts = [torch.rand(o.shape, generator=gen, dtype=torch.float32) * 2 - 1 for o in outs]
        named = list(model.named_parameters())
        named += [(i, a) for i, a in zip(ids, args) if a.is_floating_point()]
        grads = torch.autograd.grad(outs, [t for _, t in named], [c.double() for c in cts],
                                    allow_unused=True)
        res = {f"ct::out::{i}": c for i, c in enumerate(cts)}
        for (k, t), g in zip(named, grads):
            res["grad::" + k] = torch.zeros_like(t) if g is None else g
        st.save_file({k: v.detach().contiguous() for k, v in res.items()},
                     os.path.join(d, "grads.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1:])
