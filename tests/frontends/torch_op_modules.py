"""One small nn.Module per aten op family for tests/frontends/torch_ops_test.cc.

`python3 torch_op_modules.py OUTDIR` exports every case at every decomposition
level into OUTDIR/<case>@<level> (a level whose op list equals an earlier
level's is skipped) and writes OUTDIR/manifest.json:
[{"name", "family", "level", "dir", "ops"}] or {"name", "error"}.
"""
import json
import os
import shutil
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import rlx_torch  # noqa: E402


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


CASES = []  # (name, family, module factory, inputs factory)


def case(name, family, fn, *inputs):
    mod = fn if isinstance(fn, nn.Module) else Fn(fn)
    CASES.append((name, family, mod, inputs))


def r(*s):
    return torch.randn(*s)


def pos(*s):
    return torch.rand(*s) + 0.1


def ri(lo, hi, *s):
    return torch.randint(lo, hi, s)


torch.manual_seed(0)

# ---- shape / movement
x234 = r(2, 3, 4)
case("view", "shape", lambda x: (x.view(4, 6), x.view(-1), x.view(2, 12)), x234)
case("reshape_noncontig", "shape", lambda x: x.transpose(0, 2).reshape(6, 4), x234)
case("reshape", "shape", lambda x: (x.reshape(3, 8), torch.reshape(x, (-1, 2))), x234)
case("flatten", "shape", lambda x: (x.flatten(1), torch.flatten(x, 0, 1), x.flatten()), x234)
case("unsqueeze_squeeze", "shape",
     lambda x: (x.unsqueeze(-1), x.unsqueeze(0), x.unsqueeze(1).squeeze(1),
                x[:, :1].squeeze(), x[:1].squeeze(0), x.squeeze(-1)), x234)
case("permute_transpose", "shape",
     lambda x, m: (x.permute(2, 0, 1), x.transpose(-1, -2), m.t(), x.permute(0, 2, 1) + 1), x234,
     r(3, 5))
case("expand", "shape", lambda x, y: (x.expand(3, 4, 5), y.expand(2, -1, 4) * 2, x.expand_as(
    torch.zeros(2, 3, 4, 5))), r(4, 1), r(1, 3, 4))
case("slice", "shape",
     lambda x: (x[:, 1:], x[..., ::2], x[:, -2:, 1:3], x[1:, :, :-1], x[:, 0:100], x.narrow(2, 1, 2)),
     x234)
case("cat_stack", "shape",
     lambda a, b: (torch.cat([a, b], 0), torch.cat([a, b, a], -1), torch.stack([a, b], 1),
                   torch.stack([a, b], -1), torch.stack([a, b])), r(2, 3), r(2, 3))
case("clone_contiguous_detach", "shape",
     lambda x: (x.t().contiguous() + 1, x.clone() * 2, x.detach() - 1), r(3, 4))
case("select", "shape", lambda x: (x[1], x[:, -1], x[..., 2], x.select(1, 0)), x234)
case("split", "shape",
     lambda x: (*torch.split(x, [1, 3, 2], dim=1), *torch.split(x, 4, dim=-1),
                *x.chunk(3, 0), *x.unbind(1)), r(3, 6, 7))
case("repeat_roll_flip", "shape",
     lambda x: (x.repeat(2, 1, 3), x.repeat(2, 1, 1, 1), torch.roll(x, 1, 0), torch.roll(x, (2, -1), (1, 2)),
                torch.roll(x, 3), torch.flip(x, [0, 2]), x.flip(-1)), x234)
case("pad", "shape",
     lambda x: (F.pad(x, (1, 2)), F.pad(x, (0, 1, 2, 0), value=-1.5), F.pad(x, (1, 1, 1, 1, 1, 1))),
     x234)
case("pad_modes", "shape",
     lambda x, y: (F.pad(x, (1, 2), mode="reflect"), F.pad(x, (2, 1), mode="replicate"), F.pad(y, (1, 2, 2, 1), mode="reflect"),
                   F.pad(y, (1, 0, 0, 3), mode="replicate"), F.pad(y, (1, 1, 1, 1), mode="circular")), x234, r(1, 2, 4, 5))
case("scatter", "indexing",
     lambda x, idx, src: (x.scatter(1, idx, src), x.scatter(0, idx[:1] % 3, 2.5)), r(3, 5), torch.tensor([[0, 2, 4], [1, 3, 0], [4, 4, 4]]),
     r(3, 3))
case("pixel_shuffle", "shape",
     lambda x: (F.pixel_shuffle(x, 2), F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2)), r(1, 8, 3, 5))
case("tril_triu", "shape",
     lambda x: (x.tril(), x.triu(), x.tril(-1), x.triu(2), torch.tril(x[0], 1)), r(2, 4, 5))

# ---- creation
case("full_ones_zeros", "creation",
     lambda x: (x + torch.full((3, 4), 2.5), torch.full_like(x, 7), torch.zeros(3, 4) + x,
                torch.zeros_like(x), x.new_zeros(2, 2), torch.ones(4) * x, torch.ones_like(x, dtype=torch.int64),
                x.new_ones(3), torch.scalar_tensor(3.0) + x, torch.full((2,), 3, dtype=torch.int32)),
     r(3, 4))
case("empty", "creation",
     lambda x: (torch.empty(3, 4).fill_(1.5) + x, torch.empty_like(x).zero_(), x.new_empty(2, 3).fill_(2)),
     r(3, 4))
case("arange", "creation",
     lambda x: (torch.arange(5) + x, torch.arange(1, 10, 2), torch.arange(0, 1, 0.125),
                torch.arange(5, dtype=torch.float32) * x, torch.arange(10, 0, -3)), ri(0, 5, 5))
case("to_copy", "creation",
     lambda x, i: (x.to(torch.float64), x.int(), x.to(torch.bool), i.float(), i.to(torch.int32), x > 0,
                   (x > 0).to(torch.float32), x.long()), r(3, 4) * 3, ri(-5, 5, 3, 4))
