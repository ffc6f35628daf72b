"""aten ops whose composite implementation reads tensor values in Python.

torch.quantile / nanquantile check q's range with .item(), torch.cov /
corrcoef check their weights the same way, and torch.narrow reads a tensor start: under make_fx's tracing tensors
that is an error ("trying to get value out of a tracing tensor"), so such
models would not export. While tracing, these functions are routed (through a
TorchFunctionMode) to custom ops rlx_leaf::<op> with the aten schema, whose
CPU kernel is the real aten op; each call becomes one node, written to the
JSON under its aten name, which rlx lowers. F.gaussian_nll_loss, which has no aten op, is traced without
its value check instead.
"""
import contextlib

import torch
from torch.overrides import TorchFunctionMode

from . import _stand_in

_SCHEMA = {
    "quantile": "quantile(Tensor self, Tensor q, int? dim=None, bool keepdim=False, *, "
                "str interpolation='linear') -> Tensor",
    "quantile.scalar": "quantile.scalar(Tensor self, float q, int? dim=None, bool keepdim=False, "
                       "*, str interpolation='linear') -> Tensor",
    "cov": "cov(Tensor self, *, int correction=1, Tensor? fweights=None, "
           "Tensor? aweights=None) -> Tensor",
    "corrcoef": "corrcoef(Tensor self) -> Tensor",
    # a tensor start (the aten op returns a view: the stand-in returns a copy)
    "narrow.Tensor": "narrow.Tensor(Tensor self, int dim, Tensor start, int length) -> Tensor",
}
for _k in ("quantile", "quantile.scalar"):
    _SCHEMA["nan" + _k] = "nan" + _SCHEMA[_k]

# custom op -> the aten overload it stands for (the name written to torch-ir.json)
ATEN_NAME = {f"rlx_leaf.{k}" + ("" if "." in k else ".default"): f"aten.{k}"
             + ("" if "." in k else ".default") for k in _SCHEMA}


def _library():
    def real(key):
        name, _, overload = key.partition(".")
        op = getattr(getattr(torch.ops.aten, name), overload or "default")
        return (lambda *a, **k: op(*a, **k).clone()) if name == "narrow" else op
    _stand_in.define("rlx_leaf", _SCHEMA, real)


def _route(name, args, kwargs):
    """The custom op for a call of torch.<name> / Tensor.<name>, or None for the plain call."""
    ops = torch.ops.rlx_leaf
    if name == "narrow":
        start = args[2] if len(args) > 2 else kwargs.get("start")
        return ops.narrow.Tensor if isinstance(start, torch.Tensor) else None
    if name in ("quantile", "nanquantile"):
        q = args[1] if len(args) > 1 else kwargs.get("q")
        return getattr(getattr(ops, name), "default" if isinstance(q, torch.Tensor) else "scalar")
    return getattr(ops, name).default


def _gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """F.gaussian_nll_loss without its check that no variance is negative (the check reads
    values; eager raises where this clamps to eps): the same ops otherwise."""
    import math
    if var.size() != input.size():
        if input.size()[:-1] == var.size():
            var = torch.unsqueeze(var, -1)
        elif not (input.size()[:-1] == var.size()[:-1] and var.size(-1) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clamp(min=eps)
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


class _Leaves(TorchFunctionMode):
    FUNCS = {f: f.__name__ for f in (torch.quantile, torch.nanquantile, torch.cov,
                                     torch.corrcoef, torch.narrow, torch.Tensor.quantile,
                                     torch.Tensor.nanquantile, torch.Tensor.cov,
                                     torch.Tensor.corrcoef, torch.Tensor.narrow)}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.gaussian_nll_loss:
            return _gaussian_nll_loss(*args, **kwargs)
        name = self.FUNCS.get(func)
        op = None if name is None or kwargs.get("out") is not None else _route(name, args, kwargs)
        return func(*args, **kwargs) if op is None else op(*args, **kwargs)


@contextlib.contextmanager
def leaf_ops():
    """While active, torch.quantile & co. trace to one rlx_leaf::<op> node each."""
    _library()
    with _Leaves():
        yield
