"""Turn an nn.Module into a flat aten-level torch.fx graph.

Both paths return a `Traced`: a GraphModule whose placeholders are, in order,
described by `roles` (("param"|"buffer"|"const", state_dict key) or
("input", index into the flat tensor inputs)), the concrete value of every
placeholder, and the pytree spec of the model's output.
"""
import contextlib
import warnings

import torch
import torch.utils._pytree as pytree

# Ops a compiler wants whole: removed from the table at level "high" (spec).
HIGH_KEEP = frozenset([
    "scaled_dot_product_attention", "native_layer_norm", "layer_norm",
    "_softmax", "softmax", "gelu", "silu", "convolution", "native_group_norm",
    "group_norm", "embedding", "rms_norm", "native_batch_norm",
    "_native_batch_norm_legit_no_training",
    # torch 1.13's decomposition subtracts the unmasked max: NaN on rows that
    # are all -inf or hold +inf, where eager (and rlx's lowering) give -inf / +inf.
    "logsumexp",
])
LEVELS = ("aten", "core", "high")

# The Core ATen opset of torch 2.x (ops tagged `core`, by overload packet).
# torch 1.13 has no core_aten_decompositions(); its torch._decomp table also
# decomposes ops that are core (addmm -> mm/mul/add, slice -> as_strided...),
# so at level "core" 1.13 decomposes only the ops outside this set.
CORE_ATEN = frozenset("""
_adaptive_avg_pool2d _adaptive_avg_pool3d _cdist_forward _embedding_bag
_local_scalar_dense _log_softmax _native_batch_norm_legit
_native_batch_norm_legit_no_training _pdist_forward _softmax _to_copy abs acos
acosh adaptive_avg_pool1d add addmm alias amax amin any arange argmax argmin
as_strided asin asinh atan atan2 atanh avg_pool1d avg_pool2d avg_pool3d
bitwise_and bitwise_not bitwise_or bitwise_xor bmm cat ceil clamp clone col2im
constant_pad_nd convolution copy cos cosh cumsum diagonal div elu embedding
empty empty_strided eq erf exp expand expm1 fill flip floor fmod full full_like
gather ge gelu grid_sampler_2d gt hardtanh index index_put index_select isinf
isnan le leaky_relu log log10 log1p log2 logical_and logical_not logical_or
logical_xor lt max max_pool2d_with_indices max_pool3d_with_indices maximum mean
min minimum mm mul native_dropout native_group_norm native_layer_norm ne neg
nonzero permute pow prod rand randn randperm reciprocal reflection_pad1d
reflection_pad2d reflection_pad3d relu remainder repeat replication_pad2d
replication_pad3d resize_ round rsqrt scalar_tensor scatter scatter_add
scatter_reduce select select_scatter sigmoid sign sin sinh slice slice_scatter
sort split_with_sizes sqrt squeeze sub sum sym_numel sym_size sym_storage_offset
sym_stride tan tanh topk trunc unsqueeze upsample_bilinear2d upsample_nearest2d
var view where
""".split())


class Traced:
    def __init__(self, gm, roles, values, out_spec, method, notes):
        self.gm = gm
        self.roles = roles  # per placeholder, in graph order
        self.values = values  # per placeholder, in graph order
        self.out_spec = out_spec
        self.method = method
        self.notes = notes  # warnings worth recording in the json "extra"


def torch_version():
    parts = []
    for p in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _op_name(op):
    try:
        return op.overloadpacket.__name__
    except AttributeError:
        return getattr(op, "__name__", str(op))


def _filter_high(table):
    for op in list(table.keys()):
        if _op_name(op) in HIGH_KEEP:
            table.pop(op)  # dict and torch 2.5's CustomDecompTable both have pop
    return table


def decomposition_table_113(level):
    """torch 1.13: "core" = the aten->aten decompositions of torch._decomp
    for ops outside the Core ATen opset.

    torch._decomp.decomposition_table also holds the torch._refs entries,
    which lower everything (add, mul, transpose...) to prims.*; 1.13 has no
    curated core_aten_decompositions(), so this is the closest match.
    """
    if level == "aten":
        return {}
    import torch._decomp as decomp
    table = {k: v for k, v in decomp.decomposition_table.items()
             if getattr(v, "__module__", "").startswith("torch._decomp")
             and _op_name(k) not in CORE_ATEN}
    if level == "high":
        _filter_high(table)
    return table


def trace(model, tensor_inputs, rebuild, level, forward=None, extra_decomp=None):
    """tensor_inputs: flat list of example tensors; rebuild(flat) -> (args, kwargs).

    forward(run, args, kwargs), when given, replaces run(*args, **kwargs) (run
    calls the model) and extra_decomp adds decompositions: a train=True export
    uses both, and always the make_fx path.
    """
    if level not in LEVELS:
        raise ValueError(f"decomposition must be one of {LEVELS}, got {level!r}")
    if forward is not None:
        return _trace_make_fx(model, tensor_inputs, rebuild, level, forward, extra_decomp)
    if torch_version() >= (2, 1):
        try:
            import torch.export  # noqa: F401
        except ImportError:
            pass
        else:
            return _trace_export(model, tensor_inputs, rebuild, level)
    return _trace_make_fx(model, tensor_inputs, rebuild, level)