case("dropout_eval", "creation",
     nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.ReLU(), nn.Dropout2d(0.3)), r(2, 4))

# ---- elementwise unary
xs = r(4, 5) * 3
UNARY = {
    "relu": torch.relu, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp,
    "neg": torch.neg, "abs": torch.abs, "sin": torch.sin, "cos": torch.cos, "erf": torch.erf,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "sign": torch.sign,
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "leaky_relu": F.leaky_relu, "leaky_relu_0.2": lambda x: F.leaky_relu(x, 0.2),
    "leaky_relu_neg": lambda x: F.leaky_relu(x, -0.5), "hardtanh": F.hardtanh,
    "hardtanh_args": lambda x: F.hardtanh(x, -2.0, 0.5), "relu6": F.relu6,
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "elu": F.elu,
    "elu_alpha": lambda x: F.elu(x, 0.5), "selu": F.selu, "celu": lambda x: F.celu(x, 2.0),
    "softplus": F.softplus, "softplus_beta": lambda x: F.softplus(x, 2.0, 1.0), "mish": F.mish,
}
for n, f in UNARY.items():
    case("unary_" + n, "unary", f, xs)
case("unary_round_half", "unary", torch.round, torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49]))
POSITIVE = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}
for n, f in POSITIVE.items():
    case("unary_" + n, "unary", f, pos(4, 5) * 3)
case("unary_int", "unary", lambda i: (i.abs(), -i, i.sign(), i.float().exp(), torch.sqrt(i.abs())),
     ri(-5, 5, 6))

# ---- elementwise binary
a, b = r(3, 4), r(3, 4)
case("add_sub_mul", "binary",
     lambda a, b, c: (a + b, a - b, a * b, a + c, c - a, torch.add(a, b, alpha=2), torch.sub(a, b, alpha=0.5),
                      a + 2.5, a * 3, a - 1, 2 - a, torch.rsub(a, b), torch.rsub(a, 2.0, alpha=3)),
     a, b, r(4))
case("div", "binary",
     lambda a, b: (a / b, a / 4, torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                   torch.div(a, 0.7, rounding_mode="floor"), 1 / a), a * 5, b + 2.0)
case("pow", "binary",
     lambda a, p: (a ** 2, a ** 3, p ** 0.5, p ** -1.5, 2 ** a, p ** a, torch.pow(p, 1.7)), a, pos(3, 4))
case("clamp", "binary",
     lambda a, lo, hi: (a.clamp(-0.5, 0.5), a.clamp(min=0.1), a.clamp(max=-0.1), torch.clamp_min(a, 0.2),
                        torch.clamp_max(a, 0.3), a.clamp(lo, hi), torch.clamp(a, min=lo), a.clip(-1, 1)),
     a * 2, -pos(3, 4), pos(4))
case("compare", "binary",
     lambda a, b: (a < b, a <= b, a > b, a >= b, a == b, a != b, a < 0, a >= 0.5, a == a, a != 1),
     a, torch.where(torch.rand(3, 4) > 0.5, a, b))
case("logical", "binary",
     lambda m, n, i: (m & n, m | n, ~m, torch.logical_and(m, n), torch.logical_or(m, n), torch.logical_not(m),
                      torch.logical_not(i), ~i, torch.logical_and(i, m)),
     torch.rand(3, 4) > 0.5, torch.rand(3, 4) > 0.5, ri(-3, 3, 3, 4))
case("where_masked_fill", "binary",
     lambda a, b, m: (torch.where(m, a, b), torch.where(m, a, 0.0), torch.where(a > 0, 1.0, -1.0),
                      a.masked_fill(m, -1e9), a.masked_fill(~m, float("-inf")), a.masked_fill(m[0], 3)),
     a, b, torch.rand(3, 4) > 0.5)
case("bitwise_bool", "binary", lambda m, n: (m ^ n, torch.bitwise_and(m, n), m | n), torch.rand(3, 4) > 0.5,
     torch.rand(3, 4) > 0.5)
case("fill", "creation", lambda x, v: (x.clone().fill_(v), torch.zeros_like(x).fill_(2), x.clone().zero_()),
     r(3, 4), torch.tensor(1.5))
case("minmax_mod", "binary",
     lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.remainder(a, 0.7), torch.fmod(a, 0.7),
                   a % b), a * 3, b.abs() + 0.5)

# ---- type promotion
case("promote", "promotion",
     lambda i, j, f, m, h: (i + 1.5, i * 2, i * f, i / j, i // j, torch.div(i, j, rounding_mode="trunc"),
                            torch.div(i, j, rounding_mode="floor"), i % j, i - j, m * f, m + m, m + 1,
                            f + m, i * 0.5, h + i, h * 2.5, f.double() + f, i.int() + i, i.int() * 1.5,
                            (i > 0) * i, i.float() / 3, i + torch.tensor(2.5), f + torch.tensor(2, dtype=torch.int64)),
     ri(-9, 9, 3, 4), ri(1, 5, 3, 4) * torch.where(torch.rand(3, 4) > 0.5, 1, -1), r(3, 4), torch.rand(3, 4) > 0.5,
     r(3, 4).double())

# f16/bf16: PyTorch computes in f32 and rounds per op, as rlx does.
case("half", "half",
     lambda h, b, f: (h * 2, h + f, h.float() * f, (h + h).sum(-1), b * 3, b + f, h.to(torch.bfloat16), f.half(),
                      torch.relu(b), b.exp(), b.neg()),
     r(3, 4).half(), r(3, 4).bfloat16(), r(3, 4))
case("empty_tensors", "shape",
     lambda x, e: (x[:, 0:0], torch.cat([x, e], 1), e.sum(1), e * 2, x[2:2].flatten(), e.transpose(0, 1)),
     r(3, 4), r(3, 0))

