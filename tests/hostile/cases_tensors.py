"""Hostile safetensors and .npy files, fed to a good model as its inputs
(`rlx run MODEL --inputs BAD`) and, for safetensors, as its weights."""
import json
import os

import formats as F

X = F.f32_bytes([0.5, -1.0, 2.0, -3.0, 4.0, -5.0])  # x: f32 [2, 3]
W = F.f32_bytes([0.25, -0.5, 1.0])  # w: f32 [3]


def rlx_graph():
    """y = reshape(relu(x + w), [6]) as an rlx graph document."""
    nodes = [
        {"op": "input", "name": "x", "shape": [2, 3], "dtype": "f32", "inputs": []},
        {"op": "param", "name": "w", "shape": [3], "dtype": "f32", "inputs": []},
        {"op": "add", "inputs": [0, 1], "shape": [2, 3], "dtype": "f32"},
        {"op": "relu", "inputs": [2], "shape": [2, 3], "dtype": "f32"},
        {"op": "reshape", "inputs": [3], "shape": [6], "dtype": "f32", "attrs": {"shape": [6]}},
    ]
    return {"format": "rlx-graph", "version": 2, "nodes": nodes,
            "outputs": [{"name": "y", "node": 4}]}


def rlx_model(s, rel, graph_bytes=None, weights_bytes=None):
    """A model directory: model.rlx.json (+ weights.safetensors)."""
    s.file(os.path.join(rel, "model.rlx.json"), graph_bytes or F.dump_json(rlx_graph()))
    if weights_bytes is not False:
        s.file(os.path.join(rel, "weights.safetensors"),
               F.safetensors([("w", "F32", [3], W)]) if weights_bytes is None else weights_bytes)
    return s.path(rel)


