"""PyTorch fake-quantization models for tests/frontends/torch_quant_test.cc.

usage: torch_quant_models.py OUT_DIR   (writes OUT_DIR/<name>/ for every model)

Each model is exported by rlx_torch (float32; make_fx records the *_cachemask forms of
fake_quantize_per_tensor/per_channel_affine and the learnable LSQ ops as they are); its
gradients come from torch.autograd in float32 (PyTorch's fake quantize kernels are float32
only): OUT_DIR/<name>/grads.safetensors holds "ct::out::<i>" (the cotangent rlx is fed) and
"grad::<name>" for every parameter and float input.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python")]

import rlx_torch  # noqa: E402
import rlx_torch._safetensors as st  # noqa: E402


class QatMlp(nn.Module):
    """Fake-quantized input (fixed int8 qparams), per-channel int4 weight with zero points,
    a learnable (LSQ) uint8 activation scale, and a learnable per-channel int8 weight scale."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 5)
        self.register_buffer("w1_scale", torch.rand(16) * 0.05 + 0.05)
        self.register_buffer("w1_zp", torch.randint(-2, 3, (16,), dtype=torch.int32))
        self.act_scale = nn.Parameter(torch.tensor([0.03]))
        self.w2_scale = nn.Parameter(torch.rand(5) * 0.01 + 0.01)

    def forward(self, x):
        x = torch.fake_quantize_per_tensor_affine(x, 0.02, 0, -128, 127)
        w1 = torch.fake_quantize_per_channel_affine(self.fc1.weight, self.w1_scale, self.w1_zp,
                                                    0, -8, 7)
        h = F.relu(F.linear(x, w1, self.fc1.bias))
        h = torch._fake_quantize_learnable_per_tensor_affine(h, self.act_scale, torch.zeros(1),
                                                              0, 255, 0.5)
        w2 = torch._fake_quantize_learnable_per_channel_affine(
            self.fc2.weight, self.w2_scale, torch.zeros(5), 0, -128, 127, 1.0)
        y = F.linear(h, w2, self.fc2.bias)
        # tensor qparams (the _cachemask_tensor_qparams form) on the output
        return torch.fake_quantize_per_tensor_affine(
            y, torch.tensor([0.01]), torch.tensor([3], dtype=torch.int32), -128, 127)


def qat_mlp():
    torch.manual_seed(5)
    return QatMlp(), (torch.randn(6, 12),)


MODELS = {"qat_mlp": qat_mlp}


def main(argv):
    out = argv[0]
    torch.set_num_threads(1)  # test processes share the machine
    for name, make in MODELS.items():
        model, inputs = make()
        d = os.path.join(out, name)
        doc = rlx_torch.export(model, inputs, d, name=name)
        ids = [j["id"] for j in doc["inputs"]]
        args = [t.detach().clone().requires_grad_(True) for t in inputs]
        outs = model(*args)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        gen = torch.Generator().manual_seed(11)
        cts = [torch.rand(o.shape, generator=gen, dtype=torch.float32) * 2 - 1 for o in outs]
        named = list(model.named_parameters()) + list(zip(ids, args))
        grads = torch.autograd.grad(outs, [t for _, t in named], cts, allow_unused=True)
        res = {f"ct::out::{i}": c for i, c in enumerate(cts)}
        res.update({f"want::out::{i}": o for i, o in enumerate(outs)})
        for (k, t), g in zip(named, grads):
            res["grad::" + k] = torch.zeros_like(t) if g is None else g
        st.save_file({k: v.detach().contiguous() for k, v in res.items()},
                     os.path.join(d, "grads.safetensors"))
        with open(os.path.join(d, "ops.txt"), "w") as f:
            f.write("\n".join(sorted({n["op"] for n in doc["nodes"]})))


if __name__ == "__main__":
    main(sys.argv[1:])
