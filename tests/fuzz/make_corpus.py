#!/usr/bin/python3
"""Writes the seed corpora and dictionaries of the libFuzzer targets into OUT:

  OUT/<target>/...   seeds: every file of the hostile suite (tests/hostile; the
                     good files and the broken ones) sorted by format, plus one
                     small graph per IR op (graph_json) and one torch-ir.json per
                     aten op the importer registers (torch_ir)
  OUT/<target>.dict  libFuzzer dictionaries for the JSON formats: keys, op
                     names, dtypes, attribute and enum names, read from
                     include/rlx/ops.def and src/frontends/torch

Given the rlx binary, the hostile suite also exports an .mlpackage (and breaks
copies of it), and every graph seed the CoreML exporter takes is exported too;
the seeds of fuzz_mlpackage are model.mlmodel and weight.bin joined the way the
target splits its input ([u32 n][n bytes of model][weight.bin]). Without it
the mlpackage corpus holds only two hand-made seeds.

  make_corpus.py OUT [--rlx RLX]
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
import gen_hostile  # noqa: E402

TARGETS = ["safetensors", "npy", "gguf", "graph_json", "torch_ir", "mlpackage", "onnx"]
MAX_SEED = 256 * 1024  # bigger hostile files (deep nesting, huge ranks) stay out
DTYPES = ["f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "bool", "c64"]


class Corpus:
    def __init__(self, out):
        self.out = out
        self.count = {t: 0 for t in TARGETS}
        for t in TARGETS:
            os.makedirs(os.path.join(out, t), exist_ok=True)

    def add(self, target, name, data):
        if len(data) > MAX_SEED:
            return
        if isinstance(data, str):
            data = data.encode()
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        with open(os.path.join(self.out, target, safe), "wb") as f:
            f.write(data)
        self.count[target] += 1


def read(path):
    with open(path, "rb") as f:
        return f.read()


def mlpackage_seed(model, weights):
    return struct.pack("<I", len(model)) + model + (weights or b"")


def from_hostile(c, rlx):
    tmp = tempfile.mkdtemp(prefix="rlx-corpus-")
    try:
        gen_hostile.generate(tmp, rlx)
        for path in sorted(glob.glob(os.path.join(tmp, "**", "*"), recursive=True)):
            if not os.path.isfile(path) or ".mlpackage" in path:
                continue
            rel = os.path.relpath(path, tmp)
            base = os.path.basename(path)
            target = ("safetensors" if base.endswith(".safetensors") else
                      "npy" if base.endswith(".npy") else
                      "gguf" if base.endswith(".gguf") else
                      "torch_ir" if base == "torch-ir.json" else
                      "graph_json" if base.endswith(".rlx.json") else None)
            if target:
                c.add(target, rel, read(path))
        for pkg in sorted(glob.glob(os.path.join(tmp, "**", "*.mlpackage"), recursive=True)):
            model = os.path.join(pkg, "Data", "com.apple.CoreML", "model.mlmodel")
            weights = os.path.join(pkg, "Data", "com.apple.CoreML", "weights", "weight.bin")
            if os.path.isfile(model):
                c.add("mlpackage", os.path.relpath(pkg, tmp),
                      mlpackage_seed(read(model), read(weights) if os.path.isfile(weights) else None))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ops_def():
    """(op names, attribute names, enum values) of include/rlx/ops.def."""
    text = read(os.path.join(ROOT, "include", "rlx", "ops.def")).decode()
    ops = re.findall(r'^RLX_OP\(\w+, "(\w+)"', text, re.M)
    attrs = set(re.findall(r"\b(?:INT|INTS|FLOAT|FLOATS|BOOL|DTYPE|STR|ENUM|OPT_INT|OPT_FLOAT)\((\w+)", text))
    enums = set()
    for line in re.findall(r"^RLX_ENUM\((.*)\)", text, re.M):
        enums.update(x.strip() for x in line.split(",")[1:])
    return ops, sorted(attrs), sorted(enums)


def aten_ops():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "src", "frontends", "torch", "*.cc")):
        names.update(re.findall(r'"(aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)"', read(path).decode()))
    return sorted(names)


def graph_seeds(c, ops):
    """A graph per op: x[2,3] (and y[2,3] for binary ops) -> op; the declared
    result shape is a guess, which is enough to reach the op's inference."""
    for op in ops:
        for arity in (1, 2):
            nodes = [{"op": "input", "name": "x", "shape": [2, 3], "dtype": "f32", "inputs": []},
                     {"op": "input", "name": "y", "shape": [2, 3], "dtype": "f32", "inputs": []},
                     {"op": op, "inputs": [0, 1][:arity], "shape": [2, 3], "dtype": "f32"}]
            doc = {"format": "rlx-graph", "version": 3, "nodes": nodes,
                   "outputs": [{"name": "out", "node": 2}]}
            c.add("graph_json", "op_%s_%d.rlx.json" % (op, arity), json.dumps(doc))
    control_seeds(c)