# ---- matmul
case("mm_bmm_matmul", "matmul",
     lambda a, b, c, d, v: (a @ b, torch.mm(a, b), torch.bmm(c, d), c @ b, v @ b, a @ v[:4].unsqueeze(1).squeeze(1)[:4],
                            torch.matmul(c.unsqueeze(0).expand(2, 2, 3, 4), d), c @ v[:4]),
     r(3, 4), r(4, 5), r(2, 3, 4), r(2, 4, 5), r(4))
case("addmm_baddbmm", "matmul",
     lambda bias, a, b, c, d, e: (torch.addmm(bias, a, b), torch.addmm(bias, a, b, beta=0.5, alpha=2),
                                  torch.baddbmm(e, c, d), torch.baddbmm(e, c, d, beta=0.3, alpha=-1)),
     r(5), r(3, 4), r(4, 5), r(2, 3, 4), r(2, 4, 5), r(2, 3, 5))
case("linear", "matmul", nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 3, bias=False)), r(2, 7, 6))
case("linear_1d", "matmul", nn.Linear(6, 5), r(6))

# ---- reductions
case("sum_mean", "reduce",
     lambda x, i: (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.mean(), x.mean(-1), x.mean((1, 2), keepdim=True),
                   i.sum(), i.sum(0), x.sum(1, dtype=torch.float64), (x > 0).sum(-1)),
     r(3, 4, 5), ri(-5, 5, 3, 4))
case("amax_amin", "reduce",
     lambda x: (x.amax(1), x.amin(-1, keepdim=True), x.amax((0, 2)), x.max(), x.min(), x.max(1)[0],
                x.min(1, keepdim=True)[1], x.argmax(2), x.argmin()), r(3, 4, 5))
case("var_std", "reduce",
     lambda x: (x.var(), x.var(1), x.var(1, unbiased=False), x.var((0, 2), keepdim=True), x.std(), x.std(-1),
                *torch.var_mean(x, 1), *torch.var_mean(x, (0, 1), unbiased=False), *torch.std_mean(x, 2)),
     r(3, 4, 5))
case("cumsum_topk", "reduce",
     lambda x, i: (x.cumsum(1), x.cumsum(-1), i.cumsum(0), *x.topk(3), *x.topk(2, dim=1, largest=False),
                   x.topk(2, 0)[0]), r(3, 6), ri(-5, 5, 4, 2))
# data-dependent output dims: the counts are symbols rlx binds when the node has run
x45 = r(4, 5)
case("nonzero_unique", "indexing",
     lambda x, m, i: (torch.nonzero(x > 0.3), x[m], x[m] * 2 + 1, x[:, m[0]],
                      torch.masked_select(x, m), torch.masked_select(x, m[1]),
                      *torch.unique(i, return_inverse=True, return_counts=True),
                      *torch.unique(i.view(3, 4), dim=1, return_inverse=True, return_counts=True),
                      *torch.unique_consecutive(i, return_inverse=True, return_counts=True),
                      torch.argwhere(i)),
     x45, x45 > 0, ri(0, 4, 12))
case("softmax", "reduce",
     lambda x: (x.softmax(-1), F.softmax(x, 1), x.log_softmax(-1), F.log_softmax(x, 0),
                torch.softmax(x, -1, dtype=torch.float64)), r(2, 5, 7) * 4)
case("logsumexp_prod", "reduce", lambda x: (x.logsumexp(-1), x.prod(1)), r(3, 4))

# ---- norms / nn
case("layer_norm", "norm", nn.LayerNorm(8), r(2, 3, 8))
case("layer_norm_2d", "norm", nn.LayerNorm([4, 5], eps=1e-3), r(2, 3, 4, 5))
case("layer_norm_noaffine", "norm", lambda x: F.layer_norm(x, (6,)), r(4, 6))
case("group_norm", "norm", nn.GroupNorm(2, 6), r(2, 6, 4, 3))
case("group_norm_1", "norm", nn.GroupNorm(1, 4, affine=False), r(3, 4, 5))
case("embedding", "indexing", nn.Embedding(10, 4), ri(0, 10, 2, 5))
case("embedding_pad", "indexing", nn.Embedding(10, 4, padding_idx=0), ri(0, 10, 7))

# ---- indexing
case("gather_index_select", "indexing",
     lambda x, idx, sel: (torch.gather(x, 1, idx), torch.gather(x, -1, idx[:, :, :3]),
                          x.index_select(2, sel), torch.index_select(x, 0, sel[:2] % 2)),
     r(2, 4, 5), ri(0, 4, 2, 3, 5), ri(0, 5, 4))
# 0-d indices: index_select picks one slice (keeping the dim), gather one element of a 1-d input.
case("gather_index_select_0d", "indexing",
     lambda x, i: (torch.index_select(x, 1, i), x.index_select(0, i), torch.gather(x[0], 0, i),
                   x[1].gather(-1, i)),
     r(3, 4), torch.tensor(2))
case("index", "indexing",
     lambda x, i, j: (x[i], x[:, i], x[..., j], x[i, j[:2]], x[:, i, j[:2]], x[i, :, j[:2]],
                      x[i.view(2, 1), j[:2].view(1, 2)], x[1, i], x[-1]),
     r(3, 4, 5), torch.tensor([0, 2]), torch.tensor([3, 0, -1]))

# ---- upsampling / pooling / sampling
img = r(1, 2, 5, 6)
case("upsample_nearest", "resample",
     lambda x: (F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=(7, 9), mode="nearest"),
                F.interpolate(x, size=(3, 4), mode="nearest")), img)
case("upsample_bilinear", "resample",
     lambda x: (F.interpolate(x, scale_factor=2, mode="bilinear"),
                F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True),
                F.interpolate(x, size=(3, 4), mode="bilinear")), img)
case("upsample_bicubic", "resample",
     lambda x: (F.interpolate(x, scale_factor=2, mode="bicubic"),
                F.interpolate(x, size=(7, 9), mode="bicubic", align_corners=True)), img)
