"""train=True exports for tests/opt/train_export_test.cc.

usage: train_export_models.py OUT_DIR NAME...   (writes OUT_DIR/NAME/, one export each)

Each model is exported by rlx_torch with train=True (loss = cross-entropy,
BatchNorm and dropout in training form). Besides the export's
reference.safetensors (PyTorch's train-mode forward: loss, logits, updated
buffers), OUT_DIR/NAME/ gets inputs.safetensors (the example inputs by name,
for `rlx grad`) and grads.safetensors: "grad::<name>" for every parameter
(state_dict name) and float input, by torch.autograd in float64 on the same
weights, inputs and dropout masks (rlx_torch's seeded dropout mirrors rlx's).
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
from rlx_torch import _train  # noqa: E402


class CNN(nn.Module):
    """conv -> BatchNorm2d -> relu -> pool -> dropout -> linear."""

    def __init__(self, p):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1, bias=False)  # BN cancels a bias: its grad is 0
        self.bn = nn.BatchNorm2d(6)
        self.drop = nn.Dropout(p)
        self.fc = nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(self.drop(torch.flatten(h, 1)))


class EmbedMLP(nn.Module):
    """Embeddings, mean over the sequence, an MLP with dropout."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc1 = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, ids):
        return self.fc2(self.drop(F.relu(self.fc1(self.emb(ids).mean(1)))))


def cnn(p):
    torch.manual_seed(0)
    m = CNN(p)
    with torch.no_grad():  # non-trivial running stats and affine params
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 1.5)
        m.bn.weight.uniform_(0.5, 1.5)
        m.bn.bias.uniform_(-0.2, 0.2)
    return m, (torch.randn(4, 3, 8, 8),), torch.tensor([0, 3, 1, 4])


def embed_mlp():
    torch.manual_seed(1)
    return EmbedMLP(), (torch.randint(0, 20, (6, 5)),), torch.tensor([0, 1, 2, 3, 1, 0])


MODELS = {
    "cnn": lambda: cnn(0.0),
    "cnn_dropout": lambda: cnn(0.4),
    "embed_mlp": embed_mlp,
}


def main(argv):
    out = argv[0]
    torch.set_num_threads(1)  # test processes share the machine
    for name in argv[1:]:
        model, inputs, target = MODELS[name]()
        d = os.path.join(out, name)
        doc = rlx_torch.export(model, inputs, d, name=name, train=True,
                               loss_fn=F.cross_entropy, target=target)
        ids = [j["id"] for j in doc["inputs"]]
        step = torch.tensor(0, dtype=torch.int64)
        st.save_file(dict(zip(ids, list(inputs) + [target, step])),
                     os.path.join(d, "inputs.safetensors"))
        # torch.autograd in float64 on the same step (same dropout masks).
        model = model.double().train()
        args = [t.detach().double().requires_grad_(True) if t.is_floating_point() else t
                for t in inputs]
        fwd = _train.make_forward(F.cross_entropy, 0)
        loss, _ = fwd(model, args, _train.example_kwargs({}, target))
        named = list(model.named_parameters())
        named += [(i, a) for i, a in zip(ids, args) if a.is_floating_point()]
        grads = torch.autograd.grad(loss, [t for _, t in named], allow_unused=True)
        res = {"grad::" + k: torch.zeros_like(t) if g is None else g
               for (k, t), g in zip(named, grads)}
        st.save_file({k: v.detach().contiguous() for k, v in res.items()},
                     os.path.join(d, "grads.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1:])
