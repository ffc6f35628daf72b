"""Byte-level writers for the formats rlx reads (safetensors, npy, GGUF, JSON
documents), in the Python standard library only, so the hostile suite can
write well-formed files and then break them on purpose."""
import json
import struct

DTYPE_SIZES = {"F32": 4, "F16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}


def f32_bytes(values):
    return struct.pack("<%df" % len(values), *values)


def i64_bytes(values):
    return struct.pack("<%dq" % len(values), *values)


def safetensors(tensors, header_extra=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> file bytes."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if header_extra:
        header.update(header_extra)
    return safetensors_raw(json.dumps(header).encode(), data)


def safetensors_raw(header_bytes, data, header_len=None):
    n = len(header_bytes) if header_len is None else header_len
    return struct.pack("<Q", n) + header_bytes + data


def npy(descr, shape, data, fortran="False", version=(1, 0), magic=b"\x93NUMPY"):
    """shape: the header's tuple literal as text, e.g. "(2, 3)"."""
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    return npy_raw(header.encode("latin1"), data, version, magic)


def npy_raw(header, data, version=(1, 0), magic=b"\x93NUMPY", header_len=None):
    pre = 10 if version[0] == 1 else 12
    pad = (64 - (pre + len(header) + 1) % 64) % 64
    header = header + b" " * pad + b"\n"
    n = len(header) if header_len is None else header_len
    size = struct.pack("<H", n) if version[0] == 1 else struct.pack("<I", n)
    return magic + bytes(version) + size + header + data


# GGUF value types (ggml's gguf_type).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_PACK = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
         BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    """Encodes a value of type t; arrays are (elem_type, [values])."""
    if t == STRING:
        return gguf_str(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(_PACK[t], v)


def gguf(kvs, tensors, alignment=32, version=3):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, ne, raw bytes)]
    with ne in ggml order (ne[0] first). Returns the file bytes and the byte
    positions of interesting fields (for patching)."""
    pos = {}
    out = bytearray(struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs)))
    for key, t, v in kvs:
        pos["kv:" + key] = len(out)
        out += gguf_str(key) + struct.pack("<I", t) + gguf_value(t, v)
    offset, offsets = 0, []
    for name, gt, ne, raw in tensors:
        pos["tensor:" + name] = len(out)
        out += gguf_str(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, offset)
        offsets.append(offset)
        offset += (len(raw) + alignment - 1) // alignment * alignment
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    pos["data"] = len(out)
    for (name, gt, ne, raw), off in zip(tensors, offsets):
        out += b"\0" * (pos["data"] + off - len(out)) + raw
    return bytes(out), pos


def dump_json(doc):
    return json.dumps(doc).encode()