case("upsample_aa", "resample",
     lambda x: (F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True),
                F.interpolate(x, size=(8, 9), mode="bilinear", antialias=True),
                F.interpolate(x, size=(2, 3), mode="bilinear", antialias=True, align_corners=True)), img)
case("upsample_exact_bicubic_aa", "resample",
     lambda x: (F.interpolate(x, size=(7, 9), mode="nearest-exact"), F.interpolate(x, scale_factor=0.5, mode="nearest-exact"),
                F.interpolate(x, size=(3, 2), mode="bicubic", antialias=True),
                F.interpolate(x, size=(8, 9), mode="bicubic", antialias=True)), img)
case("grid_sample", "resample",
     lambda x, g: (F.grid_sample(x, g, align_corners=False), F.grid_sample(x, g, align_corners=True),
                   F.grid_sample(x, g, mode="nearest", align_corners=False),
                   F.grid_sample(x, g, padding_mode="border", align_corners=False)),
     img, torch.rand(1, 3, 4, 2) * 2.4 - 1.2)
case("max_pool", "pool",
     lambda x: (F.max_pool2d(x, 2), F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, ceil_mode=True),
                F.max_pool2d(x, (2, 3), (1, 2), (1, 1), ceil_mode=True)), r(1, 2, 7, 6))
case("avg_pool", "pool",
     lambda x: (F.avg_pool2d(x, 2), F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                F.avg_pool2d(x, 2, ceil_mode=True), F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)), r(1, 2, 7, 6))
case("adaptive_avg_pool", "pool",
     lambda x: (F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (3, 2)), F.adaptive_avg_pool2d(x, (4, 4))),
     r(1, 2, 7, 6))


# ---- argument corners likely to be dropped by a lowering
case("round_decimals", "unary", lambda x: (torch.round(x, decimals=2), torch.round(x * 100, decimals=-1)), r(4, 5) * 3)
case("logical_float", "binary", lambda x, i: (torch.logical_not(x), torch.logical_and(x, i), torch.logical_or(i, x)),
     torch.tensor([0.0, 1.5, -2.0, 0.0]), torch.tensor([0, 0, 3, 1]))
case("int_arith", "promotion",
     lambda i, j: (i // 2, torch.div(i, 3, rounding_mode="floor"), torch.div(i, 3, rounding_mode="trunc"), i % 3,
                   torch.fmod(i, 3), i ** 2, 2 ** j.abs(), i.clamp(-2, 3), i.clamp(min=0.5), i / 2, i * True,
                   torch.where(i > 0, i, 0.5), torch.cat([i.float(), j.double()]), torch.cat([i, j.int()])),
     ri(-9, 9, 8), ri(-3, 3, 8))
case("cumsum_mean_dtype", "reduce",
     lambda x, m: (x.cumsum(0, dtype=torch.float64), m.cumsum(-1), x.mean(1, dtype=torch.float64), m.sum(0, keepdim=True),
                   x.std(1, unbiased=False), x.var(0, correction=0) if hasattr(torch, "correction") else x.var(0)),
     r(4, 5), torch.rand(4, 5) > 0.5)
case("pool_args", "pool",
     lambda x: (F.avg_pool2d(x, 2, divisor_override=3), F.max_pool2d(x, 3, 1, 1, dilation=2),
                F.avg_pool2d(x, (3, 2), (2, 1), (1, 0)), F.max_pool2d(x, 2, 3)), r(1, 2, 7, 6))
case("interp_scale", "resample",
     lambda x: (F.interpolate(x, scale_factor=1.7, mode="nearest"), F.interpolate(x, scale_factor=1.7, mode="bilinear"),
                F.interpolate(x, scale_factor=0.6, mode="bilinear"), F.interpolate(x, scale_factor=(1.5, 0.7), mode="bicubic"),
                F.interpolate(x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
                F.interpolate(x, scale_factor=0.5, mode="nearest")), img)
case("layer_norm_nobias", "norm", lambda x, w: F.layer_norm(x, (6,), w, None, 1e-6), r(4, 6), r(6))
case("repeat_interleave", "indexing",
     lambda x: (x.repeat_interleave(2, dim=1), torch.repeat_interleave(x, 3, dim=-1),
                x.repeat_interleave(torch.tensor([1, 3, 0]), dim=1), x.index_select(1, torch.tensor(2))),
     r(2, 3, 4))
case("as_strided_unfold", "shape",
     lambda x: (x.as_strided((3, 3), (1, 2)), x.as_strided((2, 2), (4, 1), 1), torch.as_strided(x + 1, (2, 3), (0, 1)),
                x.unfold(1, 2, 1), x.unfold(0, 2, 1), x.unfold(-1, 3, 2)), r(3, 4))
case("upsample_nearest1d", "resample",
     lambda x: (F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=7, mode="nearest"),
                F.interpolate(x, scale_factor=0.6, mode="nearest")), r(1, 2, 5))
case("avg_pool_ceil_divisor", "pool",
     lambda x: (F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=4),
                F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3),
                F.avg_pool2d(x, (3, 2), (2, 2), (1, 0), ceil_mode=True, count_include_pad=False, divisor_override=5)),
     r(1, 2, 7, 6))
# ---- composed math (ops_math.cc): edge values where a naive formula loses digits or NaN / inf
# handling differs (|x| near 1, tiny and huge x, signed zeros, NaN operands)
edge = torch.tensor([-1.0, -0.999999, -0.7, -1e-3, -1e-8, -0.0, 0.0, 1e-8, 1e-3, 0.5, 0.999999, 1.0,
                     1.5, -2.0, float("nan")])
wide = torch.tensor([-1e30, -90.0, -20.0, -3.0, -1.0, -1e-4, -1e-9, 0.0, 1e-9, 1e-4, 0.9, 1.0, 1.0001,
                     2.5, 20.0, 80.0, 1e30, float("inf"), float("-inf"), float("nan")])
