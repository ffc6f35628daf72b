#!/usr/bin/python3
"""Write a random-weight llama-family GGUF model (llama / qwen2 / qwen3 / qwen3moe /
phi3 / gemma2 / gemma3; llama and qwen3moe with --experts as mixtures of experts)
for rlx's GGUF LLM parity tests and benchmarks.

Needs: numpy and llama.cpp's gguf-py (for its q8_0/q4_0 quantizers; from the
source checkout $RLX_LLAMA_SRC, default ~/.cache/rlx-peers/llama.cpp, put on
sys.path here). Run with
/usr/bin/python3 (the Debian python that has numpy).

  scripts/make_test_llm.py --arch llama --vocab llama-spm --layers 2 --dim 64 \\
      --heads 4 --kv-heads 2 --ff 128 --dtype f32 -o /tmp/tiny-llama.gguf
  scripts/make_test_llm.py --preset 100m --dtype q8_0 -o /tmp/llama-100m-q8_0.gguf
  scripts/make_test_llm.py --preset 1b  --dtype f16  -o /tmp/llama-1b-f16.gguf
  scripts/make_test_llm.py --arch gemma2 --swa 8 --attn-softcap 1.5 --final-softcap 10 \
      --kv-heads 2 -o /tmp/tiny-gemma2.gguf

--vocab is a name (ggml-vocab-<name>.gguf under $RLX_LLAMA_SRC/models) or a
path; every tokenizer.* key and the vocab size are copied from it. --dtype
applies to every 2-D weight (f32, f16, q8_0, q4_0 via gguf-py's quantizer);
norms, biases and rope_freqs stay f32. Tensors are generated one at a time
from (seed, tensor index) and streamed to the file, so memory stays small.

Init (chosen so logits are spread out and greedy decoding is not decided by
rounding): embeddings N(0,1) (tied: N(0, logit_scale^2/dim)); projections N(0, 1/fan_in) (q.k / sqrt(hd)
~ N(0,1)); attn_output/ffn_down scaled by 0.5; norms 1 + N(0, 0.1^2);
output head N(0, (logit_scale^2)/dim) so logits have std ~logit_scale (2).
Tied models (--tied) tend to repeat the last input token under greedy
decoding (each token's own embedding dominates its logit): use untied models
for greedy-continuation parity.

Architectures, as llama.cpp's converters write them: phi3 has one attn_qkv
(q, k, v rows) and an ffn_up of 2*ff rows (gate, then up), vocab phi-3 by
default; gemma2 / gemma3 (vocab llama-spm: SentencePiece, as gemma's own) have
post-attention / post-ffn norms, GELU-tanh gated FFNs and query/key head size
keys; gemma2 is always tied (llama.cpp ignores output.weight) and writes
attn_logit_softcapping / final_logit_softcapping (--attn-softcap,
--final-softcap; llama.cpp defaults 50 / 30 when absent); gemma3 has q/k norms.
--swa N writes attention.sliding_window (--swa-pattern P: layer l slides when
l % P < P - 1; llama.cpp's defaults 2 for gemma2, 6 for gemma3), --rope-scale
F a linear rope.scaling.factor (gemma3: global layers only), --long-rope ORIG_CTX
phi3's LongRoPE factors and --rope-dims N partial rotary. --dry-run prints the size of a preset (the 1b
f32 file is ~4.2 GB) without writing it.
"""
import argparse
import math
import os
import struct
import sys
import time

import numpy as np

LLAMA_SRC = os.environ.get("RLX_LLAMA_SRC", os.path.expanduser("~/.cache/rlx-peers/llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA_SRC, "gguf-py"))
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402

DTYPES = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0}
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}

# name: (arch, vocab, layers, dim, heads, kv_heads, ff, tied)
PRESETS = {
    # GPT-2-small-sized llama with GQA: ~104M parameters.
    "100m": ("llama", "llama-spm", 8, 768, 12, 4, 2304, False),
    # TinyLlama-1.1B shape: ~1.1B parameters (f32 file ~4.4 GB).
    "1b": ("llama", "llama-spm", 22, 2048, 32, 4, 5632, False),
}

