"""Training-mode dropout as a seeded, counter-based op: torch.ops.rlx.dropout.

rlx's `dropout(x, step) {p, seed}` keeps element i when
    (mix64(key + i) >> 40) >= floor(p * 2**24),   key = mix64(mix64(seed) ^ step)
(mix64: splitmix64's finalizer, uint64 arithmetic) and scales kept elements by
1 / (1 - p). The mask depends only on (seed, step, flat index), so a training
graph stays a pure function of its inputs and the backward pass draws the same
mask again. This module registers the op with PyTorch (so make_fx records it as
one node), implements it bit for bit like the CPU kernel (so the exporter's
eager reference equals rlx), and patches F.dropout while a train export traces.
"""
import contextlib

import numpy as np
import torch
import torch.nn.functional as F

_U = np.uint64


def _mix64(z):
    z = z + _U(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
    return z ^ (z >> _U(31))


def keep_mask(n, p, seed, step):
    """The bool keep mask of n elements, as rlx's CPU kernel draws it."""
    with np.errstate(over="ignore"):
        s = np.array([seed], dtype=np.int64).view(np.uint64)
        t = np.array([int(step)], dtype=np.int64).view(np.uint64)
        key = _mix64(_mix64(s) ^ t)
        r = _mix64(key + np.arange(n, dtype=np.uint64))
    return (r >> _U(40)) >= _U(int(p * 16777216.0))


def _impl(x, step, p, seed):
    keep = torch.from_numpy(keep_mask(x.numel(), p, seed, step.item())).reshape(x.shape)
    scale = torch.tensor(1.0 / (1.0 - p), dtype=x.dtype)
    return torch.where(keep, x * scale, torch.zeros((), dtype=x.dtype))


def _register():
    try:
        lib = torch.library.Library("rlx", "DEF")
    except RuntimeError:  # a second copy of this module (another import path) did it
        return None
    lib.define("dropout(Tensor x, Tensor step, float p, int seed) -> Tensor")
    lib.impl("dropout", _impl, "CPU")
    return lib


_LIB = _register()  # kept alive: the registration lasts as long as this object


class _Dropout(torch.autograd.Function):
    """The op with its vjp (the same op on the gradient), for torch.autograd references."""

    @staticmethod
    def forward(ctx, x, step, p, seed):
        ctx.save_for_backward(step)
        ctx.p, ctx.seed = p, seed
        return torch.ops.rlx.dropout(x, step, p, seed)

    @staticmethod
    def backward(ctx, dy):
        (step,) = ctx.saved_tensors
        return torch.ops.rlx.dropout(dy, step, ctx.p, ctx.seed), None, None, None


def dropout(x, step, p, seed):
    """rlx's seeded dropout (differentiable): x * keep / (1 - p)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _Dropout.apply(x, step, float(p), int(seed))
    # Tracing (no_grad): functionalize rejects autograd.Function, and needs no vjp.
    return torch.ops.rlx.dropout(x, step, float(p), int(seed))


@contextlib.contextmanager
def seeded(step, base_seed=0):
    """Within the block, training-mode F.dropout (nn.Dropout) calls rlx's seeded
    dropout fed by `step`; the k-th call gets seed base_seed + k, so every
    dropout node has its own stream. Yields the list of seeds used."""
    orig = F.dropout
    seeds = []

    def patched(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        if not 0 < p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        seeds.append(base_seed + len(seeds))
        return dropout(input, step, p, seeds[-1])

    F.dropout = patched
    try:
        yield seeds
    finally:
        F.dropout = orig