case("math_inverse_trig", "unary",
     lambda x: (torch.asin(x), torch.acos(x), torch.atanh(x), torch.acosh(x + 2), torch.acosh(1 + x.abs())), edge)
case("math_hyperbolic", "unary",
     lambda x: (torch.asinh(x), torch.sinh(x.clamp(-80, 80)), torch.cosh(x.clamp(-80, 80)), torch.expm1(x),
                torch.log1p(x.abs())), wide)
case("math_log_exp", "unary",
     lambda x, p: (torch.log2(p), torch.log10(p), torch.exp2(x.clamp(-100, 100)), torch.special.erfc(x),
                   torch.logit(p / 40), torch.logit(p / 20, eps=1e-3), torch.special.entr(x)),
     wide, torch.tensor([1e-30, 1e-5, 0.5, 1.0, 1.5, 7.0, 19.0, 1e30]))
case("math_round_classify", "unary",
     lambda x: (torch.trunc(x), torch.frac(x.clamp(-1e6, 1e6)), torch.sinc(x.clamp(-50, 50)), torch.sgn(x),
                torch.signbit(x), torch.isinf(x), torch.isposinf(x), torch.isneginf(x), torch.deg2rad(x.clamp(-1e6, 1e6)),
                torch.rad2deg(x.clamp(-1e6, 1e6)), torch.nan_to_num(x), torch.nan_to_num(x, 1.0, 2.0, -3.0)),
     torch.cat([wide, torch.tensor([-2.5, -0.5, 0.25, 3.75])]))
# ---- special functions (special_unary / special_binary): PyTorch computes them in float with
# Cephes' float tables, rlx in double, so the family's tolerance is the OpInfo sweep's
S = torch.special
case("special_gamma", "special",
     lambda x, p: (torch.lgamma(x), torch.digamma(x), torch.polygamma(1, p), torch.polygamma(3, p),
                   torch.mvlgamma(p + 2, 3), S.zeta(p + 1, p), torch.igamma(p, 2 * p), torch.igammac(p, p / 2)),
     torch.tensor([-3.5, -0.5, 0.25, 1.0, 2.5, 7.0, 19.0, 30.0]), pos(8) * 4)
case("special_bessel", "special",
     lambda x, p: (torch.i0(x), S.i0e(x), S.i1(x), S.i1e(x), S.bessel_j0(x), S.bessel_j1(x), S.bessel_y0(p),
                   S.bessel_y1(p), S.modified_bessel_k0(p), S.modified_bessel_k1(p),
                   S.scaled_modified_bessel_k0(p), S.scaled_modified_bessel_k1(p), S.spherical_bessel_j0(x),
                   S.airy_ai(x)),
     r(24) * 5, pos(24) * 10)
case("special_erf", "special",
     lambda x, u: (torch.erfinv(u * 1.98 - 0.99), S.ndtri(u), S.log_ndtr(x), S.erfcx(x)),
     r(16) * 4, torch.rand(16) * 0.98 + 0.01)
case("special_polynomials", "special",
     lambda x, n: (S.chebyshev_polynomial_t(x, n), S.chebyshev_polynomial_u(x, n), S.chebyshev_polynomial_v(x, n),
                   S.chebyshev_polynomial_w(x, n), S.shifted_chebyshev_polynomial_t(x, n),
                   S.hermite_polynomial_h(x, n), S.hermite_polynomial_he(x, n), S.laguerre_polynomial_l(x, n),
                   S.legendre_polynomial_p(x, n)),
     torch.tensor([[-1.0], [-0.3], [0.0], [0.7], [1.0]]), torch.tensor([-1.0, 0.0, 1.0, 2.0, 5.0, 9.0]))
# ---- factorizations and solves (the linalg op: LAPACK's routines, the ones PyTorch's CPU build
# calls, so the signs of U, Q and eigenvectors agree); well-conditioned inputs
LA = torch.linalg
spd = r(2, 4, 4)
spd = spd @ spd.mT + 4 * torch.eye(4)
chol = LA.cholesky(spd)
case("linalg_factor", "linalg",
     lambda a, m: (LA.cholesky(a), LA.cholesky(a, upper=True), *LA.lu(m), *LA.lu(m.mT), LA.det(a),
                   *LA.slogdet(a), LA.inv(a), *LA.qr(m), *LA.qr(m, mode="complete"), LA.qr(m, mode="r")[1],
                   *LA.eigh(a), LA.eigvalsh(a, UPLO="U"), *LA.svd(m, full_matrices=False),
                   LA.svdvals(m), LA.pinv(m), LA.pinv(a, hermitian=True), *torch.geqrf(m),
                   LA.householder_product(*torch.geqrf(m))),
     spd, r(2, 4, 3))
case("linalg_solve", "linalg",
     lambda a, b, f, v: (LA.solve(a, b), LA.solve(a, v), LA.solve(a, b.mT, left=False),
                         LA.solve_triangular(f, b, upper=False), LA.solve_triangular(f.mT, b.mT, upper=True, left=False),
                         torch.triangular_solve(b, f.mT)[0], torch.triangular_solve(b, f, upper=False, transpose=True)[0],
                         torch.cholesky_solve(b, f), torch.cholesky_solve(b, f.mT, upper=True),
                         torch.cholesky_inverse(f), torch.ormqr(*torch.geqrf(a), b),
                         torch.ormqr(*torch.geqrf(a), b.mT, left=False, transpose=True)),
     spd, r(2, 4, 3), chol, r(2, 4))
# ---- reductions over runs an input delimits, and class-indexed losses (masks built at run time)
seg_data = torch.cat([r(5, 3), torch.tensor([[float("nan"), 1.0, 2.0]])])
case("segment_reduce", "segment",
     lambda d, ln, off: tuple(torch.segment_reduce(d, red, lengths=ln) for red in ("sum", "mean", "max", "min", "prod"))
     + (torch.segment_reduce(d, "max", lengths=ln, initial=0.5), torch.segment_reduce(d, "mean", lengths=ln, initial=2.0),
        torch.segment_reduce(d, "sum", offsets=off), torch.segment_reduce(d.T.contiguous(), "min", lengths=ln.expand(3, 4), axis=1)),
     seg_data, torch.tensor([2, 0, 3, 1]), torch.tensor([0, 1, 1, 4, 6]))