def control_seeds(c):
    """An if and a loop with their bodies (graph documents nested in the node)."""
    def doc(nodes, outputs):
        return {"format": "rlx-graph", "version": 3, "nodes": nodes,
                "outputs": [{"name": n, "node": i} for n, i in outputs]}

    def inp(name, shape, dtype="f32"):
        return {"op": "input", "name": name, "shape": shape, "dtype": dtype, "inputs": []}

    def result(node, index, shape, dtype="f32"):
        return {"op": "result", "inputs": [node], "attrs": {"index": index}, "shape": shape,
                "dtype": dtype}

    then = doc([inp("capture.0", [2]), {"op": "neg", "inputs": [0], "shape": [2], "dtype": "f32"}],
               [("o", 1)])
    other = doc([inp("capture.0", [2])], [("o", 0)])
    c.add("graph_json", "control_if.rlx.json", json.dumps(doc(
        [inp("c", [], "bool"), inp("x", [2]),
         {"op": "if", "inputs": [0, 1], "attrs": {"count": "k"},
          "results": [{"shape": [2], "dtype": "f32"}], "bodies": [then, other]},
         result(2, 0, [2])], [("y", 3)])))
    body = doc([inp("i", [], "i64"), inp("cond", [], "bool"), inp("acc", [2]),
                {"op": "add", "inputs": [2, 2], "shape": [2], "dtype": "f32"}],
               [("cond", 1), ("acc", 3), ("scan", 3)])
    c.add("graph_json", "control_loop.rlx.json", json.dumps(doc(
        [inp("trips", [], "i64"), inp("c", [], "bool"), inp("x", [2]),
         {"op": "loop", "inputs": [0, 1, 2], "attrs": {"carried": 1, "count": "t"},
          "results": [{"shape": [2], "dtype": "f32"}, {"shape": ["t", 2], "dtype": "f32"}],
          "bodies": [body]},
         result(3, 0, [2]), result(3, 1, ["t", 2])], [("acc", 4), ("scans", 5)])))


def torch_seeds(c, names):
    """A torch-ir.json per registered aten op, applied to x[2,3] (and w[2,3])."""
    for name in names:
        op = name if name.count(".") == 2 else name + ".default"
        for args in ([{"ref": "x"}], [{"ref": "x"}, {"ref": "w"}], [{"ref": "x"}, {"int": 1}]):
            doc = {"format": "rlx-torch-ir", "version": 1, "model_name": "seed",
                   "decomposition": "high",
                   "inputs": [{"id": "x", "shape": [2, 3], "dtype": "f32"}],
                   "weights": [{"id": "w", "key": "w", "shape": [2, 3], "dtype": "f32",
                                "kind": "param"}],
                   "nodes": [{"id": "n", "op": op, "args": args,
                              "out": {"shape": [2, 3], "dtype": "f32"}}],
                   "outputs": [{"ref": "n", "shape": [2, 3], "dtype": "f32"}]}
            c.add("torch_ir", "op_%s_%d.json" % (op, len(args)), json.dumps(doc))