ARCH_DEFAULTS = {  # rope base, rms eps
    "llama": (10000.0, 1e-5),
    "qwen2": (1000000.0, 1e-6),
    "qwen3": (1000000.0, 1e-6),
    "qwen3moe": (1000000.0, 1e-6),
    "phi3": (10000.0, 1e-5),
    "gemma2": (10000.0, 1e-6),
    "gemma3": (1000000.0, 1e-6),
    "mistral3": (1000000.0, 1e-5),
}
DEFAULT_VOCAB = {"llama": "llama-spm", "mistral3": "llama-spm", "phi3": "phi-3", "gemma2": "llama-spm",
                 "gemma3": "llama-spm"}
GEMMA = ("gemma2", "gemma3")


def vocab_path(v):
    if os.path.exists(v):
        return v
    p = os.path.join(LLAMA_SRC, "models", f"ggml-vocab-{v}.gguf")
    if not os.path.exists(p):
        sys.exit(f"make_test_llm: no vocab file {v} (looked for {p})")
    return p


# Minimal GGUF v3 writer: gguf-py's GGUFReader takes ~20 s on the 151k-token
# qwen2 vocab, so tokenizer keys are copied as raw bytes instead.
ALIGN = 32
_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> size


def read_raw_kvs(path):
    """[(key, raw bytes of type+value)] of a GGUF file, without decoding."""
    b = open(path, "rb").read()
    if b[:4] != b"GGUF":
        sys.exit(f"make_test_llm: {path} is not a GGUF file")
    n_kv = struct.unpack_from("<Q", b, 16)[0]
    off, out = 24, []

    def skip(t, o):
        if t in _SCALAR:
            return o + _SCALAR[t]
        if t == 8:
            return o + 8 + struct.unpack_from("<Q", b, o)[0]
        if t == 9:
            st, n = struct.unpack_from("<IQ", b, o)
            o += 12
            if st in _SCALAR:
                return o + n * _SCALAR[st]
            for _ in range(n):
                o = skip(st, o)
            return o
        sys.exit(f"make_test_llm: unknown GGUF value type {t} in {path}")

    for _ in range(n_kv):
        klen = struct.unpack_from("<Q", b, off)[0]
        key = b[off + 8:off + 8 + klen].decode()
        vstart = off + 8 + klen
        t = struct.unpack_from("<I", b, vstart)[0]
        off = skip(t, vstart + 4)
        out.append((key, b[vstart:off]))
    return out


def gguf_str(s):
    e = s.encode()
    return struct.pack("<Q", len(e)) + e


def kv_u32(v):
    return struct.pack("<II", 4, v)


def kv_f32(v):
    return struct.pack("<If", 6, v)


def kv_str(v):
    return struct.pack("<I", 8) + gguf_str(v)


