"""A random-weight llama GGUF file written from Python, and an independent
NumPy (float64) forward pass to check rlx against: the Python twin of
tests/support/tiny_llm.cc (same SentencePiece vocabulary scheme)."""
import struct

import numpy as np

ARCH = "llama"
CFG = dict(n_layer=2, n_embd=32, n_ff=48, n_head=4, n_head_kv=2, head_dim=8, n_vocab=50, n_rot=8,
           rope_base=10000.0, eps=1e-5)

_U32, _I32, _F32, _STRING, _ARRAY = 4, 5, 6, 8, 9


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(kind, v):
    if kind == _U32:
        return struct.pack("<I", v)
    if kind == _I32:
        return struct.pack("<i", v)
    if kind == _F32:
        return struct.pack("<f", v)
    if kind == _STRING:
        return _str(v)
    elem, items = v
    return struct.pack("<IQ", elem, len(items)) + b"".join(_value(elem, x) for x in items)


def vocab(n):
    """<unk>, <s>, </s>, then '▁a', 'a', '▁b', 'b', ... (ids 3, 4, 5, 6, ...)."""
    out = []
    for i in range(n):
        t = {0: "<unk>", 1: "<s>", 2: "</s>"}.get(i)
        if t is None:
            t = ("\u2581" if i % 2 else "") + chr(ord("a") + (i - 3) // 2 % 26)
            if i >= 3 + 52:
                t += str(i)
        out.append(t)
    return out


def make_weights(seed=1):
    c = CFG
    rng = np.random.default_rng(seed)
    d, q, kv = c["n_embd"], c["n_head"] * c["head_dim"], c["n_head_kv"] * c["head_dim"]
    w = {}

    def add(name, dims, mean, std):
        w[name] = (mean + std * rng.standard_normal(dims)).astype(np.float32)

    add("token_embd.weight", (c["n_vocab"], d), 0, 1.0)
    for layer in range(c["n_layer"]):
        b = f"blk.{layer}."
        add(b + "attn_norm.weight", (d,), 1, 0.1)
        add(b + "attn_q.weight", (q, d), 0, 0.2)
        add(b + "attn_k.weight", (kv, d), 0, 0.2)
        add(b + "attn_v.weight", (kv, d), 0, 0.2)
        add(b + "attn_output.weight", (d, q), 0, 0.2)
        add(b + "ffn_norm.weight", (d,), 1, 0.1)
        add(b + "ffn_gate.weight", (c["n_ff"], d), 0, 0.2)
        add(b + "ffn_up.weight", (c["n_ff"], d), 0, 0.2)
        add(b + "ffn_down.weight", (d, c["n_ff"]), 0, 0.2)
    add("output_norm.weight", (d,), 1, 0.1)
    add("output.weight", (c["n_vocab"], d), 0, 0.2)
    return w


def write(path, weights):
    c = CFG
    a = ARCH
    meta = [
        ("general.architecture", _STRING, a),
        (a + ".block_count", _U32, c["n_layer"]),
        (a + ".embedding_length", _U32, c["n_embd"]),
        (a + ".feed_forward_length", _U32, c["n_ff"]),
        (a + ".attention.head_count", _U32, c["n_head"]),
        (a + ".attention.head_count_kv", _U32, c["n_head_kv"]),
        (a + ".attention.key_length", _U32, c["head_dim"]),
        (a + ".attention.value_length", _U32, c["head_dim"]),
        (a + ".rope.dimension_count", _U32, c["n_rot"]),
        (a + ".rope.freq_base", _F32, c["rope_base"]),
        (a + ".attention.layer_norm_rms_epsilon", _F32, c["eps"]),
        (a + ".context_length", _U32, 256),
        ("tokenizer.ggml.model", _STRING, "llama"),
        ("tokenizer.ggml.bos_token_id", _U32, 1),
        ("tokenizer.ggml.eos_token_id", _U32, 2),
        ("tokenizer.ggml.tokens", _ARRAY, (_STRING, vocab(c["n_vocab"]))),
        ("tokenizer.ggml.scores", _ARRAY, (_F32, [-float(i) for i in range(c["n_vocab"])])),
        ("tokenizer.ggml.token_type",
         _ARRAY, (_I32, [2 if i == 0 else 3 if i < 3 else 1 for i in range(c["n_vocab"])])),
    ]
    align = 32
    head = b"GGUF" + struct.pack("<IQQ", 3, len(weights), len(meta))
    for key, kind, v in meta:
        head += _str(key) + struct.pack("<I", kind) + _value(kind, v)
    data, offset = b"", 0
    for name, t in weights.items():
        ne = list(reversed(t.shape))  # ggml order: fastest dim first
        head += _str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        head += struct.pack("<IQ", 0, offset)  # type F32
        blob = t.tobytes()
        pad = (-len(blob)) % align
        data += blob + b"\0" * pad
        offset += len(blob) + pad
    head += b"\0" * ((-len(head)) % align)
    with open(path, "wb") as f:
        f.write(head + data)


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def _rope(v, pos):  # v [heads, head_dim]; llama: interleaved pairs
    c = CFG
    v = v.copy()
    for i in range(c["n_rot"] // 2):
        theta = pos * c["rope_base"] ** (-2.0 * i / c["n_rot"])
        x0, x1 = v[:, 2 * i].copy(), v[:, 2 * i + 1].copy()
        v[:, 2 * i] = x0 * np.cos(theta) - x1 * np.sin(theta)
        v[:, 2 * i + 1] = x0 * np.sin(theta) + x1 * np.cos(theta)
    return v


def reference_logits(w, tokens):
    """Logits [len(tokens), n_vocab] in float64, plain NumPy."""
    c = CFG
    w = {k: v.astype(np.float64) for k, v in w.items()}
    T, H, Hk, hd, eps = len(tokens), c["n_head"], c["n_head_kv"], c["head_dim"], c["eps"]
    x = w["token_embd.weight"][list(tokens)]
    for layer in range(c["n_layer"]):
        b = f"blk.{layer}."
        h = _rms(x, w[b + "attn_norm.weight"], eps)
        q = (h @ w[b + "attn_q.weight"].T).reshape(T, H, hd)
        k = (h @ w[b + "attn_k.weight"].T).reshape(T, Hk, hd)
        v = (h @ w[b + "attn_v.weight"].T).reshape(T, Hk, hd)
        q = np.stack([_rope(q[t], t) for t in range(T)])
        k = np.stack([_rope(k[t], t) for t in range(T)])
        att = np.zeros((T, H, hd))
        for hh in range(H):
            kh = hh // (H // Hk)
            s = q[:, hh] @ k[:, kh].T / np.sqrt(hd)
            s = s + np.triu(np.full((T, T), -np.inf), 1)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            att[:, hh] = p @ v[:, kh]
        x = x + att.reshape(T, H * hd) @ w[b + "attn_output.weight"].T
        h2 = _rms(x, w[b + "ffn_norm.weight"], eps)
        g = h2 @ w[b + "ffn_gate.weight"].T
        u = h2 @ w[b + "ffn_up.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[b + "ffn_down.weight"].T
    return _rms(x, w["output_norm.weight"], eps) @ w["output.weight"].T