emb = r(10, 4)
case("embedding_bag", "segment",
     lambda w, i, off, psw: (F.embedding_bag(i, w, off), F.embedding_bag(i, w, off, mode="mean"),
                             F.embedding_bag(i, w, off, mode="max"), F.embedding_bag(i, w, off, per_sample_weights=psw, mode="sum"),
                             F.embedding_bag(i, w, off, padding_idx=2, mode="mean"),
                             F.embedding_bag(i.reshape(2, 4), w), F.embedding_bag(i, w, torch.cat([off, torch.tensor([8])]), include_last_offset=True)),
     emb, torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 3, 6]), pos(8))
case("class_losses", "segment",
     lambda x4, t3, w, x2, t1, ml: (F.cross_entropy(x4, t3), F.cross_entropy(x4, t3, weight=w, ignore_index=1, reduction="sum"),
                                    F.nll_loss(x4.log_softmax(1), t3, reduction="none"),
                                    F.multi_margin_loss(x2, t1), F.multi_margin_loss(x2, t1, p=2, margin=0.5, weight=w, reduction="none"),
                                    F.multilabel_margin_loss(x2, ml), F.multilabel_margin_loss(x2, ml, reduction="none")),
     r(2, 3, 4, 5), ri(0, 3, 2, 4, 5), pos(3), r(4, 3), ri(0, 3, 4), torch.tensor([[2, 0, -1], [1, -1, 2], [0, 1, 2], [-1, 0, 0]]))
# ---- statistics whose PyTorch code reads values (rlx_torch traces them as one aten node each)
qx = r(3, 7)
qn = qx.clone()
qn[0, 2] = float("nan")
case("quantile_cov", "stats",
     lambda x, xn, q, fw, aw: (torch.quantile(x, 0.3), torch.quantile(x, q, dim=1, keepdim=True),
                               torch.quantile(x, 0.5, dim=0, interpolation="lower"),
                               torch.quantile(x, q, dim=1, interpolation="nearest"),
                               torch.quantile(x, 0.75, dim=-1, interpolation="midpoint"),
                               torch.quantile(xn, 0.4, dim=1), torch.nanquantile(xn, q, dim=1),
                               torch.nanquantile(xn, 0.9, interpolation="higher"),
                               torch.cov(x), torch.cov(x, correction=0), torch.cov(x, fweights=fw, aweights=aw),
                               torch.cov(x[0]), torch.corrcoef(x), torch.corrcoef(x[:1])),
     qx, qn, torch.tensor([0.0, 0.25, 0.6, 1.0]), ri(1, 4, 7), pos(7))
case("mode_gaussian_nll", "stats",
     lambda m, x, y, v: (*torch.mode(m, 1), *torch.mode(m, 0, keepdim=True), F.gaussian_nll_loss(x, y, v),
                         F.gaussian_nll_loss(x, y, v[:, :1], full=True, reduction="sum"),
                         F.gaussian_nll_loss(x, y, v.sum(1), eps=0.5, reduction="none")),
     torch.tensor([[3., 1., 3., 1., 2.], [5., 5., 4., 4., 4.], [2., 7., 7., 2., 9.]]), r(3, 5), r(3, 5), pos(3, 5))
case("narrow_tensor_start", "shape",
     lambda x, s, n: (torch.narrow(x, 1, s, 2), x.narrow(2, n, 3)),
     r(2, 5, 4), torch.tensor(2), torch.tensor(-3))
case("histogram", "stats",
     lambda x, e, w: (*torch.histogram(x, 5), *torch.histogram(x, 4, range=(-1.0, 0.5), weight=w, density=True),
                      torch.histogram(x, e)[0], torch.histogram(x, e.flip(0), weight=w)[0],
                      torch.histogram(torch.full((3,), 2.0), 2)[1]),
     r(4, 6), torch.tensor([-2.0, -0.5, 0.0, 0.3, 2.0]), pos(4, 6))
case("histogramdd", "stats",
     lambda p, e0, e1, w: (*torch.histogramdd(p, [3, 4]), torch.histogramdd(p, 2, range=[-1.0, 1.0, 0.0, 2.0], weight=w, density=True)[0],
                           torch.histogramdd(p, [e0, e1])[0]),
     r(5, 4, 2), torch.tensor([-2.0, 0.0, 2.0]), torch.tensor([-1.0, -0.2, 0.1, 1.5]), pos(5, 4))
quad = torch.tensor([1.0, -1.0, 0.0, -0.0, 0.0, -0.0, 2.0, -3.0, 1e-30, float("nan"), float("inf"), 5.0])
case("math_binary", "binary",
     lambda y, x: (torch.atan2(y, x), torch.copysign(y, x), torch.copysign(y, -1.0), torch.fmax(y, x), torch.fmin(y, x),
                   torch.heaviside(y, x), torch.hypot(y.clamp(-1e3, 1e3), x.clamp(-1e3, 1e3)),
                   torch.logical_xor(y, x), torch.special.xlog1py(y, x), torch.special.xlog1py(y, 0.5),
                   torch.logaddexp2(y, x)),
     quad, torch.tensor([0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -0.0, 4.0, 2.0, 1.0, 3.0, float("nan")]))
case("math_lerp_addc", "binary",
     lambda a, b, w, c: (torch.lerp(a, b, 0.3), torch.lerp(a, b, 0.9), torch.lerp(a, b, w), torch.addcdiv(a, b, c),
                         torch.addcdiv(a, b, c, value=-0.5), torch.addcmul(a, b, c, value=2)),
     r(3, 4), r(3, 4), torch.rand(3, 4) * 1.4 - 0.2, r(4).abs() + 0.5)

