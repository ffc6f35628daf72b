"""Tests for the PyTorch exporter python/rlx_torch (unittest only).

Run: PYTHONPATH=python /usr/bin/python3 -m unittest discover -s tests/python
"""
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import rlx_torch  # noqa: E402
from rlx_torch import _safetensors as st  # noqa: E402
import rlx_torch_models as M  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "f64": torch.float64, "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
          "i8": torch.int8, "u8": torch.uint8, "bool": torch.bool, "c64": torch.complex64}
OP_RE = re.compile(r"^(aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+|prims\.[A-Za-z0-9_]+\.default|_getitem)$")
TOP_KEYS = ["format", "version", "model_name", "producer", "decomposition",
            "inputs", "weights", "nodes", "outputs"]


# ------------------------------------------------------------ spec validator


def validate(doc):
    """Check `doc` against shared/spec/torch-ir.md; raises AssertionError."""
    def check(cond, *msg):
        if not cond:
            raise AssertionError(" ".join(str(m) for m in msg))

    for k in TOP_KEYS:
        check(k in doc, "missing top-level key", k)
    check(set(doc) <= set(TOP_KEYS) | {"extra"}, "unknown top-level keys", set(doc) - set(TOP_KEYS))
    check(doc["format"] == "rlx-torch-ir" and doc["version"] == 1, "format/version")
    check(isinstance(doc["model_name"], str) and isinstance(doc["producer"], str), "names")
    check(doc["decomposition"] in ("aten", "core", "high"), "decomposition")

    defined = {}  # id -> Out-like meta ("tensor" dict or list for tuples)

    def shape_ok(s):
        return isinstance(s, list) and all(isinstance(d, int) and d >= 0 for d in s)

    def meta_ok(m):
        return (isinstance(m, dict) and set(m) == {"shape", "dtype"} and shape_ok(m["shape"])
                and m["dtype"] in DTYPES)

    def arg(a, where):
        check(isinstance(a, dict) and len(a) == 1, where, "Arg must be a one-key object:", a)
        (k, v), = a.items()
        if k == "ref":
            check(v in defined, where, "reference to undefined id", v)
        elif k == "int":
            check(isinstance(v, int) and not isinstance(v, bool), where, "int", v)
        elif k == "float":
            check(isinstance(v, (int, float)) and not isinstance(v, bool) or v == "nan",
                  where, "float", v)
        elif k == "bool":
            check(isinstance(v, bool), where, "bool", v)
        elif k == "str":
            check(isinstance(v, str), where, "str", v)
        elif k == "dtype":
            check(v in DTYPES, where, "dtype token", v)
        elif k == "none":
            check(v is True, where, "none", v)
        elif k == "list":
            check(isinstance(v, list), where, "list", v)
            for x in v:
                arg(x, where)
        else:
            check(False, where, "unknown Arg kind", k)

    for i in doc["inputs"]:
        check(set(i) <= {"id", "shape", "dtype", "dynamic"} and {"id", "shape", "dtype"} <= set(i),
              "input keys", i)
        check(i["id"] not in defined, "duplicate id", i["id"])
        check(shape_ok(i["shape"]) and i["dtype"] in DTYPES, "input meta", i)
        if "dynamic" in i:
            check(len(i["dynamic"]) == len(i["shape"]) and
                  all(isinstance(d, int) and d >= -1 for d in i["dynamic"]), "dynamic", i)
        defined[i["id"]] = {"shape": i["shape"], "dtype": i["dtype"]}
    for w in doc["weights"]:
        check(set(w) == {"id", "key", "shape", "dtype", "kind"}, "weight keys", w)
        check(w["id"] not in defined, "duplicate id", w["id"])
        check(shape_ok(w["shape"]) and w["dtype"] in DTYPES, "weight meta", w)
        check(w["kind"] in ("param", "buffer", "const"), "weight kind", w)
        defined[w["id"]] = {"shape": w["shape"], "dtype": w["dtype"]}
    for n in doc["nodes"]:
        check(set(n) == {"id", "op", "args", "kwargs", "out"}, "node keys", n)
        check(n["id"] not in defined, "duplicate id", n["id"])
        check(OP_RE.match(n["op"]), "bad op name", n["op"])
        check(isinstance(n["args"], list) and isinstance(n["kwargs"], dict), "args/kwargs", n)
        for a in n["args"]:
            arg(a, n["id"])
        for a in n["kwargs"].values():
            arg(a, n["id"])
        out = n["out"]
        if isinstance(out, list):
            check(all(o is None or meta_ok(o) for o in out), "tuple out", n)
        elif isinstance(out, dict) and "scalar" in out:
            check(len(out) == 1, "scalar out", n)
            arg(out["scalar"], n["id"])
        else:
            check(meta_ok(out), "out", n)
        if n["op"] == "_getitem":
            check(len(n["args"]) == 2 and "ref" in n["args"][0] and "int" in n["args"][1],
                  "_getitem args", n)
            src = defined[n["args"][0]["ref"]]
            check(isinstance(src, list), "_getitem of a non-tuple", n)
            idx = n["args"][1]["int"]
            check(0 <= idx < len(src) and src[idx] == out, "_getitem meta", n)
        defined[n["id"]] = out
    check(isinstance(doc["outputs"], list) and doc["outputs"], "outputs")
    for o in doc["outputs"]:
        if "const" in o:
            check(set(o) == {"const"}, "const output", o)
            arg(o["const"], "outputs")
        else:
            check(set(o) == {"ref", "shape", "dtype"}, "output keys", o)
            check(o["ref"] in defined and defined[o["ref"]] == {"shape": o["shape"],
                                                               "dtype": o["dtype"]},
                  "output meta", o)


