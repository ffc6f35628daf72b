"""Computes PyTorch goldens for the C++ tests, in one process per test suite.

argv: cases.json inputs.safetensors outputs.safetensors
cases.json: [{"name": ..., "code": ...}]. Each case's code runs with `torch`,
`F` (torch.nn.functional) and `x` (dict of its input tensors) in scope and
assigns `y`: a tensor or a tuple/list of tensors, written as "<name>/<i>".
Safetensors is read and written here with numpy only (no pip packages).
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

NP = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I8": np.int8, "I16": np.int16,
      "I32": np.int32, "I64": np.int64, "U8": np.uint8, "BOOL": np.bool_}


def read_st(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        buf = raw[8 + n + b:8 + n + en]
        if e["dtype"] == "BF16":
            u16 = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            t = torch.from_numpy(u16.view(np.float32).copy()).to(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(buf, dtype=NP[e["dtype"]]).copy())
        out[name] = t.reshape(e["shape"])
    return out


def write_st(path, tensors):
    rev = {np.dtype(v): k for k, v in NP.items()}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            a = (t.float().numpy().view(np.uint32) >> 16).astype(np.uint16)
            dt = "BF16"
        else:
            a = t.numpy()
            dt = rev[a.dtype]
        b = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    torch.set_num_threads(1)
    cases = json.load(open(sys.argv[1]))
    inputs = read_st(sys.argv[2])
    outs = {}
    for case in cases:
        name = case["name"]
        x = {k.split("/", 1)[1]: v for k, v in inputs.items() if k.split("/", 1)[0] == name}
        scope = {"torch": torch, "F": F, "x": x, "np": np}
        try:
            exec(case["code"], scope)
        except Exception as e:  # report which case failed, then fail the suite
            sys.stderr.write(f"golden case '{name}' failed: {e}\n")
            raise
        y = scope["y"]
        ys = list(y) if isinstance(y, (tuple, list)) else [y]
        for i, t in enumerate(ys):
            outs[f"{name}/{i}"] = t
    write_st(sys.argv[3], outs)


if __name__ == "__main__":
    main()
