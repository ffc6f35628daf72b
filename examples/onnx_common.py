"""What the ONNX model examples (vad/, ocr/) share: where the models are,
rlx's Python package from the build tree, safetensors with NumPy only, and a
run of the same model under ONNX Runtime (bench/ort_peer.js) for parity.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def models_dir():
    """scripts/install-models.sh's directory ($RLX_MODELS_DIR or ~/.cache/rlx-models)."""
    return os.environ.get("RLX_MODELS_DIR", os.path.expanduser("~/.cache/rlx-models"))


def model_path(*parts):
    path = os.path.join(models_dir(), *parts)
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: run scripts/install-models.sh first")
    return path


def import_rlx():
    """The rlx package: installed, or else the one in $RLX_BUILD_DIR (default build/)."""
    try:
        import rlx
    except ImportError:
        sys.path.insert(0, os.path.join(os.environ.get("RLX_BUILD_DIR", os.path.join(ROOT, "build")),
                                        "python"))
        import rlx
    return rlx


_ST = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int64): "I64",
       np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}
_NP = {v: k for k, v in _ST.items()}


def save_safetensors(tensors, path):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.asarray(a, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        b = a.tobytes()
        header[name] = {"dtype": _ST[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e], _NP[info["dtype"]]).reshape(info["shape"])
    return out


def ort_run(model, feeds):
    """`model` run once by ONNX Runtime on `feeds` ({input name: array}): {output name: array}.
    Needs node and onnxruntime-node (scripts/install-peers.sh)."""
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        save_safetensors(feeds, inp)
        subprocess.run(["node", os.path.join(ROOT, "bench", "ort_peer.js"), model, inp,
                        "--runs", "1", "--warmup", "0", "--threads", "1", "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        return load_safetensors(out)