# ------------------------------------------------ a reference "importer"

_STRS = {str(v): v for v in (torch.strided, torch.sparse_coo, torch.contiguous_format,
                             torch.channels_last, torch.preserve_format)}


def run_ir(doc, weights, inputs):
    """Execute a torch-ir document with torch.ops (independent of the exporter)."""
    env = dict(inputs)
    for w in doc["weights"]:
        env[w["id"]] = weights[w["key"]]

    def dec(a):
        (k, v), = a.items()
        if k == "ref":
            return env[v]
        if k == "list":
            return [dec(x) for x in v]
        if k == "dtype":
            return DTYPES[v]
        if k == "none":
            return None
        if k == "float":
            return float(v)
        if k == "str":
            return _STRS.get(v, v)
        return v

    for n in doc["nodes"]:
        args = [dec(a) for a in n["args"]]
        kwargs = {k: dec(v) for k, v in n["kwargs"].items()}
        if n["op"] == "_getitem":
            env[n["id"]] = args[0][args[1]]
            continue
        ns, name, overload = n["op"].split(".")
        fn = getattr(getattr(getattr(torch.ops, ns), name), overload)
        env[n["id"]] = fn(*args, **kwargs)
    return [dec(o["const"]) if "const" in o else env[o["ref"]] for o in doc["outputs"]]


# ------------------------------------------------------------------ tests

LEVELS = ("aten", "core", "high")
try:
    import torchvision  # noqa: F401  (Debian: python3-torchvision)
    HAVE_TORCHVISION = True
except ImportError:
    HAVE_TORCHVISION = False
MODELS = ["mlp", "cnn_bn", "transformer_fast", "transformer_slow", "gpt", "multi_out",
          "cnn_misc"]
if HAVE_TORCHVISION:
    MODELS.insert(5, "resnet18")