def tensor_specs(a, n_vocab):
    """(name, torch-order shape, kind, std) for every tensor, in file order."""
    hd = a.head_dim
    q_out, kv_out = a.heads * hd, a.kv_heads * hd
    bias = a.arch == "qwen2" or a.bias
    gemma = a.arch in GEMMA
    s = [("token_embd.weight", (n_vocab, a.dim), "w", 1.0)]
    if a.rope_freqs:
        s.append(("rope_freqs.weight", (a.rope_dims // 2,), "rope", 0))
    if a.long_rope:  # LongRoPE (Phi-3 128k): the short set, and the long one for contexts past the original
        s.append(("rope_factors_long.weight", (a.rope_dims // 2,), "rope_long", 0))
        s.append(("rope_factors_short.weight", (a.rope_dims // 2,), "rope_short", 0))
    for i in range(a.layers):
        b = f"blk.{i}."
        s.append((b + "attn_norm.weight", (a.dim,), "norm", 0))
        if a.arch == "phi3":  # q, k, v rows in one tensor
            s.append((b + "attn_qkv.weight", (q_out + 2 * kv_out, a.dim), "w", a.dim**-0.5))
        else:
            s.append((b + "attn_q.weight", (q_out, a.dim), "w", a.dim**-0.5))
            s.append((b + "attn_k.weight", (kv_out, a.dim), "w", a.dim**-0.5))
            s.append((b + "attn_v.weight", (kv_out, a.dim), "w", a.dim**-0.5))
        if bias and a.arch == "phi3":
            s.append((b + "attn_qkv.bias", (q_out + 2 * kv_out,), "bias", 0.1))
        elif bias:
            s.append((b + "attn_q.bias", (q_out,), "bias", 0.1))
            s.append((b + "attn_k.bias", (kv_out,), "bias", 0.1))
            s.append((b + "attn_v.bias", (kv_out,), "bias", 0.1))
        if a.arch in ("qwen3", "qwen3moe", "gemma3"):
            s.append((b + "attn_q_norm.weight", (hd,), "norm", 0))
            s.append((b + "attn_k_norm.weight", (hd,), "norm", 0))
        s.append((b + "attn_output.weight", (a.dim, q_out), "w", 0.5 * q_out**-0.5))
        if gemma:
            s.append((b + "post_attention_norm.weight", (a.dim,), "norm", a.post_norm))
        s.append((b + "ffn_norm.weight", (a.dim,), "norm", 0))
        if a.experts:  # the router (kept f32, as llama.cpp's quantizer does) and E experts of ff
            s.append((b + "ffn_gate_inp.weight", (a.experts, a.dim), "router", a.router_std * a.dim**-0.5))
            s.append((b + "ffn_gate_exps.weight", (a.experts, a.ff, a.dim), "w", a.dim**-0.5))
            s.append((b + "ffn_up_exps.weight", (a.experts, a.ff, a.dim), "w", a.dim**-0.5))
            s.append((b + "ffn_down_exps.weight", (a.experts, a.dim, a.ff), "w", 0.5 * a.ff**-0.5))
        elif a.arch == "phi3":  # gate rows, then up rows
            s.append((b + "ffn_up.weight", (2 * a.ff, a.dim), "w", a.dim**-0.5))
        else:
            s.append((b + "ffn_gate.weight", (a.ff, a.dim), "w", a.dim**-0.5))
            s.append((b + "ffn_up.weight", (a.ff, a.dim), "w", a.dim**-0.5))
        if not a.experts:
            s.append((b + "ffn_down.weight", (a.dim, a.ff), "w", 0.5 * a.ff**-0.5))
        if gemma:
            s.append((b + "post_ffw_norm.weight", (a.dim,), "norm", a.post_norm))
    s.append(("output_norm.weight", (a.dim,), "norm", 0))
    if not a.tied:
        s.append(("output.weight", (n_vocab, a.dim), "w", a.logit_scale * a.dim**-0.5))
    return s


def make_tensor(spec, idx, a):
    name, shape, kind, std = spec
    rng = np.random.default_rng([a.seed, idx])
    if kind == "norm":  # std: a mean other than 1 (gemma's post norms)
        return ((std or 1.0) + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if kind == "router":
        return (std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if kind == "bias":
        return (std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if kind == "rope":  # llama3-style per-frequency divisors: 1 for high freqs, up to 8 for low
        f = np.ones(shape, dtype=np.float32)
        f[shape[0] // 2:] = np.linspace(1.0, 8.0, shape[0] - shape[0] // 2, dtype=np.float32)
        return f
    if kind == "rope_short":  # mild, as Phi-3's short factors (1.0-1.2)
        return np.linspace(1.0, 1.5, shape[0], dtype=np.float32)
    if kind == "rope_long":  # up to 16x slower for the low frequencies
        return np.geomspace(1.0, 16.0, shape[0]).astype(np.float32)
    w = rng.standard_normal(shape, dtype=np.float32)
    if name == "token_embd.weight" and a.tied:
        w *= np.float32(a.logit_scale * a.dim**-0.5)  # tied: the embedding is the head; spread the logits
    elif std != 1.0:
        w *= np.float32(std)
    return w


def encode(w, dtype, kind="w"):
    if w.ndim == 1 or dtype == "f32" or kind == "router":
        return w.astype(np.float32)
    if dtype == "f16":
        return w.astype(np.float16)
    return gguf.quants.quantize(w, DTYPES[dtype])


def encoded_info(shape, dtype, kind="w"):
    """(ggml type, nbytes) of encode() without doing it."""
    n = int(np.prod(shape))
    if len(shape) == 1 or dtype == "f32" or kind == "router":
        return int(QT.F32), 4 * n
    if dtype == "f16":
        return int(QT.F16), 2 * n
    qt = DTYPES[dtype]
    return int(qt), int(np.prod(gguf.quants.quant_shape_to_byte_shape(shape, qt)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS))
    p.add_argument("--arch", choices=sorted(ARCH_DEFAULTS))
    p.add_argument("--vocab", help="ggml-vocab-<name>.gguf name or path")
    p.add_argument("--layers", type=int)
    p.add_argument("--dim", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int)
    p.add_argument("--head-dim", type=int, help="default dim/heads (qwen3 may differ; writes key_length)")
    p.add_argument("--ff", type=int)
    p.add_argument("--tied", action="store_true", default=None, help="no output.weight (head = token_embd)")
    p.add_argument("--bias", action="store_true", help="q/k/v biases for llama too (qwen2 always has them)")
    p.add_argument("--rope-freqs", action="store_true", help="add rope_freqs.weight (llama3-style)")
    p.add_argument("--rope-base", type=float)
    p.add_argument("--rope-dims", type=int, help="rope.dimension_count: rotate only these dims of a head "
                                                 "(Phi-4-mini: 3/4 of them); default all")
    p.add_argument("--long-rope", type=int, metavar="ORIG_CTX",
                   help="LongRoPE as convert_hf_to_gguf writes Phi-3 128k: rope_factors_long/short, "
                        "rope.scaling.original_context_length ORIG_CTX and the attn_factor of --ctx / ORIG_CTX")
    p.add_argument("--eps", type=float)
    p.add_argument("--ctx", type=int, default=4096, help="context_length")
    p.add_argument("--swa", type=int, help="attention.sliding_window (gemma2 / gemma3)")
    p.add_argument("--swa-pattern", type=int, help="attention.sliding_window_pattern (gemma2 / gemma3)")
    p.add_argument("--attn-softcap", type=float, help="attn_logit_softcapping (gemma2)")
    p.add_argument("--final-softcap", type=float, help="final_logit_softcapping (gemma2 / gemma3)")
    p.add_argument("--rope-scale", type=float, help="rope.scaling.factor (linear unless --yarn)")
    p.add_argument("--yarn", type=int, metavar="ORIG_CTX",
                   help="YaRN scaling by --rope-scale from rope.scaling.original_context_length ORIG_CTX")
    p.add_argument("--yarn-betas", metavar="FAST,SLOW", help="mistral3: rope.scaling.yarn_beta_fast / _slow")
    p.add_argument("--yarn-log-mul", type=float, help="mistral3: rope.scaling.yarn_log_multiplier")
    p.add_argument("--attn-temp-scale", type=float, help="mistral3: attention.temperature_scale")
    p.add_argument("--post-norm", type=float, default=5.0,
                   help="mean of gemma's post-attention / post-ffn norm weights: > 1 lets the blocks, not "
                        "the (tied) input embedding, decide the next token")
    p.add_argument("--experts", type=int, default=0,
                   help="a mixture of experts (llama: mixtral-style; qwen3moe needs it): --ff is each expert's")
    p.add_argument("--experts-used", type=int, default=2)
    p.add_argument("--router-std", type=float, default=4.0,
                   help="router logits' std: wide enough that no two experts tie within rounding")
    p.add_argument("--logit-scale", type=float, default=2.0)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="print the size, write nothing")
    p.add_argument("-o", "--out", required=True)
    a = p.parse_args()

    if a.preset:
        arch, vocab, layers, dim, heads, kv, ff, tied = PRESETS[a.preset]
        for k, v in dict(arch=arch, vocab=vocab, layers=layers, dim=dim, heads=heads, kv_heads=kv, ff=ff,
                         tied=tied).items():
            if getattr(a, k) is None:
                setattr(a, k, v)
    defaults = dict(arch="llama", layers=2, dim=64, heads=4, ff=128, tied=False)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.vocab is None:
        a.vocab = DEFAULT_VOCAB.get(a.arch, "qwen2")
    if a.arch == "gemma2":
        a.tied = True  # llama.cpp's gemma2 always reads the head from token_embd
    if a.kv_heads is None:
        a.kv_heads = a.heads
    if a.head_dim is None:
        if a.dim % a.heads:
            sys.exit("make_test_llm: dim must be a multiple of heads (or give --head-dim)")
        a.head_dim = a.dim // a.heads
    if a.heads % a.kv_heads or a.head_dim % 2:
        sys.exit("make_test_llm: heads must be a multiple of kv-heads and head_dim even")
    if a.rope_dims is None:
        a.rope_dims = a.head_dim
    if a.rope_dims % 2 or not 0 < a.rope_dims <= a.head_dim:
        sys.exit("make_test_llm: --rope-dims must be even and at most the head size")
    if a.arch == "qwen3moe" and not a.experts:
        sys.exit("make_test_llm: qwen3moe needs --experts")
    if a.experts and (a.arch not in ("llama", "mistral3", "qwen3moe") or not 0 < a.experts_used <= a.experts):
        sys.exit("make_test_llm: --experts is for llama / qwen3moe, with 0 < --experts-used <= --experts")
    if a.arch not in ("qwen3", "qwen3moe") + GEMMA and a.head_dim * a.heads != a.dim:
        sys.exit("make_test_llm: --head-dim != dim/heads is only supported for qwen3 and gemma")
    if a.arch not in GEMMA and (a.swa or a.swa_pattern or a.attn_softcap or a.final_softcap):
        sys.exit("make_test_llm: --swa, --swa-pattern and the soft-caps are for gemma2 / gemma3")
    base, eps = ARCH_DEFAULTS[a.arch]
    a.rope_base = a.rope_base if a.rope_base is not None else base
    a.eps = a.eps if a.eps is not None else eps

    t0 = time.time()
    arch = a.arch
    kvs = [("general.architecture", kv_str(arch)),
           ("general.name", kv_str(f"rlx-test-{arch}-L{a.layers}-d{a.dim}-{a.dtype}-s{a.seed}")),
           ("general.file_type", kv_u32(FILE_TYPES[a.dtype]))]
    n_vocab = None
    for key, raw in read_raw_kvs(vocab_path(a.vocab)):
        if key.startswith("tokenizer."):
            kvs.append((key, raw))
            if key == "tokenizer.ggml.tokens":
                n_vocab = struct.unpack_from("<Q", raw, 8)[0]
    if n_vocab is None:
        sys.exit(f"make_test_llm: {a.vocab} has no tokenizer.ggml.tokens")
    kvs += [(f"{arch}.vocab_size", kv_u32(n_vocab)),
            (f"{arch}.context_length", kv_u32(a.ctx)),
            (f"{arch}.embedding_length", kv_u32(a.dim)),
            (f"{arch}.block_count", kv_u32(a.layers)),
            (f"{arch}.feed_forward_length", kv_u32(a.ff)),
            (f"{arch}.attention.head_count", kv_u32(a.heads)),
            (f"{arch}.attention.head_count_kv", kv_u32(a.kv_heads)),
            (f"{arch}.attention.layer_norm_rms_epsilon", kv_f32(a.eps)),
            (f"{arch}.rope.freq_base", kv_f32(a.rope_base)),
            (f"{arch}.rope.dimension_count", kv_u32(a.rope_dims))]
    opt = [("attention.sliding_window", a.swa, kv_u32), ("attention.sliding_window_pattern", a.swa_pattern, kv_u32),
           ("attn_logit_softcapping", a.attn_softcap, kv_f32), ("final_logit_softcapping", a.final_softcap, kv_f32)]
    kvs += [(f"{arch}.{k}", enc(v)) for k, v, enc in opt if v is not None]
    if a.yarn and a.rope_scale is None:
        sys.exit("make_test_llm: --yarn needs --rope-scale")
    if arch != "mistral3" and (a.yarn_betas or a.yarn_log_mul is not None or a.attn_temp_scale is not None):
        sys.exit("make_test_llm: --yarn-betas, --yarn-log-mul and --attn-temp-scale are mistral3 keys")
    if a.rope_scale is not None:
        kvs += [(f"{arch}.rope.scaling.type", kv_str("yarn" if a.yarn else "linear")),
                (f"{arch}.rope.scaling.factor", kv_f32(a.rope_scale))]
    if a.yarn:
        kvs.append((f"{arch}.rope.scaling.original_context_length", kv_u32(a.yarn)))
    if a.yarn_betas:
        fast, slow = (float(v) for v in a.yarn_betas.split(","))
        kvs += [(f"{arch}.rope.scaling.yarn_beta_fast", kv_f32(fast)),
                (f"{arch}.rope.scaling.yarn_beta_slow", kv_f32(slow))]
    if a.yarn_log_mul is not None:
        kvs.append((f"{arch}.rope.scaling.yarn_log_multiplier", kv_f32(a.yarn_log_mul)))
    if a.attn_temp_scale is not None:
        kvs.append((f"{arch}.attention.temperature_scale", kv_f32(a.attn_temp_scale)))
    if a.long_rope:  # convert_hf_to_gguf's Phi3MiniModel: sqrt(1 + ln(scale) / ln(orig)) when scale > 1
        scale = a.ctx / a.long_rope
        attn_factor = math.sqrt(1 + math.log(scale) / math.log(a.long_rope)) if scale > 1 else 1.0
        kvs += [(f"{arch}.rope.scaling.original_context_length", kv_u32(a.long_rope)),
                (f"{arch}.rope.scaling.attn_factor", kv_f32(attn_factor))]
    if a.experts:
        kvs += [(f"{arch}.expert_count", kv_u32(a.experts)), (f"{arch}.expert_used_count", kv_u32(a.experts_used))]
        if arch == "qwen3moe":
            kvs.append((f"{arch}.expert_feed_forward_length", kv_u32(a.ff)))
    if arch in ("qwen3", "qwen3moe") + GEMMA or a.head_dim * a.heads != a.dim:
        kvs += [(f"{arch}.attention.key_length", kv_u32(a.head_dim)),
                (f"{arch}.attention.value_length", kv_u32(a.head_dim))]

    specs = tensor_specs(a, n_vocab)
    infos, offset, n_params = [], 0, 0
    for name, shape, kind, _ in specs:
        ggml_type, nbytes = encoded_info(shape, a.dtype, kind)
        # GGUF dims are the numpy (PyTorch) dims reversed.
        infos.append(gguf_str(name) + struct.pack("<I", len(shape)) +
                     struct.pack(f"<{len(shape)}Q", *reversed(shape)) + struct.pack("<IQ", ggml_type, offset))
        offset += -(-nbytes // ALIGN) * ALIGN
        n_params += int(np.prod(shape))
    if a.dry_run:
        print(f"make_test_llm: would write {a.out}: {arch} L={a.layers} d={a.dim} vocab={n_vocab} {a.dtype} "
              f"{n_params / 1e6:.1f}M params {offset / 2**20:.1f} MiB of tensor data", file=sys.stderr)
        return
    with open(a.out, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(specs), len(kvs)))
        for key, raw in kvs:
            f.write(gguf_str(key) + raw)
        for info in infos:
            f.write(info)
        f.write(b"\0" * (-f.tell() % ALIGN))
        for idx, spec in enumerate(specs):
            data = encode(make_tensor(spec, idx, a), a.dtype, spec[2])
            f.write(data.tobytes())
            f.write(b"\0" * (-data.nbytes % ALIGN))
    print(f"make_test_llm: wrote {a.out}: {arch} L={a.layers} d={a.dim} heads={a.heads}/{a.kv_heads} "
          f"hd={a.head_dim} ff={a.ff} vocab={n_vocab} {a.dtype} {n_params / 1e6:.1f}M params "
          f"{os.path.getsize(a.out) / 2**20:.1f} MiB in {time.time() - t0:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
