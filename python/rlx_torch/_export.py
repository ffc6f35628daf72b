"""export(): trace a module and write torch-ir.json + safetensors files."""
import inspect
import json
import math
import operator
import os
import re
import warnings

import torch
import torch.fx
import torch.utils._pytree as pytree

from . import _safetensors as st
from . import _leaf, _recurrent, _trace, _train

VERSION = "0.1"

_DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
    torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool",
    torch.complex64: "c64",
}
# Identity artifacts of tracing that carry no computation.
# (alias/detach are identities too once the graph is functional.)
_DROP_IDENTITY = ("aten.lift_fresh_copy.default", "aten.lift_fresh.default",
                  "aten.alias.default", "aten.detach.default")


def dtype_token(dt):
    if dt not in _DTYPES:
        raise TypeError(f"dtype {dt} is not representable in torch-ir")
    return _DTYPES[dt]


# ---------------------------------------------------------------- inputs


def split_example_inputs(example_inputs, kwargs=None):
    """Accepted forms -> (args tuple, kwargs dict).

    * a single tensor                      -> (t,), {}
    * a tuple/list of arguments            -> args, {}
    * a tuple/list whose LAST element is a dict -> that dict is kwargs
    * a pair (tuple_or_list, dict)         -> (args, kwargs)
    A model whose last positional argument really is a dict must use the
    pair form, e.g. ((x, d), {}), or the explicit `kwargs=` parameter.
    """
    if kwargs is not None:
        args = example_inputs
        if isinstance(args, torch.Tensor):
            args = (args,)
        return tuple(args), dict(kwargs)
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if not isinstance(example_inputs, (tuple, list)):
        return (example_inputs,), {}
    ex = tuple(example_inputs)
    if len(ex) == 2 and isinstance(ex[0], (tuple, list)) and isinstance(ex[1], dict):
        return tuple(ex[0]), dict(ex[1])
    if ex and isinstance(ex[-1], dict):
        return ex[:-1], dict(ex[-1])
    return ex, {}


def _sanitize(s):
    s = re.sub(r"[^A-Za-z0-9_]", "_", str(s))
    return s if s and not s[0].isdigit() else "_" + s