def mlpackage_seeds(c, rlx):
    """Each graph seed that the CoreML exporter takes, exported by `rlx compile`."""
    tmp = tempfile.mkdtemp(prefix="rlx-corpus-ml-")
    try:
        for seed in sorted(glob.glob(os.path.join(c.out, "graph_json", "op_*.rlx.json"))):
            model = os.path.join(tmp, "model")
            os.makedirs(model, exist_ok=True)
            shutil.copy(seed, os.path.join(model, "model.rlx.json"))
            pkg = os.path.join(tmp, "out.mlpackage")
            shutil.rmtree(pkg, ignore_errors=True)
            r = subprocess.run([rlx, "compile", model, "--target", "coreml", "-o", pkg],
                               capture_output=True)
            data = os.path.join(pkg, "Data", "com.apple.CoreML")
            if r.returncode != 0 or not os.path.isfile(os.path.join(data, "model.mlmodel")):
                continue
            weights = os.path.join(data, "weights", "weight.bin")
            c.add("mlpackage", os.path.basename(seed).replace(".rlx.json", ""),
                  mlpackage_seed(read(os.path.join(data, "model.mlmodel")),
                                 read(weights) if os.path.isfile(weights) else None))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mlpackage_fallback(c):
    """Without the rlx binary: an empty input and a Model with only a spec version."""
    c.add("mlpackage", "empty", b"")
    c.add("mlpackage", "spec_version_only", mlpackage_seed(b"\x08\x06", None))


def write_dict(path, tokens):
    with open(path, "w") as f:
        for i, t in enumerate(sorted(set(tokens))):
            f.write("t%d=%s\n" % (i, json.dumps(t)))


ONNX_NODE_TESTS = "/usr/share/libonnx-testdata/data/node"


def onnx_seeds(c):
    """The ONNX node conformance models (Debian's libonnx-testdata): one small
    model per op and attribute variant, so the fuzzer starts inside every
    lowering rule. Without the package the corpus gets one hand-made model."""
    if os.path.isdir(ONNX_NODE_TESTS):
        for case in sorted(os.listdir(ONNX_NODE_TESTS)):
            p = os.path.join(ONNX_NODE_TESTS, case, "model.onnx")
            if os.path.exists(p):
                c.add("onnx", case + ".onnx", read(p))
    if c.count["onnx"] == 0:
        # ir_version 8, graph { node { input "x" output "y" op_type "Relu" } }, opset 17
        node = b"\x0a\x01x\x12\x01y\x22\x04Relu"
        graph = b"\x0a" + bytes([len(node)]) + node
        c.add("onnx", "relu.onnx", b"\x08\x08\x3a" + bytes([len(graph)]) + graph +
              b"\x42\x02\x10\x11")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rlx", help="the rlx binary (to export the .mlpackage seeds)")
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    c = Corpus(a.out)
    rlx = a.rlx if a.rlx and os.access(a.rlx, os.X_OK) else None
    if not rlx:
        print("make_corpus: no rlx binary; the mlpackage corpus gets fallback seeds only")
    from_hostile(c, rlx and os.path.abspath(rlx))
    if c.count["mlpackage"] == 0:
        mlpackage_fallback(c)
    ops, attrs, enums = ops_def()
    atens = aten_ops()
    graph_seeds(c, ops)
    torch_seeds(c, atens)
    onnx_seeds(c)
    if rlx:
        mlpackage_seeds(c, os.path.abspath(rlx))
    json_tokens = ["{", "}", "[", "]", ":", ",", "true", "false", "null", "-1", "0", "1",
                   "1e308", "-0.0", "9223372036854775807", "18446744073709551616"]
    quoted = lambda xs: ['"%s"' % x for x in xs]  # noqa: E731
    write_dict(os.path.join(a.out, "graph_json.dict"), json_tokens + quoted(
        ["format", "rlx-graph", "version", "nodes", "op", "inputs", "shape", "dtype", "name",
         "origin", "attrs", "outputs", "node", "results", "data", "bodies"] + ops + attrs + enums + DTYPES))
    write_dict(os.path.join(a.out, "torch_ir.dict"), json_tokens + quoted(
        ["format", "rlx-torch-ir", "version", "model_name", "producer", "decomposition", "high",
         "core", "inputs", "weights", "nodes", "outputs", "id", "op", "args", "kwargs", "out",
         "ref", "int", "float", "bool", "str", "dtype", "none", "list", "shape", "dynamic", "key",
         "kind", "param", "buffer", "constant", "_getitem", "tuple", "scalar"] + atens + DTYPES))
    print("make_corpus: " + ", ".join("%s %d" % (t, n) for t, n in c.count.items()) +
          " seeds in " + a.out)


if __name__ == "__main__":
    main()