class ExportedModels(unittest.TestCase):
    """Exports every model at every level once, then checks the artefacts."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="rlx_torch_test_")
        cls.docs = {}
        for name in MODELS:
            for lvl in LEVELS:
                model, ex = M.ALL[name]()
                d = os.path.join(cls.tmp.name, f"{name}_{lvl}")
                rlx_torch.export(model, ex, d, decomposition=lvl, name=name)
                cls.docs[name, lvl] = d

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def load(self, name, lvl):
        d = self.docs[name, lvl]
        with open(os.path.join(d, "torch-ir.json")) as f:
            text = f.read()
        doc = json.loads(text, parse_constant=lambda c: self.fail(f"non-JSON constant {c}"))
        return (doc, st.load_file(os.path.join(d, "weights.safetensors")),
                st.load_file(os.path.join(d, "reference.safetensors")), text)

    def eager(self, name):
        model, ex = M.ALL[name]()
        args, kwargs = rlx_torch.split_example_inputs(ex)
        model.eval()
        with torch.no_grad():
            out = model(*args, **kwargs)
        return model, args, kwargs, torch.utils._pytree.tree_flatten(out)[0]

    def test_json_validates(self):
        for (name, lvl) in self.docs:
            with self.subTest(model=name, level=lvl):
                doc, _, _, _ = self.load(name, lvl)
                validate(doc)
                self.assertLess(doc["extra"]["graph_vs_eager_max_abs_err"], 1e-4)
                self.assertEqual(doc["decomposition"], lvl)
                self.assertEqual(doc["model_name"], name)

    def test_weights_file_matches_declarations_and_state_dict(self):
        for (name, lvl) in self.docs:
            with self.subTest(model=name, level=lvl):
                doc, weights, _, _ = self.load(name, lvl)
                model, *_ = self.eager(name)
                sd = model.state_dict()
                header = st.read_header(os.path.join(self.docs[name, lvl], "weights.safetensors"))
                for w in doc["weights"]:
                    self.assertIn(w["key"], weights)
                    t = weights[w["key"]]
                    self.assertEqual(list(t.shape), w["shape"], w)
                    self.assertEqual(t.dtype, DTYPES[w["dtype"]], w)
                    self.assertEqual(header[w["key"]]["shape"], w["shape"])
                    if w["kind"] == "const":
                        self.assertNotIn(w["key"], sd)
                    else:
                        self.assertTrue(torch.equal(t, sd[w["key"]]), w["key"])
                # params are weights (inputs to the graph), never baked constants
                used_params = {w["key"] for w in doc["weights"] if w["kind"] == "param"}
                params = {n for n, p in model.named_parameters()}
                self.assertEqual(used_params, params)

    def test_reference_equals_eager(self):
        for (name, lvl) in self.docs:
            with self.subTest(model=name, level=lvl):
                doc, _, ref, _ = self.load(name, lvl)
                _, args, kwargs, outs = self.eager(name)
                in_leaves = [x for x in torch.utils._pytree.tree_flatten(
                    [list(args), kwargs])[0] if isinstance(x, torch.Tensor)]
                self.assertEqual(len(in_leaves), len(doc["inputs"]))
                for i, t in zip(doc["inputs"], in_leaves):
                    self.assertTrue(torch.equal(ref["in::" + i["id"]], t), i["id"])
                self.assertEqual(len(outs), len(doc["outputs"]))
                for k, o in enumerate(outs):
                    if isinstance(o, torch.Tensor):
                        torch.testing.assert_close(ref[f"out::{k}"], o, rtol=1e-6, atol=1e-6)
                    else:
                        self.assertNotIn(f"out::{k}", ref)
                # guard against vacuous parity: outputs carry signal
                self.assertGreater(max(ref[k].float().abs().max().item()
                                       for k in ref if k.startswith("out::")), 1e-3)

    def test_graph_reproduces_reference(self):
        # Replays the JSON with torch.ops: checks arg encoding, refs and order.
        for (name, lvl) in self.docs:
            with self.subTest(model=name, level=lvl):
                doc, weights, ref, _ = self.load(name, lvl)
                inputs = {i["id"]: ref["in::" + i["id"]] for i in doc["inputs"]}
                with torch.no_grad():
                    got = run_ir(doc, weights, inputs)
                for k, (g, o) in enumerate(zip(got, doc["outputs"])):
                    if "const" in o:
                        continue
                    torch.testing.assert_close(g, ref[f"out::{k}"], rtol=1e-4, atol=1e-5)
                    self.assertEqual(list(g.shape), o["shape"])

    def test_no_inplace_ops(self):
        for (name, lvl) in self.docs:
            with self.subTest(model=name, level=lvl):
                doc, _, _, _ = self.load(name, lvl)
                for n in doc["nodes"]:
                    if n["op"] != "_getitem":
                        self.assertFalse(n["op"].split(".")[1].endswith("_"), n["op"])

    def ops(self, name, lvl):
        return collections.Counter(n["op"] for n in self.load(name, lvl)[0]["nodes"])

    def test_decomposition_levels(self):
        # BN stays whole at "high" and "aten", is decomposed at "core".
        self.assertIn("aten.native_batch_norm.default", self.ops("cnn_bn", "high"))
        self.assertIn("aten.native_batch_norm.default", self.ops("cnn_bn", "aten"))
        core = self.ops("cnn_bn", "core")
        self.assertNotIn("aten.native_batch_norm.default", core)
        self.assertTrue({"aten.rsqrt.default", "aten.sqrt.default"} & core.keys())
        self.assertIn("aten.convolution.default", core)
        # silu: decomposed at core, whole at high; group norm core at both
        misc_core, misc_high = self.ops("cnn_misc", "core"), self.ops("cnn_misc", "high")
        self.assertNotIn("aten.silu.default", misc_core)
        self.assertIn("aten.sigmoid.default", misc_core)
        self.assertIn("aten.silu.default", misc_high)
        self.assertIn("aten.native_group_norm.default", misc_high)
        self.assertNotIn("aten.hardswish.default", misc_high)
        self.assertIn("aten.hardswish.default", self.ops("cnn_misc", "aten"))
        # high keeps layer norm / softmax / embedding / gelu whole
        gpt = self.ops("gpt", "high")
        for op in ("native_layer_norm", "_softmax", "embedding", "gelu"):
            self.assertIn(f"aten.{op}.default", gpt)
        # aten -> core removes non-core ops such as split.Tensor / _unsafe_view
        self.assertIn("aten._unsafe_view.default", self.ops("gpt", "aten"))
        self.assertNotIn("aten._unsafe_view.default", self.ops("gpt", "core"))
        self.assertNotIn("aten.split.Tensor", self.ops("gpt", "high"))
        # only aten/prims ops (checked by validate) and no prims leak at core/high here
        for lvl in ("core", "high"):
            for name in MODELS:
                self.assertFalse([o for o in self.ops(name, lvl) if o.startswith("prims.")])

    @unittest.skipUnless(HAVE_TORCHVISION, "python3-torchvision not installed")
    def test_resnet18_ops(self):
        ops = self.ops("resnet18", "high")
        self.assertEqual(ops["aten.convolution.default"], 20)
        self.assertEqual(ops["aten.native_batch_norm.default"], 20)
        self.assertEqual(ops["aten.relu.default"], 17)  # relu_ functionalized
        self.assertEqual(ops["aten.addmm.default"], 1)

    def test_transformer_fast_and_slow_paths(self):
        fast = self.ops("transformer_fast", "aten")
        self.assertEqual(list(fast), ["aten._transformer_encoder_layer_fwd.default"])
        slow = self.ops("transformer_slow", "high")
        self.assertNotIn("aten._transformer_encoder_layer_fwd.default", slow)
        for op in ("aten._softmax.default", "aten.native_layer_norm.default", "aten.bmm.default"):
            self.assertIn(op, slow)

    def test_gpt_specifics(self):
        doc, weights, _, text = self.load("gpt", "high")
        # -inf from masked_fill is written as valid JSON (-1e999) and parses to -inf
        self.assertIn("-1e999", text)
        fills = [n for n in doc["nodes"] if n["op"] == "aten.masked_fill.Scalar"]
        self.assertTrue(fills)
        self.assertTrue(all(f["args"][2]["float"] == -math.inf for f in fills))
        # tied head/embedding weight: one weight, recorded as an alias
        keys = [w["key"] for w in doc["weights"]]
        self.assertIn("wte.weight", keys)
        self.assertNotIn("head.weight", keys)
        self.assertEqual(doc["extra"]["weight_aliases"], {"head.weight": "wte.weight"})
        self.assertEqual([(w["key"], w["kind"]) for w in doc["weights"] if w["kind"] != "param"],
                         [("mask", "buffer")])
        self.assertEqual(doc["inputs"][0]["dtype"], "i64")

    def test_structured_outputs_kwargs_and_constants(self):
        doc, weights, ref, _ = self.load("multi_out", "high")
        self.assertEqual([i["id"] for i in doc["inputs"]], ["x", "pair_0", "pair_1", "bias"])
        self.assertEqual(doc["extra"]["output_structure"],
                         {"dict": [["h", {"leaf": 0}],
                                   ["stats", {"tuple": [{"leaf": 1}, {"leaf": 2}]}],
                                   ["n", {"leaf": 3}]]})
        self.assertEqual(doc["outputs"][3], {"const": {"int": 3}})
        consts = [w for w in doc["weights"] if w["kind"] == "const"]
        self.assertEqual(len(consts), 1)
        self.assertTrue(torch.equal(weights[consts[0]["key"]], torch.tensor([1.0, -1.0])))
        buffers = [w for w in doc["weights"] if w["kind"] == "buffer"]
        self.assertEqual([(b["key"], b["shape"]) for b in buffers], [("scale", [])])
        # python scalar kwargs are baked in: alpha=0.25 appears as a float arg
        self.assertIn({"float": 0.25}, [a for n in doc["nodes"] for a in n["args"]])


class SmallCases(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rlx_torch_small_")
        self.addCleanup(self.tmp.cleanup)

    def export(self, model, ex, **kw):
        d = os.path.join(self.tmp.name, "m")
        doc = rlx_torch.export(model, ex, d, **kw)
        validate(doc)
        return doc, st.load_file(os.path.join(d, "weights.safetensors")), \
            st.load_file(os.path.join(d, "reference.safetensors"))

    def test_split_example_inputs_forms(self):
        x, y = torch.ones(1), torch.zeros(1)
        f = rlx_torch.split_example_inputs
        self.assertEqual(f(x), ((x,), {}))
        self.assertEqual(f((x, y)), ((x, y), {}))
        self.assertEqual(f([x, {"k": y}]), ((x,), {"k": y}))
        self.assertEqual(f(((x, y), {"k": 1})), ((x, y), {"k": 1}))
        self.assertEqual(f({"k": y}), ((), {"k": y}))
        self.assertEqual(f((x,), kwargs={"k": 2}), ((x,), {"k": 2}))

    def test_dynamic_dims(self):
        m = nn.Linear(4, 3)
        doc, _, _ = self.export(m, (torch.randn(2, 5, 4),), dynamic={0: {0: 0, -2: 1}})
        self.assertEqual(doc["inputs"][0]["dynamic"], [0, 1, -1])
        self.assertEqual(doc["inputs"][0]["shape"], [2, 5, 4])  # example sizes kept
        doc, _, _ = self.export(m, (torch.randn(2, 4),))
        self.assertEqual(doc["inputs"][0]["dynamic"], [-1, -1])
        with self.assertRaises(ValueError):
            self.export(m, (torch.randn(2, 4),), dynamic={0: {2: 0}})
        with self.assertRaises(ValueError):
            self.export(m, (torch.randn(2, 4),), dynamic={1: {0: 0}})

    def test_bad_level(self):
        with self.assertRaises(ValueError):
            self.export(nn.ReLU(), (torch.randn(2),), decomposition="prims")

    def test_input_mutation_and_inplace_are_functionalized(self):
        class M(nn.Module):
            def forward(self, x):
                x.mul_(2)
                y = torch.relu_(x + 1)
                y.add_(0.5)
                return y

        x = torch.randn(3, 4)
        doc, _, ref = self.export(M(), (x.clone(),), decomposition="aten")
        ops = [n["op"] for n in doc["nodes"]]
        self.assertFalse([o for o in ops if o.split(".")[1].endswith("_")], ops)
        torch.testing.assert_close(ref["out::0"], torch.relu(x * 2 + 1) + 0.5)
        # the example input itself is exported unmodified
        self.assertTrue(torch.equal(ref["in::x"], x))
        self.assertTrue(any("mutated" in n for n in doc["extra"]["notes"]))
        self.assertEqual(doc["extra"]["graph_vs_eager_max_abs_err"], 0.0)

    def test_identity_and_weight_outputs(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(2))

            def forward(self, x):
                return x, self.w, [x * 2]

        doc, _, ref = self.export(M(), (torch.randn(2),))
        self.assertEqual([o["ref"] for o in doc["outputs"]][:2], ["x", "p_w"])
        self.assertEqual(doc["extra"]["output_structure"],
                         {"tuple": [{"leaf": 0}, {"leaf": 1}, {"list": [{"leaf": 2}]}]})

    def test_namedtuple_and_none_outputs(self):
        NT = __import__("collections").namedtuple("NT", "a b")

        class M(nn.Module):
            def forward(self, x):
                return NT(x + 1, None), x.sum()

        doc, _, ref = self.export(M(), (torch.randn(2),))
        self.assertEqual(doc["outputs"][1], {"const": {"none": True}})
        self.assertEqual(doc["outputs"][2]["shape"], [])
        self.assertEqual(doc["extra"]["output_structure"],
                         {"tuple": [{"namedtuple": "NT", "fields": ["a", "b"],
                                     "items": [{"leaf": 0}, {"leaf": 1}]}, {"leaf": 2}]})
        self.assertEqual(sorted(ref), ["in::x", "out::0", "out::2"])

    def test_same_tensor_twice_is_one_input(self):
        torch.manual_seed(0)
        mha = nn.MultiheadAttention(8, 2, batch_first=True)
        x = torch.randn(1, 3, 8)
        doc, _, ref = self.export(mha, (x, x, x), kwargs={"need_weights": False})
        self.assertEqual([i["id"] for i in doc["inputs"]], ["query"])
        # identity preserved -> 1.13 picks the fused fast path
        self.assertIn("aten._native_multi_head_attention.default", [n["op"] for n in doc["nodes"]])
        with torch.no_grad():
            want = mha.eval()(x, x, x, need_weights=False)[0]
        torch.testing.assert_close(ref["out::0"], want)
        doc, _, _ = self.export(mha, (x, x.clone(), x.clone()), kwargs={"need_weights": False})
        self.assertEqual([i["id"] for i in doc["inputs"]], ["query", "key", "value"])

    def test_data_dependent_python_value_is_an_error(self):
        class M(nn.Module):
            def forward(self, x):
                return x * x.max().item()

        with self.assertRaises(RuntimeError):
            self.export(M(), (torch.randn(3),))

    def test_tuple_producing_node_uses_getitem(self):
        class M(nn.Module):
            def forward(self, x):
                v, i = torch.max(x, dim=1)
                return v, i

        doc, _, ref = self.export(M(), (torch.randn(3, 5),), decomposition="aten")
        mx = [n for n in doc["nodes"] if n["op"] == "aten.max.dim"][0]
        self.assertEqual(mx["out"], [{"shape": [3], "dtype": "f32"}, {"shape": [3], "dtype": "i64"}])
        gets = [n for n in doc["nodes"] if n["op"] == "_getitem"]
        self.assertEqual([g["args"] for g in gets], [[{"ref": mx["id"]}, {"int": 0}],
                                                     [{"ref": mx["id"]}, {"int": 1}]])
        self.assertEqual(ref["out::1"].dtype, torch.int64)

    def test_training_mode_restored_and_dropout_removed(self):
        m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.9))
        m.train()
        doc, _, ref = self.export(m, (torch.randn(4, 3),), decomposition="aten")
        self.assertTrue(m.training)
        self.assertFalse([n for n in doc["nodes"] if "dropout" in n["op"] or "bernoulli" in n["op"]])

    def test_non_f32_dtypes(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4).to(torch.bfloat16)

            def forward(self, x, mask):
                return self.lin(x.to(torch.bfloat16)).float() * mask

        doc, w, ref = self.export(M(), (torch.randn(2, 4), torch.tensor([True, False, True, True])))
        self.assertEqual({x["dtype"] for x in doc["weights"]}, {"bf16"})
        self.assertEqual(w["lin.weight"].dtype, torch.bfloat16)
        self.assertEqual(doc["inputs"][1]["dtype"], "bool")
        self.assertIn({"dtype": "bf16"}, [a for n in doc["nodes"]
                                          for a in list(n["args"]) + list(n["kwargs"].values())])


class Safetensors(unittest.TestCase):
    def test_roundtrip_all_dtypes(self):
        ts = {"f32": torch.randn(2, 3), "f16": torch.randn(5).half(),
              "bf16": torch.randn(4).bfloat16(), "f64": torch.randn(1, 1).double(),
              "i64": torch.arange(-3, 3), "i32": torch.arange(4, dtype=torch.int32),
              "i16": torch.tensor([-7, 9], dtype=torch.int16),
              "i8": torch.tensor([-128, 127], dtype=torch.int8),
              "u8": torch.tensor([0, 255], dtype=torch.uint8),
              "bool": torch.tensor([True, False, True]), "scalar": torch.tensor(1.5),
              "empty": torch.zeros(0, 3), "c64": torch.randn(2, dtype=torch.complex64),
              "noncontig": torch.randn(3, 4).t()}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.safetensors")
            st.save_file(ts, p, metadata={"a": 1})
            back = st.load_file(p)
            with open(p, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                self.assertEqual(n % 8, 0)
            self.assertEqual(st.read_header(p)["__metadata__"], {"a": "1"})
            self.assertEqual(set(back), set(ts))
            for k, t in ts.items():
                self.assertEqual(back[k].dtype, t.dtype, k)
                self.assertTrue(torch.equal(back[k], t), k)
            hdr = st.read_header(p)
            self.assertEqual(hdr["bf16"]["dtype"], "BF16")
            self.assertEqual(hdr["scalar"]["shape"], [])


class CommandLine(unittest.TestCase):
    def test_cli(self):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
            r = subprocess.run(
                [sys.executable, "-m", "rlx_torch",
                 os.path.join(HERE, "rlx_torch_models.py") + ":mlp", "-o", d,
                 "--decomposition", "aten", "--dynamic", '{"0": {"0": 0}}'],
                env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("aten.addmm.default", r.stdout)
            with open(os.path.join(d, "torch-ir.json")) as f:
                doc = json.load(f)
            validate(doc)
            self.assertEqual(doc["model_name"], "mlp")
            self.assertEqual(doc["decomposition"], "aten")
            self.assertEqual(doc["inputs"][0]["dynamic"], [0, -1])
            for fn in ("weights.safetensors", "reference.safetensors"):
                self.assertTrue(os.path.exists(os.path.join(d, fn)))


class Validator(unittest.TestCase):
    """The validator must reject broken documents (else the tests above are vacuous)."""

    def good(self):
        return {"format": "rlx-torch-ir", "version": 1, "model_name": "m", "producer": "p",
                "decomposition": "high",
                "inputs": [{"id": "x", "shape": [2], "dtype": "f32"}],
                "weights": [{"id": "w", "key": "w", "shape": [2], "dtype": "f32", "kind": "param"}],
                "nodes": [{"id": "a", "op": "aten.add.Tensor", "args": [{"ref": "x"}, {"ref": "w"}],
                           "kwargs": {"alpha": {"int": 1}}, "out": {"shape": [2], "dtype": "f32"}}],
                "outputs": [{"ref": "a", "shape": [2], "dtype": "f32"}]}

    def test_rejects(self):
        validate(self.good())
        breakers = [
            lambda d: d["nodes"][0].update(op="add"),
            lambda d: d["nodes"][0].update(op="aten.add"),
            lambda d: d["nodes"][0]["args"].append({"ref": "zz"}),
            lambda d: d["nodes"][0]["args"].append({"int": 1, "float": 2.0}),
            lambda d: d["nodes"][0]["kwargs"].update(alpha={"dtype": "float32"}),
            lambda d: d["weights"][0].update(kind="parameter"),
            lambda d: d["inputs"][0].update(dynamic=[0, 0]),
            lambda d: d["outputs"][0].update(shape=[3]),
            lambda d: d.pop("producer"),
            lambda d: d.update(version=2),
            lambda d: d["nodes"].append(dict(d["nodes"][0])),
        ]
        for i, b in enumerate(breakers):
            d = self.good()
            b(d)
            with self.subTest(i=i), self.assertRaises(AssertionError):
                validate(d)


if __name__ == "__main__":
    unittest.main()
