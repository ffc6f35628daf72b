"""Hostile .mlpackage directories for `rlx coreml-run` (the MIL interpreter's
package reader): a good package is exported by `rlx compile`, then copies get
a broken Manifest.json, model.mlmodel or weight.bin."""
import os
import shutil
import struct
import subprocess

import formats as F
from cases_tensors import rlx_model

N = 16  # w has >= 10 elements, so the exporter stores it as a weight.bin blob
X = F.f32_bytes([0.25 * (i % 7 - 3) for i in range(2 * N)])


def graph():
    nodes = [
        {"op": "input", "name": "x", "shape": [2, N], "dtype": "f32", "inputs": []},
        {"op": "param", "name": "w", "shape": [N], "dtype": "f32", "inputs": []},
        {"op": "add", "inputs": [0, 1], "shape": [2, N], "dtype": "f32"},
        {"op": "relu", "inputs": [2], "shape": [2, N], "dtype": "f32"},
    ]
    return {"format": "rlx-graph", "version": 2, "nodes": nodes,
            "outputs": [{"name": "y", "node": 3}]}


def patch(data, at, fmt, value):
    return data[:at] + struct.pack(fmt, value) + data[at + struct.calcsize(fmt):]


def variants(manifest, model, weights):
    """name -> {path in the package: new bytes, or None to delete it}."""
    m, w = "Data/com.apple.CoreML/model.mlmodel", "Data/com.apple.CoreML/weights/weight.bin"
    v = {
        "manifest_missing": {"Manifest.json": None},
        "manifest_not_json": {"Manifest.json": manifest[: len(manifest) // 2]},
        "manifest_deep": {"Manifest.json": b"[" * 100000 + b"]" * 100000},
        "manifest_no_root": {"Manifest.json": b'{"fileFormatVersion": "1.0.0"}'},
        "manifest_path_escapes": {"Manifest.json": manifest.replace(
            b"com.apple.CoreML/model.mlmodel", b"../../../etc/passwd")},
        "model_missing": {m: None},
        "model_empty": {m: b""},
        "model_garbage": {m: bytes((i * 131 + 7) % 256 for i in range(len(model)))},
        "weights_missing": {w: None},
        "weights_header_short": {w: weights[:40]},
        "weights_version_3": {w: patch(weights, 4, "<I", 3)},
        "weights_truncated": {w: weights[:100]},
        "blob_sentinel": {w: patch(weights, 64, "<I", 0)},
        "blob_size_lies": {w: patch(weights, 72, "<Q", 1 << 62)},
        "blob_data_past_end": {w: patch(weights, 80, "<Q", 1 << 40)},
    }
    for n in (1, 7, len(model) // 3, len(model) // 2, len(model) - 3):
        v["model_trunc_%d" % n] = {m: model[:n]}
    return v


def add(s, rlx):
    model = rlx_model(s, "mlpackage/model", F.dump_json(graph()),
                      F.safetensors([("w", "F32", [N], F.f32_bytes([0.5] * N))]))
    good = s.path("mlpackage/good.mlpackage")
    subprocess.run([rlx, "compile", model, "--target", "coreml", "-o", good], check=True,
                   capture_output=True)
    inputs = s.file("mlpackage/in.safetensors", F.safetensors([("x", "F32", [2, N], X)]))
    out = s.out("mlpackage_good")
    s.control("mlpackage/good", ["coreml-run", good, "--inputs", inputs, "--out", out], out)

    def read(rel):
        with open(os.path.join(good, rel), "rb") as f:
            return f.read()

    for name, changes in variants(read("Manifest.json"),
                                  read("Data/com.apple.CoreML/model.mlmodel"),
                                  read("Data/com.apple.CoreML/weights/weight.bin")).items():
        pkg = s.path("mlpackage/%s.mlpackage" % name)
        shutil.copytree(good, pkg)
        for rel, data in changes.items():
            if data is None:
                os.remove(os.path.join(pkg, rel))
            else:
                s.file(os.path.join(pkg, rel), data)
        out = s.out("mlpackage_" + name)
        s.case("mlpackage/" + name, ["coreml-run", pkg, "--inputs", inputs, "--out", out],
               ["mil interp"], out)
