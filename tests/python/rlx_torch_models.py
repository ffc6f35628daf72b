"""Model factories for the rlx_torch tests: each returns (model, example_inputs).

Also usable from the command line: python3 -m rlx_torch tests/python/rlx_torch_models.py:mlp -o DIR
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _seed(s=0):
    torch.manual_seed(s)


def mlp():
    _seed()
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 32),
                      nn.GELU(), nn.Linear(32, 10))
    return m, (torch.randn(4, 16),)


def _reestimate_bn(m, shape, steps=4):
    # Random-init BN stats make outputs ~1e-12 (see peers.md): refit them.
    m.train()
    with torch.no_grad():
        for _ in range(steps):
            m(torch.randn(*shape))
    m.eval()


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.b1(self.c1(x))))
        x = F.relu(self.b2(self.c2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def cnn_bn():
    _seed()
    m = SmallCNN()
    _reestimate_bn(m, (8, 3, 16, 16))
    return m, (torch.randn(2, 3, 16, 16),)


def _reinit(m):
    for name, p in m.named_parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
        elif "norm" in name and name.endswith("weight"):
            nn.init.uniform_(p, 0.5, 1.5)
        else:
            nn.init.uniform_(p, -0.1, 0.1)


def transformer_fast():
    """batch_first=True, eval, no_grad: 1.13 takes the fused fast path."""
    _seed()
    m = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
    _reinit(m)
    return m, (torch.randn(2, 7, 32),)


def transformer_slow():
    """batch_first=False and norm_first with gelu: the unfused (composite) path."""
    _seed()
    m = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, activation="gelu", norm_first=True)
    _reinit(m)
    return m, (torch.randn(7, 2, 32),)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, d // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.h))
        att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50, d=32, h=4, n=2, ctx=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, h) for _ in range(n)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in GPT-2
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x, self.mask)
        return self.head(self.ln_f(x))


def gpt():
    _seed()
    m = GPT()
    return m, (torch.randint(0, 50, (2, 9)),)


def resnet18():
    import torchvision
    _seed()
    m = torchvision.models.resnet18(num_classes=10)
    _reestimate_bn(m, (4, 3, 64, 64), steps=3)
    return m, (torch.randn(1, 3, 64, 64),)


class MultiOut(nn.Module):
    """Dict and tuple outputs, kwargs, a python scalar arg, a non-tensor output."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x, pair, *, bias=None, alpha=0.5, mode="sum"):
        a, b = pair
        h = torch.tanh(self.lin(x)) * self.scale
        if bias is not None:
            h = h + bias
        s = h.sum(-1) if mode == "sum" else h.mean(-1)
        const = torch.tensor([1.0, -1.0])  # lifted constant
        return {"h": h, "stats": (s * alpha, a @ b.t() + const.sum()), "n": 3}


def multi_out():
    _seed()
    x = torch.randn(3, 8)
    pair = (torch.randn(3, 4), torch.randn(2, 4))
    return MultiOut(), (x, pair, {"bias": torch.randn(8), "alpha": 0.25, "mode": "sum"})


def cnn_misc():
    """GroupNorm, SiLU, Hardswish, LeakyReLU, Upsample, LogSoftmax."""
    _seed()
    m = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU(), nn.Hardswish(),
                      nn.LeakyReLU(0.1), nn.Upsample(scale_factor=2), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 6), nn.LogSoftmax(-1))
    return m, (torch.randn(2, 4, 5, 5),)


ALL = {
    "mlp": mlp,
    "cnn_bn": cnn_bn,
    "transformer_fast": transformer_fast,
    "transformer_slow": transformer_slow,
    "gpt": gpt,
    "resnet18": resnet18,
    "multi_out": multi_out,
    "cnn_misc": cnn_misc,
}