# ---- reductions, linear algebra, nn and indexing compositions (ops_reduce / ops_linalg /
# ops_nn_pointwise / ops_indexing)
case("all_any_count", "reduce",
     lambda x, m: (x.all(), x.any(1), m.all(0), m.any(), torch.count_nonzero(x), torch.count_nonzero(x, 1),
                   torch.count_nonzero(m, (0, 1)), x[:, :0].all(1), x[:, :0].any(1), *torch.aminmax(x),
                   *torch.aminmax(x, dim=1, keepdim=True)),
     torch.tensor([[0.0, 1.0, float("nan")], [2.0, -1.0, 3.0]]), torch.rand(3, 4) > 0.3)
case("histc", "reduce",
     lambda x, e: (torch.histc(x), torch.histc(x, 7, -1.0, 2.0), torch.histc(e, 4, 0, 10), torch.histc(e, 3),
                   torch.histc(e[:1], 5)),
     r(40), torch.tensor([0.0, 10.0, 2.5, 5.0, 7.5, 9.99, -1.0, 11.0, 3.0]))
case("dist_vdot", "reduce",
     lambda a, b: (torch.dist(a, b), torch.dist(a, b, 1), torch.dist(a, b, float("inf")), torch.dist(a, b, 0.5),
                   torch.vdot(a.flatten(), b.flatten()), torch.linalg.vecdot(a, b)),
     r(3, 4), r(3, 4))
case("linalg_compose", "matmul",
     lambda s, b1, b2, v, m, a3, c3: (torch.addbmm(s, b1, b2), torch.addbmm(s, b1, b2, beta=0.5, alpha=2),
                                      torch.addmv(v[:3], m, v), torch.addmv(v[:3], m, v, beta=0, alpha=-1),
                                      torch.addr(s[:3, :3], v[:3], v[1:], alpha=0.5), torch.linalg.cross(a3, c3),
                                      torch.cross(a3.transpose(0, 1), c3.transpose(0, 1), dim=0)),
     r(3, 5), r(2, 3, 4), r(2, 4, 5), r(4), r(3, 4), r(4, 3), r(4, 3))
case("distances", "matmul",
     lambda a, b: (torch.cdist(a, b), torch.cdist(a, b, p=1), torch.cdist(a, b, p=float("inf")), torch.cdist(a, b, p=0.7),
                   F.pdist(a[0]), F.pdist(a[1], p=3)),
     r(2, 5, 3), r(2, 4, 3))
case("bilinear", "matmul", nn.Bilinear(3, 4, 5), r(6, 3), r(6, 4))
case("diag_embed_scatter", "shape",
     lambda x, m, v: (torch.diag_embed(x), torch.diag_embed(x, 1), torch.diag_embed(x, -2, 0, 2),
                      torch.diag_embed(x, 1, 2, 0), torch.diagonal_scatter(m, v),
                      torch.diagonal_scatter(m, v[:3], 2), torch.diagonal_scatter(m, v[:4], -1),
                      torch.diagonal_scatter(m[:3], v[:2], 3), torch.diagonal_scatter(m[:3], v[:2], -1),
                      torch.block_diag(v[:2], m[:2, :3], torch.tensor(7.0))),
     r(2, 3), r(5, 5)[:, :5], r(5))
case("renorm", "norm", lambda x: (torch.renorm(x, 2, 0, 1.0), torch.renorm(x, 1, 1, 0.5), torch.renorm(x, 3, -1, 2.0)),
     r(3, 4, 2) * 2)
case("nn_pointwise", "binary",
     lambda x, y: (F.glu(x), F.glu(x, 0), F.hardshrink(x), F.hardshrink(x, 1.2), F.softshrink(x), F.softshrink(x, 1.0),
                   F.threshold(x, 0.3, -2.0), F.huber_loss(x, y), F.huber_loss(x, y, reduction="none", delta=0.5),
                   F.smooth_l1_loss(x, y, reduction="sum"), F.smooth_l1_loss(x, y, beta=0.0),
                   F.smooth_l1_loss(x, y, reduction="none", beta=2.0)),
     r(4, 6) * 2, r(4, 6) * 2)
case("index_scatter_ops", "indexing",
     lambda x, s, i, j: (x.index_add(1, i, s), x.index_add(1, i, s, alpha=2.0), x.index_copy(1, j, s),
                         x.index_fill(0, i[:2] % 3, -1.0), x.scatter_add(1, i.view(1, 3).expand(2, 3), s[:2]),
                         x.index_reduce(1, i, s, "amax"), x.index_reduce(1, i, s, "mean", include_self=False)),
     r(3, 5), r(3, 3), torch.tensor([0, 4, 0]), torch.tensor([2, 0, 3]))
case("linspace_logspace", "range",
     lambda x: (torch.linspace(-1, 2, 7) + x[:7], torch.linspace(3, 3, 1), torch.linspace(0, 1, 10) * x,
                torch.logspace(-2, 2, 10), torch.logspace(0, 3, 4, base=2)), r(10))


# ---- order statistics and running reductions (ops_order.cc), NaN included
nanrows = torch.tensor([[3.0, float("nan"), 1.0, 2.0, float("nan")], [5.0, -1.0, 4.0, 0.5, 2.0],
                        [float("nan")] * 5, [1.0, 7.0, -3.0, float("inf"), -2.0]])
case("median_kth", "reduce",
     lambda x, y: (*x.median(1), *x.nanmedian(1), *y.median(0, keepdim=True), y.median(), y.nanmedian(), x[1].median(),
                   *y.kthvalue(2, 1), *x[[0, 1, 3]].kthvalue(4, 1, keepdim=True), *torch.cummax(x, 1), *torch.cummin(y, 0),
                   torch.logcumsumexp(x, 1), torch.logcumsumexp(y * 30, 0)),
     nanrows, r(5, 6))
