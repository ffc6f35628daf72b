"""Exports models with torch.onnx.export (opset 17) for tests/frontends/onnx_models_test.cc.

usage: onnx_models.py OUT_DIR NAME...   (writes OUT_DIR/NAME/{model.onnx, inputs.safetensors,
reference.safetensors}; inputs keyed by the ONNX input names, the output is "out")
Small sizes so the test stays fast; BatchNorm statistics re-estimated and
transformer layers re-initialized so the outputs are not near zero (peers.md).
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python")]

from rlx_torch import _safetensors as st  # noqa: E402
import rlx_torch_models as M  # noqa: E402


def _vision(name):
    import torchvision
    M._seed()
    m = getattr(torchvision.models, name)(num_classes=10)
    M._reestimate_bn(m, (4, 3, 64, 64), steps=3)
    m.eval()
    return m, (torch.randn(1, 3, 64, 64),)


class Encoder(nn.Module):
    """A BERT-style stack: two post-norm nn.TransformerEncoderLayers, distinct weights."""

    def __init__(self, d=32, h=4, ff=64, n=2, act="relu", norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d, h, ff, activation=act, batch_first=True,
                                       norm_first=norm_first) for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def encoder(**kw):
    M._seed()
    m = Encoder(**kw)
    for layer in m.layers:
        M._reinit(layer)
    m.eval()
    return m, (torch.randn(2, 7, 32),)


def gpt():
    M._seed()
    m = M.GPT()
    m.eval()
    return m, (torch.randint(0, 50, (2, 9)),)


class Pools3d(torch.nn.Module):
    """3-d max and average pools with pads, strides, dilation, ceil_mode and both pad counts."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.pools = nn.ModuleList([
            nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), dilation=(1, 1, 2),
                         ceil_mode=True),
            nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            nn.AvgPool3d((2, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1), count_include_pad=True),
        ])

    def forward(self, x):
        return torch.cat([p(x).flatten() for p in self.pools])


MODELS = {
    "resnet18": lambda: _vision("resnet18"),
    "mobilenet_v2": lambda: _vision("mobilenet_v2"),
    "encoder": encoder,
    "encoder_gelu_norm_first": lambda: encoder(act="gelu", norm_first=True),
    "gpt": gpt,
    "pools3d": lambda: (Pools3d().eval(), (torch.randn(2, 3, 7, 9, 8),)),
}


def main(argv):
    out, names = argv[0], argv[1:]
    torch.set_num_threads(1)
    for name in names:
        model, inputs = MODELS[name]()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        ids = [f"input_{i}" for i in range(len(inputs))]
        # Not under no_grad: nn.TransformerEncoderLayer would take its fused
        # fast path, which the ONNX exporter cannot express.
        torch.onnx.export(model, inputs, os.path.join(d, "model.onnx"), opset_version=17,
                          input_names=ids, output_names=["out"], do_constant_folding=True)
        with torch.no_grad():
            ref = model(*inputs)
        st.save_file(dict(zip(ids, inputs)), os.path.join(d, "inputs.safetensors"))
        st.save_file({"out": ref}, os.path.join(d, "reference.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1:])