def _input_names(model, args, kwargs):
    """One base name per positional arg (from forward's signature) and kwarg."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    for i in range(len(args)):
        if i < len(pos):
            names.append(pos[i].name)
        else:
            names.append(f"{var}_{i - len(pos)}" if var else f"input_{i}")
    return names + list(kwargs.keys())


class _Inputs:
    """Flattens (args, kwargs) into tensor leaves (graph inputs) + constants."""

    def __init__(self, model, args, kwargs):
        self.nargs = len(args)
        self.kw_keys = list(kwargs.keys())
        groups = list(args) + [kwargs[k] for k in self.kw_keys]
        self.leaves, self.spec = pytree.tree_flatten(groups)
        # The same tensor object passed twice (mha(x, x, x)) is one input: the
        # model may test identity (`query is key` picks MHA's fast path).
        first = {}
        self.slots = []  # (leaf position, input index)
        for i, v in enumerate(self.leaves):
            if isinstance(v, torch.Tensor):
                self.slots.append((i, first.setdefault(id(v), len(first))))
        uniq = {k: i for i, k in reversed(self.slots)}
        self.tensors = [self.leaves[uniq[k]].detach().clone() for k in range(len(first))]
        # Ids: the parameter name, suffixed with the leaf index for nested values.
        base = _input_names(model, args, kwargs)
        self.ids = []
        seen = set()
        for g, name in enumerate(base):
            gl, _ = pytree.tree_flatten(groups[g])
            tl = [v for v in gl if isinstance(v, torch.Tensor)]
            for k, v in enumerate(tl):
                if id(v) not in seen:
                    seen.add(id(v))
                    self.ids.append(_sanitize(name if isinstance(groups[g], torch.Tensor)
                                              else f"{name}_{k}"))

    def rebuild(self, tensors):
        leaves = list(self.leaves)
        for p, k in self.slots:
            leaves[p] = tensors[k]
        groups = pytree.tree_unflatten(leaves, self.spec)
        return tuple(groups[: self.nargs]), dict(zip(self.kw_keys, groups[self.nargs:]))


def _dynamic_lists(dynamic, ids, tensors):
    dyn = [[-1] * t.dim() for t in tensors]
    for key, dims in (dynamic or {}).items():
        if isinstance(key, str) and key in ids:
            idx = ids.index(key)
        else:
            idx = int(key)
        if not 0 <= idx < len(tensors):
            raise ValueError(f"dynamic: no tensor input {key!r} (have {ids})")
        for d, sym in dims.items():
            d = int(d)
            r = tensors[idx].dim()
            if not -r <= d < r:
                raise ValueError(f"dynamic: dim {d} out of range for input {ids[idx]} of rank {r}")
            if isinstance(sym, str):
                if not sym.isidentifier() or len(sym) > 64:
                    raise ValueError(f"dynamic: symbol name {sym!r} is not an identifier")
            elif int(sym) < 0:
                raise ValueError("dynamic: symbol numbers are >= 0")
            else:
                sym = int(sym)
            dyn[idx][d % r] = sym
    return dyn


# ---------------------------------------------------------------- graph


def _clean_graph(gm, notes):
    g = gm.graph
    for n in list(g.nodes):
        if n.op != "call_function":
            continue
        name = str(n.target)
        if name in _DROP_IDENTITY:
            n.replace_all_uses_with(n.args[0])
            g.erase_node(n)
        elif name.startswith(("aten._assert", "aten.sym_constrain_range")) and not n.users:
            g.erase_node(n)  # runtime checks torch.export inserts
        elif name.startswith("aten.copy_") and n.args[0].op == "placeholder" and not n.users:
            # functionalize writes input mutations back with copy_ at the end.
            notes.append(f"dropped write-back to input {n.args[0].name} (mutated in forward)")
            g.erase_node(n)
    g.eliminate_dead_code()
    g.lint()
    gm.recompile()


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.env_vals = {}

    def run_node(self, n):
        v = super().run_node(n)
        self.env_vals[n] = v
        return v


_POS_INF, _NEG_INF = "\x00rlx+inf\x00", "\x00rlx-inf\x00"


def dumps(doc):
    """json.dumps, writing +-inf as +-1e999 (valid JSON, parses to +-inf)."""
    # One line per input/weight/node/output: diffable and still readable.
    def one(v):
        return json.dumps(v, allow_nan=False, separators=(", ", ": "))

    parts = []
    for k, v in doc.items():
        if isinstance(v, list) and v:
            body = ",\n".join("  " + one(x) for x in v)
            parts.append(f" {json.dumps(k)}: [\n{body}\n ]")
        elif isinstance(v, dict) and v:
            body = ",\n".join(f"  {json.dumps(kk)}: {one(vv)}" for kk, vv in v.items())
            parts.append(f" {json.dumps(k)}: {{\n{body}\n }}")
        else:
            parts.append(f" {json.dumps(k)}: {one(v)}")
    text = "{\n" + ",\n".join(parts) + "\n}"
    return text.replace(json.dumps(_POS_INF), "1e999").replace(json.dumps(_NEG_INF), "-1e999")


def _float_arg(x):
    # JSON has no inf/nan. +-1e999 is valid JSON that parses to +-inf (strtod,
    # Python json); nan has no number form and is written as a string.
    if math.isnan(x):
        return {"float": "nan"}
    if math.isinf(x):
        return {"float": _POS_INF if x > 0 else _NEG_INF}
    return {"float": x}


class _Encoder:
    def __init__(self, ids):
        self.ids = ids  # fx.Node -> id

    def arg(self, a):
        if isinstance(a, torch.fx.Node):
            return {"ref": self.ids[a]}
        if isinstance(a, bool):
            return {"bool": a}
        if isinstance(a, int):
            return {"int": a}
        if isinstance(a, float):
            return _float_arg(a)
        if isinstance(a, str):
            return {"str": a}
        if a is None:
            return {"none": True}
        if isinstance(a, torch.dtype):
            return {"dtype": dtype_token(a)}
        if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
            return {"str": str(a)}
        if isinstance(a, (list, tuple, torch.Size)):
            return {"list": [self.arg(x) for x in a]}
        if isinstance(a, torch.Tensor) and a.dim() == 0:
            return self.arg(a.item())
        raise TypeError(f"cannot encode argument {a!r} of type {type(a).__name__}")

    @staticmethod
    def meta(v):
        return {"shape": list(v.shape), "dtype": dtype_token(v.dtype)}

    def out(self, v):
        if isinstance(v, torch.Tensor):
            return self.meta(v)
        if isinstance(v, (tuple, list)):
            return [self.meta(x) if isinstance(x, torch.Tensor) else None for x in v]
        return {"scalar": self.arg(v)}


def _spec_json(spec, counter):
    """pytree TreeSpec -> {"leaf": i} / {"tuple"|"list": [..]} / {"dict": [[k, ..]]}."""
    if isinstance(spec, pytree.LeafSpec) or spec.type is None:
        i = counter[0]
        counter[0] += 1
        return {"leaf": i}
    kids = [_spec_json(c, counter) for c in spec.children_specs]
    if spec.type in (dict,) or "dict" in spec.type.__name__.lower():
        return {"dict": [[str(k), c] for k, c in zip(spec.context, kids)]}
    if spec.type is list:
        return {"list": kids}
    if spec.type is tuple:
        return {"tuple": kids}
    # 1.13 registers namedtuples under the `namedtuple` factory, class in context.
    cls = spec.context if isinstance(spec.context, type) else spec.type
    return {"namedtuple": cls.__name__, "fields": list(getattr(cls, "_fields", [])),
            "items": kids}


# ---------------------------------------------------------------- export


def export(model, example_inputs, out_dir, decomposition="high", dynamic=None, name=None,
           kwargs=None, atol=1e-3, train=False, loss_fn=None, target=None, dropout_seed=0):
    """Export `model` to `out_dir` (torch-ir.json, weights/reference.safetensors).

    example_inputs: see split_example_inputs. dynamic: {input index or id:
    {dim: symbol}}, a symbol being a name ("batch", "h": an identifier) or a
    torch-ir symbol number (0 batch, 1 seq, 2 rows, 3 past_seq, k s<k>); the
    same symbol on two dims means the same size. Returns the json document (a dict).

    train=True exports a training step's forward instead of inference (see
    _train.py): the model in train mode, loss_fn(output, target) as output
    `loss`, inputs `target` (example: `target=`) and `rlx::step`, dropout as
    rlx's seeded dropout (seeds dropout_seed, dropout_seed + 1, ...).
    """
    args, kw = split_example_inputs(example_inputs, kwargs)
    train_fwd = None
    if train:
        kw = _train.example_kwargs(kw, target)
        train_fwd = _train.make_forward(loss_fn, dropout_seed)
    elif loss_fn is not None or target is not None:
        raise ValueError("loss_fn and target are for train=True exports")
    was_training = model.training
    model.train(bool(train))
    try:
        return _export(model, args, kw, out_dir, decomposition, dynamic, name, atol, train_fwd)
    finally:
        model.train(was_training)


def _export(model, args, kw, out_dir, decomposition, dynamic, name, atol, train_fwd=None):
    inp = _Inputs(model, args, kw)
    if train_fwd:
        inp.ids[-1] = _train.STEP  # the eager reference comes after tracing (_train.eager)
    else:
        with torch.no_grad():
            ea, ek = inp.rebuild([t.clone() for t in inp.tensors])
            eager = model(*ea, **ek)
        eager_leaves, _ = pytree.tree_flatten(eager)

    traced, aliases = _trace.trace(
        model, [t.clone() for t in inp.tensors], inp.rebuild, decomposition, forward=train_fwd,
        extra_decomp=_train.batch_norm_decompositions() if train_fwd else None)
    gm = traced.gm
    notes = list(traced.notes)
    out_names = None
    if train_fwd:
        updates = _train.take_buffer_updates(gm, traced.roles)
        ea, ek = inp.rebuild([t.clone() for t in inp.tensors])
        eager_leaves, n_model = _train.eager(model, train_fwd, ea, ek, updates)
        out_names = _train.output_names(n_model, updates)
    _clean_graph(gm, notes)

    # Run the final graph once on the example values: gives every node's
    # concrete output (shape/dtype metadata) and checks the graph.
    # Fresh copies: tracing ran the (functionalized) write-backs on its inputs.
    run_vals = [inp.tensors[info].clone() if role == "input" else v
                for (role, info), v in zip(traced.roles, traced.values)]
    rec = _Recorder(gm)
    with torch.no_grad():
        graph_out = rec.run(*run_vals)
    vals = rec.env_vals

    used = set()
    ids = {}

    def unique(base):
        base = _sanitize(base)
        s, k = base, 1
        while s in used:
            s, k = f"{base}_{k}", k + 1
        used.add(s)
        return s

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(phs) == len(traced.roles)
    inputs_json, weights_json, weight_tensors = [], [], {}
    dyn = _dynamic_lists(dynamic, inp.ids, inp.tensors)
    # Inputs first so that they keep their signature names.
    for ph, (role, info) in zip(phs, traced.roles):
        if role == "input":
            # rlx::step keeps its "::" (the trainer's convention); the rest are identifiers.
            ids[ph] = inp.ids[info] if inp.ids[info] == _train.STEP else unique(inp.ids[info])
            used.add(ids[ph])
            t = inp.tensors[info]
            inputs_json.append({"id": ids[ph], "shape": list(t.shape),
                                "dtype": dtype_token(t.dtype), "dynamic": dyn[info]})
    prefix = {"param": "p_", "buffer": "b_", "const": "c_"}
    for ph, (role, info), val in zip(phs, traced.roles, traced.values):
        if role in prefix and ph.users:
            ids[ph] = unique(prefix[role] + info)
            weights_json.append({"id": ids[ph], "key": info, "shape": list(val.shape),
                                 "dtype": dtype_token(val.dtype), "kind": role})
            weight_tensors[info] = val
    # Every parameter/buffer goes to weights.safetensors, used or not.
    state = _trace._named_state(model)[0]
    for nm, t, _k in state:
        weight_tensors.setdefault(nm, t.detach())
    # A lifted constant that is a parameter or buffer itself keeps its name and
    # role: nn.LSTM / GRU / RNN read their cached _flat_weights, which
    # functional_call does not swap, so tracing bakes the real tensors in.
    by_storage = {(t.data_ptr(), tuple(t.shape), t.dtype): (nm, k) for nm, t, k in state}

    enc = _Encoder(ids)
    nodes_json = []
    for n in gm.graph.nodes:
        if n.op == "get_attr":  # lifted tensor constants (make_fx)
            val = getattr(gm, n.target)
            key, kind = str(n.target), "const"
            key, kind = by_storage.get((val.data_ptr(), tuple(val.shape), val.dtype), (key, kind))
            ids[n] = unique(prefix[kind] + key)
            weights_json.append({"id": ids[n], "key": key, "shape": list(val.shape),
                                 "dtype": dtype_token(val.dtype), "kind": kind})
            weight_tensors[key] = val.detach()
        elif n.op == "call_function":
            if n.target is operator.getitem:
                op = "_getitem"
            elif isinstance(n.target, torch._ops.OpOverload):
                op = str(n.target)
                # rlx_rnn.lstm.default -> aten.lstm.input, rlx_leaf.cov.default -> aten.cov.default
                op = _recurrent.ATEN_NAME.get(op, _leaf.ATEN_NAME.get(op, op))
            else:
                raise NotImplementedError(f"non-aten call in graph: {n.target} ({n.format_node()})")
            ids[n] = unique(n.name)
            node = {"id": ids[n], "op": op, "args": [enc.arg(a) for a in n.args],
                    "kwargs": {k: enc.arg(v) for k, v in n.kwargs.items()},
                    "out": enc.out(vals[n])}
            nodes_json.append(node)
        elif n.op == "output":
            outs = n.args[0]
        elif n.op != "placeholder":
            raise NotImplementedError(f"unsupported fx node {n.op}: {n.format_node()}")

    outputs_json = []
    for o, v in zip(outs, graph_out):
        if isinstance(o, torch.fx.Node) and isinstance(v, torch.Tensor):
            outputs_json.append({"ref": ids[o], **enc.meta(v)})
        else:
            outputs_json.append({"const": enc.arg(v)})
    if out_names:  # train=True: named outputs (loss, logits, update::<buffer>)
        outputs_json = [{"name": nm, **o} for nm, o in zip(out_names, outputs_json)]

    # The traced graph must reproduce eager: catches tracing problems early.
    max_err = 0.0
    for i, (g, e) in enumerate(zip(graph_out, eager_leaves)):
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor) or g.shape != e.shape:
                raise RuntimeError(f"traced output {i} does not match eager output")
            if e.numel() and e.dtype.is_floating_point:
                max_err = max(max_err, (g.double() - e.double()).abs().max().item())
            elif e.numel() and not torch.equal(g, e):
                raise RuntimeError(f"traced output {i} differs from eager")
    if max_err > atol:
        warnings.warn(f"rlx_torch: traced graph differs from eager by {max_err:g}")
        notes.append(f"traced graph differs from eager by {max_err:g}")

    doc = {
        "format": "rlx-torch-ir",
        "version": 1,
        "model_name": name or type(model).__name__,
        "producer": f"rlx_torch {VERSION} / torch {torch.__version__}",
        "decomposition": decomposition,
        "inputs": inputs_json,
        "weights": weights_json,
        "nodes": nodes_json,
        "outputs": outputs_json,
        "extra": {
            "trace": traced.method,
            "output_structure": _spec_json(traced.out_spec, [0]),
            "input_names": inp.ids,
            "weight_aliases": aliases,
            "graph_vs_eager_max_abs_err": max_err,
            "notes": notes,
            **({"train": {"target": _train.TARGET, "step": _train.STEP}} if train_fwd else {}),
        },
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "torch-ir.json"), "w") as f:
        f.write(dumps(doc) + "\n")
    st.save_file(weight_tensors, os.path.join(out_dir, "weights.safetensors"))
    ref = {}
    for j, t in zip(inputs_json, inp.tensors):
        ref["in::" + j["id"]] = t
    for i, e in enumerate(eager_leaves):
        if isinstance(e, torch.Tensor):
            ref[f"out::{out_names[i] if out_names else i}"] = e
    st.save_file(ref, os.path.join(out_dir, "reference.safetensors"))
    return doc
