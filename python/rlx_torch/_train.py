"""train=True export: the loss is an output, BatchNorm and dropout keep their training form.

The exported graph takes the model's inputs, then `target` (the loss's second
argument) and `rlx::step` (an i64 scalar, the training step, which seeds every
dropout), and returns `loss`, `logits` (the model's output) and one
`update::<buffer>` per buffer the forward mutates (BatchNorm running_mean,
running_var, num_batches_tracked), holding its new value: the trainer copies
those back after each step.
"""
import copy

import torch

from . import _dropout, _trace

TARGET = "target"
STEP = "rlx::step"
_STEP_KW = "__rlx_step"  # the step's kwarg while tracing; renamed to STEP in the json
# Train-mode batch norm mutates running stats inside one aten op, which 1.13's
# functionalize cannot see; its torch._decomp decomposition spells them out
# (mean/var over N,H,W, the momentum update with the unbiased n/(n-1) factor,
# copy_ back), so rlx imports it with existing ops that autodiff already
# differentiates, and the updates become graph outputs. A dedicated op would
# only save a few passes over the activations.
_BN_OPS = ("native_batch_norm", "_native_batch_norm_legit")


def batch_norm_decompositions():
    import torch._decomp as decomp
    return {k: v for k, v in decomp.decomposition_table.items()
            if _trace._op_name(k) in _BN_OPS
            and getattr(v, "__module__", "").startswith("torch._decomp")}


def example_kwargs(kwargs, target, step=0):
    """The model's kwargs plus the two training inputs (traced as kwargs, so they come last)."""
    for k in (TARGET, _STEP_KW):
        if k in kwargs:
            raise ValueError(f"train=True: the model may not take a keyword argument {k!r}")
    if not isinstance(target, torch.Tensor):
        raise TypeError("train=True needs target=<example tensor> (the loss's second argument)")
    return {**kwargs, TARGET: target, _STEP_KW: torch.tensor(step, dtype=torch.int64)}


def make_forward(loss_fn, base_seed):
    """forward(run, args, kwargs) -> (loss, model output) with seeded dropout."""
    if not callable(loss_fn):
        raise TypeError("train=True needs loss_fn=callable(output, target) -> scalar loss")

    def forward(run, args, kwargs):
        kwargs = dict(kwargs)
        target, step = kwargs.pop(TARGET), kwargs.pop(_STEP_KW)
        with _dropout.seeded(step, base_seed):
            out = run(*args, **kwargs)
        return loss_fn(out, target), out
    return forward


def output_names(n_model_leaves, updates):
    logits = ["logits"] if n_model_leaves == 1 else [f"logits::{i}" for i in range(n_model_leaves)]
    return ["loss"] + logits + ["update::" + u for u in updates]


def take_buffer_updates(gm, roles):
    """Turns functionalize's write-backs into buffers (copy_(buffer, new)) into extra graph
    outputs; returns the buffers' state_dict names in output order."""
    g = gm.graph
    phs = [n for n in g.nodes if n.op == "placeholder"]
    role = dict(zip(phs, roles))
    updates = {}
    for n in list(g.nodes):
        if (n.op == "call_function" and str(n.target).startswith("aten.copy_")
                and n.args[0] in role and role[n.args[0]][0] == "buffer" and not n.users):
            updates[role[n.args[0]][1]] = n.args[1]
            g.erase_node(n)
    out = next(n for n in g.nodes if n.op == "output")
    out.args = (list(out.args[0]) + list(updates.values()),)
    gm.recompile()
    return list(updates)


def eager(model, forward, args, kwargs, updates):
    """PyTorch's train-mode step on a copy of the model (the model itself is not touched):
    the flat outputs, then the updated buffers."""
    m = copy.deepcopy(model).train()
    with torch.no_grad():
        loss, out = forward(m, args, kwargs)
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    bufs = dict(m.named_buffers())
    return [loss] + leaves + [bufs[u] for u in updates], len(leaves)
