"""Minimal safetensors reader/writer (numpy + struct only, no pip packages).

File layout: u64 little-endian header size N, N bytes of JSON header
(space-padded to a multiple of 8), then the raw little-endian tensor data.
"""
import json
import struct

import numpy as np
import torch

# torch dtype -> (safetensors dtype, numpy dtype used to get the bytes)
_TO_ST = {
    torch.float32: ("F32", np.float32),
    torch.float16: ("F16", np.float16),
    torch.bfloat16: ("BF16", np.int16),  # numpy has no bf16: move the bits
    torch.float64: ("F64", np.float64),
    torch.int64: ("I64", np.int64),
    torch.int32: ("I32", np.int32),
    torch.int16: ("I16", np.int16),
    torch.int8: ("I8", np.int8),
    torch.uint8: ("U8", np.uint8),
    torch.bool: ("BOOL", np.bool_),
    torch.complex64: ("C64", np.complex64),
}
_FROM_ST = {v[0]: (k, v[1]) for k, v in _TO_ST.items()}


def _tensor_bytes(t):
    t = t.detach().to("cpu").contiguous()
    if t.dtype not in _TO_ST:
        raise TypeError(f"safetensors: unsupported dtype {t.dtype}")
    st, npd = _TO_ST[t.dtype]
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    arr = t.numpy().astype(npd, copy=False)
    return st, arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def save_file(tensors, path, metadata=None):
    """Write a dict name -> torch.Tensor (in the given order)."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        st, data = _tensor_bytes(t)
        header[name] = {"dtype": st, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n).decode("utf-8"))


def load_file(path):
    """Read a safetensors file into a dict name -> torch.Tensor."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tdt, npd = _FROM_ST[info["dtype"]]
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=np.dtype(npd).newbyteorder("<"))
        t = torch.from_numpy(arr.astype(npd).copy()).reshape(info["shape"])
        if tdt == torch.bfloat16:
            t = t.view(torch.bfloat16)
        out[name] = t
    return out
