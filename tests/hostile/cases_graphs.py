"""Hostile model directories: torch-ir.json (+ weights.safetensors) and
model.rlx.json, each derived from a good model by one planted defect."""
import copy
import json
import os

import formats as F
from cases_tensors import W, X, rlx_graph, rlx_model

FC_W = F.f32_bytes([0.1 * (i % 5 - 2) for i in range(12)])  # fc.weight [4, 3]
FC_B = F.f32_bytes([0.5, -0.5, 0.25, 0.0])  # fc.bias [4]


def ints(*v):
    return {"list": [{"int": i} for i in v]}


def torch_doc():
    """x[2,3] -> linear(fc) -> relu -> view([-1]) -> [8]."""
    node = lambda i, op, args, shape: {  # noqa: E731
        "id": i, "op": op, "args": args, "out": {"shape": shape, "dtype": "f32"}}
    return {
        "format": "rlx-torch-ir", "version": 1, "model_name": "hostile", "decomposition": "high",
        "inputs": [{"id": "x", "shape": [2, 3], "dtype": "f32"}],
        "weights": [{"id": "w", "key": "fc.weight", "shape": [4, 3], "dtype": "f32", "kind": "param"},
                    {"id": "b", "key": "fc.bias", "shape": [4], "dtype": "f32", "kind": "param"}],
        "nodes": [node("lin", "aten.linear.default", [{"ref": "x"}, {"ref": "w"}, {"ref": "b"}], [2, 4]),
                  node("r", "aten.relu.default", [{"ref": "lin"}], [2, 4]),
                  node("v", "aten.view.default", [{"ref": "r"}, ints(-1)], [8])],
        "outputs": [{"ref": "v", "shape": [8], "dtype": "f32"}],
    }


def torch_weights(**override):
    t = {"fc.weight": ("F32", [4, 3], FC_W), "fc.bias": ("F32", [4], FC_B)}
    t.update(override)
    return F.safetensors([(k, d, s, b) for k, (d, s, b) in t.items() if d is not None])


