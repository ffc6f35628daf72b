"""The models bench/train_step.py trains, shared by its export step and its
PyTorch loop so both sides train the same module on the same data.

Each workload: a module factory, its training data (x, target), the batch and
Adam's learning rate. Data is synthetic (seeded) except the digits'.
"""
import os
import sys
from collections import namedtuple

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "digits"))

Workload = namedtuple("Workload", "factory load batch lr")


class MLP(nn.Module):
    """Three linear layers with ReLU: 256 -> 512 -> 512 -> 10."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 10))

    def forward(self, x):
        return self.net(x)


class TransformerBlock(nn.Module):
    """One post-norm encoder layer (d 128, 4 heads, ff 512, no dropout) over
    sequences of 32, mean-pooled into a 10-way classifier."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.layer(x).mean(dim=1))


def _synthetic(shape, n=2048, classes=10, seed=0):
    # Labels that depend on the input (the sign pattern of a fixed projection),
    # so the loss falls as on real data.
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((n,) + shape, generator=g)
    w = torch.randn(x[0].numel(), classes, generator=g)
    return x, (x.reshape(n, -1) @ w).argmax(dim=1)


def _digits():
    import digits
    xtr, ytr, _, _ = digits.load()
    return xtr, ytr


def _digits_cnn():
    import digits
    return digits.DigitsCNN()


WORKLOADS = {
    "digits_cnn": Workload(_digits_cnn, _digits, 64, 3e-3),
    "mlp": Workload(MLP, lambda: _synthetic((256,)), 128, 1e-3),
    "transformer": Workload(TransformerBlock, lambda: _synthetic((32, 128), n=1024), 32, 1e-3),
}