# ---- attention, pooling and resampling compositions (ops_nn.cc, ops_pool.cc)
case("sdpa", "matmul",
     lambda q, k, v, m: (*F._scaled_dot_product_attention(q, k, v, need_attn_weights=True),
                         F._scaled_dot_product_attention(q, k, v, is_causal=True)[0],
                         F._scaled_dot_product_attention(q, k, v, attn_mask=m)[0],
                         F._scaled_dot_product_attention(q, k, v, attn_mask=m > 0)[0]),
     r(2, 4, 6), r(2, 3, 6), r(2, 3, 5), r(4, 3))
case("adaptive_max_pool", "pool",
     lambda x, v: (*F.adaptive_max_pool2d(x, (3, 2), return_indices=True), F.adaptive_max_pool2d(x, 4),
                   *F.adaptive_max_pool1d(x[0], 3, return_indices=True),
                   *F.adaptive_max_pool3d(v, (2, 3, 2), return_indices=True), F.adaptive_avg_pool3d(v, (3, 2, 4))),
     r(1, 2, 7, 6), r(1, 2, 4, 5, 6))
case("pool3d", "pool",
     lambda v: (*F.max_pool3d(v, 3, 2, 1, return_indices=True), F.max_pool3d(v, 2, ceil_mode=True),
                *F.max_pool3d(v, (2, 3, 2), 1, 0, dilation=(1, 2, 1), return_indices=True), F.avg_pool3d(v, 2),
                F.avg_pool3d(v, 3, 2, 1), F.avg_pool3d(v, 3, 2, 1, count_include_pad=False),
                F.avg_pool3d(v, 3, 2, 1, ceil_mode=True), F.avg_pool3d(v, 2, divisor_override=3)),
     r(1, 2, 5, 7, 6))
# More output cells per plane than the window-by-window composition allows: separable pools only.
case("pool3d_large", "pool",
     lambda v: (F.max_pool3d(v, 2, 1), F.max_pool3d(v, 3, 2, 1, dilation=(2, 1, 1), ceil_mode=True),
                F.avg_pool3d(v, 3, 1, 1, count_include_pad=False), F.avg_pool3d(v, (2, 3, 2), 1, (1, 1, 0))),
     r(2, 20, 18, 20))
case("upsample3d", "resample",
     lambda v: (F.interpolate(v, scale_factor=2, mode="nearest"), F.interpolate(v, size=(3, 7, 4), mode="nearest"),
                F.interpolate(v, scale_factor=2, mode="trilinear"), F.interpolate(v, size=(6, 4, 9), mode="trilinear"),
                F.interpolate(v, size=(6, 4, 9), mode="trilinear", align_corners=True),
                F.interpolate(v, scale_factor=(1.5, 0.7, 2.2), mode="trilinear")),
     r(1, 2, 4, 5, 6))


def _pool_ties_nan():
    x = torch.randn(2, 2, 7, 6)
    x[0, 0, 1:4, 1:4] = 0.5   # ties: the first maximum's index
    x[0, 1, :3, :3] = float("-inf")  # all -inf: the first tap inside the input
    x[1, 0, 2, 2] = x[1, 0, 3, 4] = float("nan")  # the last NaN's index
    return x


case("max_pool_indices", "pool",
     lambda x: (*F.max_pool2d(x, 3, 2, 1, return_indices=True), *F.max_pool2d(x, 2, ceil_mode=True, return_indices=True),
                F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=(2, 1), return_indices=True)[1],
                F.max_pool2d(x[0], 3, 1, 1, return_indices=True)[1]), _pool_ties_nan())


class _MaxNorms(nn.Module):  # nn.Embedding's max_norm under each norm_type
    def __init__(self):
        super().__init__()
        self.e = nn.ModuleList(nn.Embedding(10, 4, max_norm=m, norm_type=p)
                               for m, p in ((1.0, 2.0), (1.5, 1.0), (0.8, 3.0), (0.9, float("inf"))))

    def forward(self, i):
        return tuple(e(i) for e in self.e)


case("embedding_max_norm", "norm", _MaxNorms(), ri(0, 10, 2, 5))
case("masked_fill_tensor", "binary", lambda x, m, v: (x.masked_fill(m, v), torch.where(m, v, x)), r(3, 4),
     torch.rand(3, 4) > 0.5, torch.tensor(-3.0))



def _assign(x, v):
    y = x.clone()
    y[:, 0] = 1.5
    y[1:3] = v[:2]
    y[..., -1] *= 2
    return y


case("inplace_assign", "shape", _assign, r(4, 3, 5), r(4, 3, 5))


def _index_put(x, i, j, v):
    y = x.clone()
    y[y < 0] = 0.0
    y[i] = v[0, 0]
    y[i, j] = -1.0
    pass
    z = x.clone().index_put((i,), v[:2, :1], accumulate=True)
    w = x.clone()
    w[-1, -2] = 3.0
    return y, z, w


case("index_put", "indexing", _index_put, r(4, 3, 5), torch.tensor([0, -1]), torch.tensor([2, 1]), r(4, 3, 5))


def main(out):
    os.makedirs(out, exist_ok=True)
    only = set(sys.argv[2:])
    manifest = []
    for name, family, mod, inputs in CASES:
        if only and name not in only:
            continue
        seen = []
        for level in ("aten", "core", "high"):
            d = os.path.join(out, f"{name}@{level}")
            try:
                rlx_torch.export(mod, inputs, d, decomposition=level, name=name)
                with open(os.path.join(d, "torch-ir.json")) as f:
                    ops = [n["op"] for n in json.load(f)["nodes"]]
            except Exception:  # noqa: BLE001
                manifest.append({"name": f"{name}@{level}", "family": family,
                                 "error": traceback.format_exc()[-2000:]})
                continue
            if sorted(ops) in seen:
                shutil.rmtree(d)
                continue
            seen.append(sorted(ops))
            manifest.append({"name": f"{name}@{level}", "family": family, "level": level, "dir": d,
                             "ops": sorted(set(ops))})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
