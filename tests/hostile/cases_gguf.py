"""Hostile GGUF files: a tiny valid llama model, then truncations, lying
counts and offsets, bad types, nested arrays, and metadata that lies about the
model (`rlx inspect` reads the file; `rlx run --tokens` builds the model)."""
import struct

import formats as F

ARCH = "llama"
VOCAB, EMBD, HEADS, KV_HEADS, HEAD_DIM, FF = 16, 8, 2, 1, 4, 16


def weights(name, dims):
    """Deterministic f32 data for a tensor of PyTorch-order `dims`."""
    n = 1
    for d in dims:
        n *= d
    if name.endswith("norm.weight"):
        return F.f32_bytes([1.0] * n)
    return F.f32_bytes([0.05 * ((i * 37 + len(name)) % 11 - 5) for i in range(n)])


def metadata(**override):
    m = {
        "general.architecture": (F.STRING, ARCH),
        ARCH + ".block_count": (F.U32, 1),
        ARCH + ".embedding_length": (F.U32, EMBD),
        ARCH + ".feed_forward_length": (F.U32, FF),
        ARCH + ".attention.head_count": (F.U32, HEADS),
        ARCH + ".attention.head_count_kv": (F.U32, KV_HEADS),
        ARCH + ".rope.freq_base": (F.F32, 10000.0),
        ARCH + ".attention.layer_norm_rms_epsilon": (F.F32, 1e-5),
        ARCH + ".context_length": (F.U32, 64),
        "tokenizer.ggml.model": (F.STRING, "llama"),
        "tokenizer.ggml.bos_token_id": (F.U32, 1),
        "tokenizer.ggml.eos_token_id": (F.U32, 2),
        "tokenizer.ggml.tokens": (F.ARRAY, (F.STRING, ["<unk>", "<s>", "</s>"] + [
            ("\u2581" if i % 2 else "") + chr(ord("a") + i // 2) for i in range(VOCAB - 3)])),
        "tokenizer.ggml.scores": (F.ARRAY, (F.F32, [-float(i) for i in range(VOCAB)])),
        "tokenizer.ggml.token_type": (F.ARRAY, (F.I32, [2, 3, 3] + [1] * (VOCAB - 3))),
    }
    m.update(override)
    return [(k, t, v) for k, (t, v) in m.items() if t is not None]


def tensors(**override):
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    dims = {
        "token_embd.weight": [VOCAB, EMBD],
        "blk.0.attn_norm.weight": [EMBD],
        "blk.0.attn_q.weight": [q, EMBD],
        "blk.0.attn_k.weight": [kv, EMBD],
        "blk.0.attn_v.weight": [kv, EMBD],
        "blk.0.attn_output.weight": [EMBD, q],
        "blk.0.ffn_norm.weight": [EMBD],
        "blk.0.ffn_gate.weight": [FF, EMBD],
        "blk.0.ffn_up.weight": [FF, EMBD],
        "blk.0.ffn_down.weight": [EMBD, FF],
        "output_norm.weight": [EMBD],
        "output.weight": [VOCAB, EMBD],
    }
    dims.update(override)
    return [(n, 0, list(reversed(d)), weights(n, d)) for n, d in dims.items() if d is not None]


def model(meta=None, ts=None, **kw):
    return F.gguf(meta or metadata(), ts or tensors(), **kw)


def patch(data, at, fmt, value):
    return data[:at] + struct.pack(fmt, value) + data[at + struct.calcsize(fmt):]


def file_cases():
    """Files the GGUF reader itself must reject."""
    good, pos = model()
    kv = lambda key: pos["kv:" + key] + 8 + len(key)  # noqa: E731  (the value type field)
    tensor = lambda name: pos["tensor:" + name] + 8 + len(name)  # noqa: E731  (n_dims)
    last = tensors()[-1]
    end = len(good) - ((32 - len(last[3]) % 32) % 32)  # trailing padding is optional
    cuts = sorted({0, 3, 4, 7, 8, 16, 23, 24, 30} | {end * k // 23 for k in range(1, 23)} | {end - 1})
    out = [("trunc_%d" % n, good[:n]) for n in cuts]
    toks = kv("tokenizer.ggml.tokens")
    emb = tensor("token_embd.weight")
    out += [
        ("magic", patch(good, 0, "<I", 0x46554748)),
        ("version_1", patch(good, 4, "<I", 1)),
        ("version_99", patch(good, 4, "<I", 99)),
        ("big_endian", patch(good, 4, "<I", 0x03000000)),
        ("tensor_count_huge", patch(good, 8, "<Q", 1 << 62)),
        ("kv_count_huge", patch(good, 16, "<Q", (1 << 64) - 1)),
        ("kv_count_short", patch(good, 16, "<Q", 3)),  # the rest parses as tensor infos
        ("key_length_huge", patch(good, 24, "<Q", 1 << 60)),
        ("value_type_invalid", patch(good, kv("general.architecture"), "<I", 13)),
        ("string_length_huge", patch(good, kv("general.architecture") + 4, "<Q", 1 << 62)),
        ("array_count_huge", patch(good, toks + 8, "<Q", 1 << 61)),
        ("array_elem_type_invalid", patch(good, toks + 4, "<I", 77)),
        ("bool_byte_2", model(metadata(**{"x.flag": (F.BOOL, 2)}))[0]),
        ("array_of_arrays", model(metadata(**{"x.nested": (F.ARRAY, (F.ARRAY, [(F.I32, [1, 2])]))}))[0]),
        ("duplicate_key", model(metadata() + [("general.architecture", F.STRING, "llama")])[0]),
        ("duplicate_tensor", model(ts=tensors() + tensors()[:1])[0]),
        ("alignment_zero", model(metadata(**{"general.alignment": (F.U32, 0)}))[0]),
        ("alignment_not_pow2", model(metadata(**{"general.alignment": (F.U32, 48)}))[0]),
        ("alignment_not_u32", model(metadata(**{"general.alignment": (F.STRING, "32")}))[0]),
        ("tensor_n_dims_5", patch(good, emb, "<I", 5)),
        ("tensor_dim_huge", patch(good, emb + 4, "<Q", 1 << 62)),
        ("tensor_dims_overflow", patch(patch(good, emb + 4, "<Q", 1 << 40), emb + 12, "<Q", 1 << 40)),
        ("tensor_type_unknown", patch(good, emb + 20, "<I", 99)),
        ("tensor_type_retired", patch(good, emb + 20, "<I", 4)),
        ("tensor_not_block_multiple", patch(good, emb + 20, "<I", 8)),  # q8_0 with ne0 = 8
        ("tensor_offset_misaligned", patch(good, emb + 24, "<Q", 4)),
        ("tensor_offset_past_end", patch(good, emb + 24, "<Q", 1 << 40)),
        ("tensor_offset_overflows", patch(good, emb + 24, "<Q", (1 << 64) - 32)),
        ("tensors_overlap", patch(good, tensor("output.weight") + 24, "<Q", 0)),
        ("name_too_long", model(ts=tensors() + [("n" * 100, 0, [1], F.f32_bytes([1.0]))])[0]),
    ]
    return out


def model_cases():
    """Structurally valid files whose metadata lies about the model."""
    m = lambda **kv: model(metadata(**kv))[0]  # noqa: E731
    a = lambda k: ARCH + "." + k  # noqa: E731
    return [
        ("no_architecture", m(**{"general.architecture": (None, None)})),
        ("architecture_unknown", m(**{"general.architecture": (F.STRING, "gpt9")})),
        ("architecture_not_string", m(**{"general.architecture": (F.U32, 7)})),
        ("block_count_huge", m(**{a("block_count"): (F.U64, 1 << 40)})),
        ("block_count_zero", m(**{a("block_count"): (F.U32, 0)})),
        ("head_count_zero", m(**{a("attention.head_count"): (F.U32, 0)})),
        ("head_count_kv_not_divisor", m(**{a("attention.head_count_kv"): (F.U32, 3)})),
        ("head_dim_huge", m(**{a("attention.key_length"): (F.U64, 1 << 62)})),
        ("embedding_length_lies", m(**{a("embedding_length"): (F.U32, 12)})),
        ("embedding_length_negative", m(**{a("embedding_length"): (F.I64, -8)})),
        ("embedding_length_string", m(**{a("embedding_length"): (F.STRING, "8")})),
        ("rope_dims_odd", m(**{a("rope.dimension_count"): (F.U32, 3)})),
        ("rope_base_nan", m(**{a("rope.freq_base"): (F.F32, float("nan"))})),
        ("tensor_missing", model(ts=tensors(**{"blk.0.ffn_up.weight": None}))[0]),
        ("tensor_wrong_shape", model(ts=tensors(**{"blk.0.attn_q.weight": [EMBD, EMBD + 1]}))[0]),
    ]


def tokenizer_cases():
    """Valid files whose tokenizer metadata lies (`rlx tokenize` reads it)."""
    m = lambda **kv: model(metadata(**kv))[0]  # noqa: E731
    return [
        ("tokens_missing", m(**{"tokenizer.ggml.tokens": (None, None)})),
        ("tokens_not_strings", m(**{"tokenizer.ggml.tokens": (F.ARRAY, (F.I32, list(range(VOCAB))))})),
        ("scores_short", m(**{"tokenizer.ggml.scores": (F.ARRAY, (F.F32, [0.0]))})),
        ("token_type_short", m(**{"tokenizer.ggml.token_type": (F.ARRAY, (F.I32, [1]))})),
        ("bos_out_of_vocab", m(**{"tokenizer.ggml.bos_token_id": (F.U32, 1 << 30)})),
        ("tokenizer_model_unknown", m(**{"tokenizer.ggml.model": (F.STRING, "morse")})),
    ]


def add(s):
    good = s.file("gguf/good.gguf", model()[0])
    s.control("gguf/good inspect", ["inspect", good])
    out = s.out("gguf_good")
    s.control("gguf/good run", ["run", good, "--tokens", "1 3 4", "--out", out], out)
    s.control("gguf/good tokenize", ["tokenize", good, "-p", "ab"])
    out = s.out("gguf_token_out_of_vocab")
    s.case("gguf/token_out_of_vocab", ["run", good, "--tokens", "1 99", "--out", out],
           ["token 99"], out)
    for name, data in file_cases():
        p = s.file("gguf/%s.gguf" % name, data)
        s.case("gguf/%s inspect" % name, ["inspect", p], [name + ".gguf"])
        out = s.out("gguf_" + name)
        s.case("gguf/%s run" % name, ["run", p, "--tokens", "1 3", "--out", out], [name + ".gguf"],
               out)
    for name, data in model_cases():
        p = s.file("gguf/%s.gguf" % name, data)
        out = s.out("gguf_" + name)
        s.case("gguf/%s run" % name, ["run", p, "--tokens", "1 3", "--out", out], [name + ".gguf"],
               out)
    for name, data in tokenizer_cases():
        p = s.file("gguf/%s.gguf" % name, data)
        s.case("gguf/%s tokenize" % name, ["tokenize", p, "-p", "ab"], [name + ".gguf"])