def _named_state(model):
    """Deduplicated (name, tensor, kind) for parameters then buffers."""
    seen = {}
    aliases = {}
    state = []
    mods = list(model.named_modules(remove_duplicate=False))
    for kind, attr in (("param", "_parameters"), ("buffer", "_buffers")):
        for prefix, mod in mods:
            for local, t in getattr(mod, attr).items():
                if t is None:
                    continue
                name = f"{prefix}.{local}" if prefix else local
                if id(t) in seen:
                    if seen[id(t)] != name:
                        aliases[name] = seen[id(t)]
                    continue
                seen[id(t)] = name
                state.append((name, t, kind))
    return state, aliases


def _trace_make_fx(model, tensor_inputs, rebuild, level, forward=None, extra_decomp=None):
    from functorch import functionalize
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils.stateless import functional_call

    from ._leaf import leaf_ops
    from ._recurrent import recurrent_as_one_node

    state, aliases = _named_state(model)
    names = [n for n, _, _ in state]
    nw = len(state)
    out_spec = []
    route = [False]  # route value-reading ops to leaf nodes (see below)

    def fn(*flat):
        args, kwargs = rebuild(list(flat[nw:]))
        pb = dict(zip(names, flat[:nw]))
        # Tied weights: every alias must be swapped too, or it is baked in.
        pb.update({a: pb[b] for a, b in aliases.items()})
        def run(*a, **k):
            return functional_call(model, pb, a, k)
        with recurrent_as_one_node(), leaf_ops() if route[0] else contextlib.nullcontext():
            out = forward(run, args, kwargs) if forward else run(*args, **kwargs)
        leaves, spec = pytree.tree_flatten(out)
        out_spec[:] = [spec]
        return leaves

    # Real-mode tracing runs the ops: clone buffers so that a forward which
    # mutates one (train-mode batch norm) changes neither the model nor the
    # values returned (the weights written and the graph's check run).
    values = [t.detach() if kind == "param" else t.detach().clone() for _, t, kind in state]
    values += list(tensor_inputs)
    table = {**decomposition_table_113(level), **(extra_decomp or {})}

    def make():
        scratch = [v.clone() if kind != "param" else v for v, (_, _, kind) in zip(values, state)]
        scratch += values[nw:]
        with torch.no_grad():
            return make_fx(functionalize(fn), decomposition_table=table,
                           tracing_mode="real")(*scratch)

    # Ops whose composite code reads values (quantile, cov, ...) stop tracing; only then is the
    # trace redone with them routed to leaf nodes, since the routing (a TorchFunctionMode) also
    # turns off fast paths such as nn.TransformerEncoderLayer's fused kernel.
    try:
        gm = make()
    except RuntimeError as e:
        if "get value out of a tracing tensor" not in str(e):
            raise
        route[0] = True
        gm = make()
    roles = [(kind, name) for name, _, kind in state]
    roles += [("input", i) for i in range(len(tensor_inputs))]
    notes = []
    if aliases:
        notes.append("tied weights: " + ", ".join(f"{a} -> {b}" for a, b in aliases.items()))
    return Traced(gm, roles, values, out_spec[0],
                  "make_fx(functionalize, tracing_mode=real)", notes), aliases


def _trace_export(model, tensor_inputs, rebuild, level):  # pragma: no cover (torch >= 2.1)
    """torch >= 2.1 (untested here: the project's torch is 1.13)."""
    from torch.export import export
    from torch.export.graph_signature import InputKind, OutputKind
    from torch.fx._pytree import tree_flatten_spec

    args, kwargs = rebuild(list(tensor_inputs))
    with torch.no_grad():
        ep = export(model, tuple(args), kwargs)
    if level == "aten":
        ep = ep.run_decompositions({})
    else:
        try:
            from torch.export import default_decompositions  # torch >= 2.5
            table = default_decompositions()
        except ImportError:
            from torch._decomp import core_aten_decompositions
            table = core_aten_decompositions()
        if level == "high":
            _filter_high(table)
        ep = ep.run_decompositions(table)
    gm = ep.graph_module
    sig = ep.graph_signature
    consts = getattr(ep, "constants", {}) or {}
    call_sig = ep.module_call_graph[0].signature
    # User inputs in exported order (export may reorder kwargs); the leaves are
    # the very tensor objects passed in, so identity maps them to our indices.
    user_leaves = tree_flatten_spec((tuple(args), kwargs), call_sig.in_spec)
    index_of = {id(t): i for i, t in enumerate(tensor_inputs)}
    kinds = {InputKind.PARAMETER: "param", InputKind.BUFFER: "buffer",
             InputKind.CONSTANT_TENSOR: "const"}
    roles, values, k_user = [], [], 0
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for spec, ph in zip(sig.input_specs, phs):
        if spec.kind in kinds:
            val = ep.state_dict[spec.target] if spec.target in ep.state_dict else consts[spec.target]
            roles.append((kinds[spec.kind], spec.target))
            values.append(val.detach())
            continue
        leaf = None
        if spec.kind == InputKind.USER_INPUT:
            leaf = user_leaves[k_user]
            k_user += 1
        if isinstance(leaf, torch.Tensor) and id(leaf) in index_of:
            roles.append(("input", index_of[id(leaf)]))
            values.append(leaf)
        elif not ph.users:
            roles.append(("unused", None))  # specialised python scalar etc.
            values.append(leaf)
        else:
            raise NotImplementedError(f"unsupported exported input {spec}")
    # Keep only user outputs (buffer mutations are dropped: eval-mode export).
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out_node.args[0])
    keep = [o for o, s in zip(outs, sig.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    notes = []
    if len(keep) != len(outs):
        notes.append("dropped mutated-buffer outputs")
    out_node.args = (keep,)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return Traced(gm, roles, values, call_sig.out_spec,
                  "torch.export + run_decompositions", notes), {}