def mutate(path, value):
    """Returns f(doc) that sets doc[path...] = value."""
    def f(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return f


class Text:
    """A mutation of the document's JSON text rather than of the document."""

    def __init__(self, fn):
        self.fn = fn


def torch_cases():
    """(name, doc mutation or raw json text, weights bytes or None)."""
    view_size = lambda *v: mutate(["nodes", 2, "args", 1], ints(*v))  # noqa: E731
    deep = '{"list": [' * 1000000 + '{"int": 1}' + ']}' * 1000000
    dup = lambda d: d["nodes"].append(copy.deepcopy(d["nodes"][1]))  # noqa: E731

    def huge_split(op, *args):
        """x declared [8e10, 3], split along dim 0 into ~8e10 pieces (fuzz_torch_ir)."""
        def f(d):
            d["inputs"][0]["shape"] = [80000003840, 3]
            d["nodes"].insert(0, {"id": "s", "op": op, "args": [{"ref": "x"}, *args],
                               "out": {"shape": [1, 3], "dtype": "f32"}})
        return f
    return [
        ("json_truncated", Text(lambda t: t[: len(t) // 2]), None),
        ("json_top_level_array", Text(lambda t: "[" + t + "]"), None),
        ("json_deep_args", Text(lambda t: t.replace('{"int": -1}', deep)), None),
        ("view_negative", view_size(-2, -4), None),
        ("view_wraps", view_size(2, (1 << 63) + 3), None),  # 2 * (2^63 + 3) == 6 mod 2^64
        ("view_overflows", view_size(2, (1 << 62) + 3), None),
        ("view_rank_1e5", view_size(*([1] * 100000)), None),
        ("view_two_minus_one", view_size(-1, -1), None),
        ("view_wrong_count", view_size(3, 3), None),
        ("duplicate_node_id", dup, None),
        ("node_shadows_input", mutate(["nodes", 0, "id"], "x"), None),
        ("input_dim_fraction", mutate(["inputs", 0, "shape"], [2, 2.5]), None),
        ("input_dim_negative", mutate(["inputs", 0, "shape"], [2, -3]), None),
        ("input_dim_huge", mutate(["inputs", 0, "shape"], [1 << 40, 1 << 40]), None),
        ("input_rank_100", mutate(["inputs", 0, "shape"], [1] * 100), None),
        ("input_dynamic_length", mutate(["inputs", 0, "dynamic"], [0]), None),
        ("input_dtype_unknown", mutate(["inputs", 0, "dtype"], "f99"), None),
        ("input_complex", mutate(["inputs", 0, "dtype"], "c64"), None),
        ("kwargs_list", mutate(["nodes", 1, "kwargs"], [{"int": 1}]), None),
        ("nodes_over_limit", Text(lambda t: t.replace('"nodes": [', '"nodes": [' + "0," * 10**7)),
         None),
        ("version_float_huge", lambda d: d.update(version=1.44e44), None),  # fuzz_torch_ir
        ("args_object", mutate(["nodes", 1, "args"], {"a": {"ref": "lin"}}), None),
        ("nodes_object", lambda d: d.update(nodes={"n": d["nodes"][0]}), None),
        ("int_arg_fraction", mutate(["nodes", 2, "args", 1], {"list": [{"int": 8.5}]}), None),
        ("ref_undefined", mutate(["nodes", 1, "args", 0], {"ref": "nope"}), None),
        ("ref_self_cycle", mutate(["nodes", 1, "args", 0], {"ref": "r"}), None),
        ("ref_forward_cycle", mutate(["nodes", 0, "args", 0], {"ref": "v"}), None),
        ("arg_kind_unknown", mutate(["nodes", 1, "args", 0], {"tensor": 1}), None),
        ("op_unknown", mutate(["nodes", 1, "op"], "aten.frobnicate.default"), None),
        ("out_shape_lies", mutate(["nodes", 1, "out", "shape"], [4, 2]), None),
        ("output_ref_undefined", mutate(["outputs", 0], {"ref": "nope"}), None),
        ("output_const_string", mutate(["outputs", 0], {"const": {"str": "x"}}), None),
        ("getitem_out_of_range", lambda d: d["nodes"].append(
            {"id": "g", "op": "_getitem", "args": [{"ref": "lin"}, {"int": 5}]}), None),
        ("index_select_2d_index", lambda d: d["nodes"].append(
            {"id": "s", "op": "aten.index_select.default",
             "args": [{"ref": "x"}, {"int": 0}, {"ref": "lin"}],
             "out": {"shape": [2, 3], "dtype": "f32"}}), None),
        ("unbind_huge_dim", huge_split("aten.unbind.int"), None),
        ("split_huge_count", huge_split("aten.split.Tensor", {"int": 1}), None),
        ("chunk_huge_count", huge_split("aten.chunk.default", {"int": 1 << 40}), None),
        ("split_sizes_huge_count", huge_split("aten.split_with_sizes.default",
                                              {"list": [{"int": 1}] * 70000}), None),
        ("weights_missing_file", None, False),
        ("weights_missing_tensor", None, torch_weights(**{"fc.bias": (None, None, None)})),
        ("weights_wrong_shape", None, torch_weights(**{"fc.weight": ("F32", [3, 4], FC_W)})),
        ("weights_wrong_dtype", None, torch_weights(**{"fc.bias": ("F64", [2], FC_B)})),
        ("weights_truncated", None, torch_weights()[:-7]),
        ("weights_lying_header", None, F.safetensors_raw(b'{"fc.weight": {"dtype": "F32", '
                                                         b'"shape": [1099511627776], '
                                                         b'"data_offsets": [0, 64]}}', FC_W)),
    ]


def rlx_cases():
    """(name, mutation of the rlx graph doc or of its text)."""
    node = lambda i, k, v: mutate(["nodes", i, k], v)  # noqa: E731
    deep = "[" * 1000000 + "]" * 1000000
    return [
        ("json_truncated", Text(lambda t: t[: len(t) // 2])),
        ("json_deep_attr", Text(lambda t: t.replace('"shape": [6]}', '"shape": ' + deep + "}"))),
        ("version_99", lambda d: d.update(version=99)),
        ("op_unknown", node(3, "op", "frobnicate")),
        ("dtype_unknown", node(0, "dtype", "f99")),
        ("input_refers_to_itself", node(2, "inputs", [2, 1])),
        ("input_refers_forward", node(2, "inputs", [4, 1])),
        ("input_negative", node(2, "inputs", [-1, 1])),
        ("input_beyond_int32", node(2, "inputs", [1 << 32, 1])),
        ("input_float_huge", node(2, "inputs", [1e300, 1])),  # fuzz_graph_json
        ("input_fraction", node(2, "inputs", [0.5, 1])),
        ("output_node_float", lambda d: d.update(outputs=[{"name": "y", "node": 4.5}])),
        ("attr_int_huge_float_v1", lambda d: d.update(version=1) or d["nodes"][4].update(
            attrs={"shape": {"ints": [1e300]}})),
        ("wrong_arity", node(2, "inputs", [0])),
        ("shape_disagrees", node(3, "shape", [3, 2])),
        ("dim_negative", node(0, "shape", [2, -3])),
        ("dim_fraction", node(0, "shape", [2, 2.5])),
        ("rank_65", node(0, "shape", [1] * 65)),
        ("reshape_negative", node(4, "attrs", {"shape": [-2, -3]})),
        ("reshape_wraps", node(4, "attrs", {"shape": [2, (1 << 63) + 3]})),
        ("reshape_overflows", node(4, "attrs", {"shape": [2, (1 << 62) + 3]})),
        ("attr_unknown", node(4, "attrs", {"shape": [6], "shap": 1})),
        ("attr_list_1e6", node(4, "attrs", {"shape": [1] * 10**6})),
        ("attr_list_1e6_unknown", node(4, "attrs", {"shape": [6], "shap": [7] * 10**6})),
        ("nodes_over_limit", Text(lambda t: t.replace('"nodes": [', '"nodes": [' + "0," * 10**7))),
        ("attr_wrong_kind", node(4, "attrs", {"shape": "6"})),
        ("expand_huge", lambda d: d["nodes"].append(
            {"op": "expand", "inputs": [3], "shape": [1 << 40, 1 << 40, 3], "dtype": "f32",
             "attrs": {"shape": [1 << 40, 1 << 40, 3]}})),
        ("constant_short_data", lambda d: d["nodes"].append(
            {"op": "constant", "inputs": [], "shape": [4], "dtype": "f32", "data": "AAAA"})),
        ("constant_huge_shape", lambda d: d["nodes"].append(
            {"op": "constant", "inputs": [], "shape": [1 << 40, 1 << 40], "dtype": "f32",
             "data": ""})),
        ("constant_bad_base64", lambda d: d["nodes"].append(
            {"op": "constant", "inputs": [], "shape": [1], "dtype": "f32", "data": "AA*A"})),
        ("output_missing_node", lambda d: d.update(outputs=[{"name": "y", "node": 99}])),
        ("duplicate_input", lambda d: d["nodes"].insert(1, copy.deepcopy(d["nodes"][0]))),
    ]


def apply(doc, change):
    """The file text after a Text or document mutation."""
    if isinstance(change, Text):
        return change.fn(json.dumps(doc))
    change(doc)
    return json.dumps(doc)


def add(s):
    good_in = s.file("graphs/in.safetensors", F.safetensors([("x", "F32", [2, 3], X)]))
    i64_in = s.file("graphs/in_i64.safetensors",
                    F.safetensors([("x", "I64", [2, 3], F.i64_bytes([1, 2, 3, 4, 5, 6]))]))
    # torch-ir.json model directories.
    good = s.path("graphs/torch_good")
    s.file("graphs/torch_good/torch-ir.json", F.dump_json(torch_doc()))
    s.file("graphs/torch_good/weights.safetensors", torch_weights())
    s.control("torch/good", ["run", good, "--inputs", good_in, "--out", s.out("torch_good")],
              s.out("torch_good"))
    s.control("torch/good inspect", ["inspect", good])
    out = s.out("torch_i64")
    s.case("torch/input_i64_for_f32", ["run", good, "--inputs", i64_in, "--out", out],
           ["input 'x' is i64", "f32"], out)
    for name, change, weights in torch_cases():
        d = "graphs/torch_%s" % name
        text = F.dump_json(torch_doc()) if change is None else \
            apply(torch_doc(), change).encode()
        s.file(d + "/torch-ir.json", text)
        if weights is not False:
            s.file(d + "/weights.safetensors", torch_weights() if weights is None else weights)
        out = s.out("torch_" + name)
        what = "weights.safetensors" if name.startswith("weights_") and weights is not False \
            else "torch_%s" % name
        s.case("torch/" + name, ["run", s.path(d), "--inputs", good_in, "--out", out], [what], out)
        if name in ("json_deep_args", "view_wraps", "duplicate_node_id", "kwargs_list"):
            s.case("torch/%s inspect" % name, ["inspect", s.path(d)], [what])
    # model.rlx.json directories.
    good = rlx_model(s, "graphs/rlx_good")
    s.control("rlx/good", ["run", good, "--inputs", good_in, "--out", s.out("rlx_good")],
              s.out("rlx_good"))
    s.control("rlx/good inspect", ["inspect", good])
    for name, change in rlx_cases():
        d = rlx_model(s, "graphs/rlx_%s" % name, apply(rlx_graph(), change).encode())
        out = s.out("rlx_" + name)
        s.case("rlx/" + name, ["run", d, "--inputs", good_in, "--out", out], ["rlx_" + name], out)
    d = rlx_model(s, "graphs/rlx_weights_missing", weights_bytes=False)
    out = s.out("rlx_weights_missing")
    s.case("rlx/weights_missing", ["run", d, "--inputs", good_in, "--out", out],
           ["missing weights: w [3] f32"], out)
    d = rlx_model(s, "graphs/rlx_weights_wrong_shape",
                  weights_bytes=F.safetensors([("w", "F32", [2], W[:8])]))
    out = s.out("rlx_weights_wrong_shape")
    s.case("rlx/weights_wrong_shape", ["run", d, "--inputs", good_in, "--out", out],
           ["weight 'w'"], out)