def bad_safetensors():
    """(name, bytes) of safetensors files that are each wrong in one way."""
    good = F.safetensors([("x", "F32", [2, 3], X)])
    hdr = json.dumps({"x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode()

    def entry(**kw):
        e = {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
        e.update(kw)
        return F.safetensors_raw(json.dumps({"x": e}).encode(), X)

    out = [("trunc_%d" % n, good[:n]) for n in (0, 4, 7, 8, 20, 8 + len(hdr) - 1, 8 + len(hdr), len(good) - 1)]
    out += [
        ("len_past_end", F.safetensors_raw(hdr, X, header_len=len(hdr) + 1000)),
        ("len_huge", F.safetensors_raw(hdr, X, header_len=1 << 63)),
        ("len_short", F.safetensors_raw(hdr, X, header_len=len(hdr) - 5)),
        ("not_json", F.safetensors_raw(b"{not json at all}", X)),
        ("header_array", F.safetensors_raw(b"[1, 2, 3]", X)),
        ("deep_nesting", F.safetensors_raw(b'{"x": ' + b"[" * 100000 + b"]" * 100000 + b"}", X)),
        ("dtype_unknown", entry(dtype="F99")),
        ("dtype_not_string", entry(dtype=4)),
        ("shape_negative", entry(shape=[-2, -3])),
        ("shape_fraction", entry(shape=[2, 1.5])),
        ("shape_huge", entry(shape=[1 << 40, 1 << 40])),
        ("shape_wraps", entry(shape=[2, (1 << 63) + 3])),  # 2 * (2^63 + 3) == 6 mod 2^64
        ("shape_rank_100", entry(shape=[1] * 100)),
        ("offsets_past_end", entry(data_offsets=[0, 1 << 40])),
        ("offsets_reversed", entry(data_offsets=[24, 0])),
        ("offsets_short", entry(data_offsets=[0, 20])),
        ("offsets_not_ints", entry(data_offsets=["0", "24"])),
        ("offsets_missing", F.safetensors_raw(b'{"x": {"dtype": "F32", "shape": [2, 3]}}', X)),
        ("duplicate_key", F.safetensors_raw(hdr[:-1] + b"," + hdr[1:], X)),
        ("overlap", F.safetensors_raw(json.dumps({
            "x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "z": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}).encode(), X)),
        ("hole", F.safetensors_raw(json.dumps({
            "x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}}).encode(), X + X[:8])),
        ("metadata_not_strings", F.safetensors([("x", "F32", [2, 3], X)],
                                               {"__metadata__": {"k": [1, 2]}})),
        ("trailing_bytes", good + b"\0" * 16),
    ]
    return out


def bad_npy():
    good = F.npy("<f4", "(2, 3)", X)
    out = [("trunc_%d" % n, good[:n]) for n in (0, 5, 8, 9, 30, len(good) - 1)]
    out += [
        ("magic", F.npy("<f4", "(2, 3)", X, magic=b"\x93NUMPZ")),
        ("version_9", F.npy("<f4", "(2, 3)", X, version=(9, 0))),
        ("header_len_huge", F.npy_raw(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                      X, header_len=65535)),
        ("header_not_dict", F.npy_raw(b"[1, 2, 3]", X)),
        ("descr_complex", F.npy("<c8", "(2, 3)", X * 2)),
        ("descr_object", F.npy("|O", "(2, 3)", X)),
        ("descr_bogus", F.npy("<f3", "(2, 3)", X)),
        ("fortran_garbage", F.npy("<f4", "(2, 3)", X, fortran="Maybe")),
        ("shape_negative", F.npy("<f4", "(-2, -3)", X)),
        ("shape_fraction", F.npy("<f4", "(2, 1.5)", X)),
        ("shape_huge", F.npy("<f4", "(1099511627776, 1099511627776)", X)),
        ("shape_wraps", F.npy("<f4", "(2, 9223372036854775811)", X)),
        ("shape_rank_100", F.npy("<f4", "(" + "1, " * 100 + ")", X)),
        ("data_short", F.npy("<f4", "(2, 3)", X[:20])),
        ("data_long", F.npy("<f4", "(2, 3)", X + X)),
        ("shape_mismatch", F.npy("<f4", "(3, 2)", X)),  # reads fine; the model takes [2, 3]
        # i64 data for the f32 input: converted only with --cast-inputs.
        ("dtype_i64_for_f32", F.npy("<i8", "(2, 3)", F.i64_bytes([1, 2, 3, 4, 5, 6]))),
    ]
    return out


def add(s):
    model = rlx_model(s, "tensors/model")
    good_in = s.file("tensors/good.safetensors", F.safetensors([("x", "F32", [2, 3], X)]))
    good_npy = s.file("tensors/good.npy", F.npy("<f4", "(2, 3)", X))
    for name, path in (("tensors/good_inputs", good_in), ("tensors/good_npy", good_npy)):
        s.control(name, ["run", model, "--inputs", path, "--out", s.out(name)], s.out(name))
    for name, data in bad_safetensors():
        p = s.file("tensors/st_%s.safetensors" % name, data)
        out = s.out("st_in_" + name)
        s.case("safetensors/inputs/" + name, ["run", model, "--inputs", p, "--out", out],
               [os.path.basename(p)], out)
        d = rlx_model(s, "tensors/w_%s" % name, weights_bytes=data)
        out = s.out("st_w_" + name)
        s.case("safetensors/weights/" + name, ["run", d, "--inputs", good_in, "--out", out],
               ["w_%s/weights.safetensors" % name], out)
    for name, data in bad_npy():
        p = s.file("tensors/npy_%s.npy" % name, data)
        out = s.out("npy_" + name)
        # Shape and dtype mismatches are errors about the input, not the file.
        names = ["input 'x'"] if name in ("shape_mismatch", "dtype_i64_for_f32") else \
            [os.path.basename(p)]
        s.case("npy/" + name, ["run", model, "--inputs", p, "--out", out], names, out)
    cast = s.path("tensors/npy_dtype_i64_for_f32.npy")
    s.control("npy/dtype_i64_for_f32 --cast-inputs",
              ["run", model, "--inputs", cast, "--cast-inputs", "--out", s.out("cast")],
              s.out("cast"))
