#!/usr/bin/python3
"""GGUF LLM parity: rlx vs llama.cpp (llama_peer) on random-weight test models.

Needs: /usr/bin/python3 with numpy, scripts/make_test_llm.py (gguf-py from
$RLX_LLAMA_SRC), the llama_peer binary (bench/llama_peer), and optionally the
rlx binary (`rlx run M.gguf --tokens "..." --out F.safetensors` writing
`logits` f32 [n_tokens, n_vocab]). When rlx is missing or fails, each row
says so and the script still runs end to end.

  cmake -S bench/llama_peer -B build-peer -G Ninja && ninja -C build-peer
  scripts/llm_parity.py --rlx build/rlx --peer build-peer/llama_peer

For each model (tiny llama / qwen2 / qwen3 / phi3 / qwen3moe / mixtral / gemma2 / gemma3 x f32, f16, q8_0, q4_0, and
q4_K / q5_K / q6_K quantized by `rlx quantize` from a wider f32 model): tokenize
the prompt with llama_peer, let llama.cpp generate --n-gen greedy tokens, then
run both engines once on prompt + continuation (teacher forcing) and compare
all logits (max abs diff, min cosine over positions) and whether rlx's argmax
at every continuation position reproduces llama.cpp's greedy token (a
different argmax within the tolerance of llama.cpp's top logit counts as a
tie). Test models are cached in --workdir (--fresh re-creates them). Prints a
markdown table; exit status 1 when an available rlx row fails its tolerance.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

from llm_common import HERE, ROOT, default_peer, run

# name -> (arch, vocab, extra make_test_llm args)
MODELS = {
    "llama": ("llama", "llama-spm", ["--kv-heads", "2"]),
    "qwen2": ("qwen2", "qwen2", ["--kv-heads", "2"]),
    "qwen3": ("qwen3", "qwen2", ["--kv-heads", "2"]),
    "phi3": ("phi3", "phi-3", ["--kv-heads", "2"]),
    # LongRoPE: both engines take the long factors when their context (4096
    # default for rlx, 256 for the peer) passes the original 64, with
    # attn_factor sqrt(2) on 12 of 16 rotated dims (partial rotary, as
    # Phi-4-mini); the short factors when it stays within 4096 of 8192.
    "phi3-longrope": ("phi3", "phi-3", ["--kv-heads", "2", "--long-rope", "64", "--rope-dims", "12"]),
    "phi3-shortrope": ("phi3", "phi-3", ["--kv-heads", "2", "--ctx", "8192", "--long-rope", "4096"]),
    # Mixtures of experts: qwen3moe (q/k norms) and llama with experts (mixtral's layout).
    "qwen3moe": ("qwen3moe", "qwen2", ["--kv-heads", "2", "--experts", "8", "--experts-used", "2"]),
    "mixtral": ("llama", "llama-spm", ["--kv-heads", "2", "--experts", "4", "--experts-used", "2"]),
    # Windows of 8 keys over the ~32 positions compared; caps small enough
    # that tanh bends the scores and the logits; gemma3's layer 1 is global
    # (pattern 2), on its own rope base with linear scaling.
    "gemma2": ("gemma2", "llama-spm", ["--kv-heads", "2", "--swa", "8", "--attn-softcap", "1.5",
                                       "--final-softcap", "10"]),
    "gemma3": ("gemma3", "llama-spm", ["--kv-heads", "2", "--swa", "8", "--swa-pattern", "2",
                                       "--rope-scale", "4"]),
    # YaRN from an original context of 16: the ramp spans rotated pairs 0-2
    # of 8 (the others interpolated) and the attention factor is 1.14;
    # mistral3 reads its own betas and log multiplier, and its query
    # temperature steps every 16 positions over the ~32 compared.
    "qwen2-yarn": ("qwen2", "qwen2", ["--kv-heads", "2", "--rope-scale", "4", "--yarn", "16"]),
    "mistral3": ("mistral3", "llama-spm", ["--kv-heads", "2", "--rope-scale", "4", "--yarn", "16",
                                           "--yarn-betas", "16,2", "--attn-temp-scale", "0.5"]),
    "mistral3-logmul": ("mistral3", "llama-spm", ["--kv-heads", "2", "--rope-scale", "8", "--yarn", "32",
                                                  "--yarn-log-mul", "0.5"]),
}
# Tolerances on logits of std ~2. f32: both sides f32 (KV cache f32 in the
# peer); f16: ggml rounds activations to f16 for f16 matmuls, rlx keeps f32.
# Quantized types: ggml quantizes every activation row to 8 bits (relative
# error ~1/254 per element) before its dot products; rlx does the same in
# decode (M < 16 rows) and, for the types its integer GEMM covers (q4_0 q4_1
# q5_0 q5_1 q8_0 q4_K q5_K q6_K on AVX2 / AVX-512), in prefill too. Prefill of
# the other types (q2_K, q3_K, ...) multiplies f32 activations with dequantized
# weight tiles, which is closer to the dequantized model; the difference is
# ggml's activation rounding, ~0.05-0.15 on these logits (--f32-prefill); by
# default the script sets RLX_GGML_NUMERICS=1 so rlx rounds like ggml there too.
# Float summation order still differs from ggml's kernels, so now and then one
# 8-bit activation rounds the other way ("flip", ~0.1 on a logit).
TOL = {"f32": (2e-3, 0.99999), "f16": (5e-2, 0.9999)}
TOL.update({q: (1.5e-1, 0.9999) for q in ("q8_0", "q4_0", "q4_K", "q5_K", "q6_K")})
# K-quants need rows of 256: those models are wider and quantized by rlx.
K_QUANTS = ("q4_K", "q5_K", "q6_K")


def read_logits(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack_from("<Q", b, 0)[0]
    header = json.loads(b[8:8 + n])
    t = header.get("logits")
    if t is None:
        raise RuntimeError(f"{path}: no 'logits' tensor")
    dt = {"F32": np.float32, "F16": np.float16, "F64": np.float64}[t["dtype"]]
    lo, hi = t["data_offsets"]
    return np.frombuffer(b[8 + n + lo:8 + n + hi], dtype=dt).astype(np.float32).reshape(t["shape"])


def make_model(out, arch, vocab, dtype, extra, seed, rlx):
    if os.path.exists(out):
        return out
    wide = dtype in K_QUANTS
    src = out[:-5] + "-src.gguf" if wide else out
    run([sys.executable, os.path.join(HERE, "make_test_llm.py"), "--arch", arch, "--vocab", vocab, "--layers", "2",
         "--dim", "256" if wide else "64", "--heads", "4", "--ff", "512" if wide else "128",
         "--dtype", "f32" if wide else dtype, "--seed", str(seed), "-o", src] + extra)
    if wide:
        run([rlx, "quantize", src, out, "--type", dtype])
    return out


def compare(ref, got, n_prompt, gen, atol):
    if got.shape != ref.shape:
        return dict(error=f"shape {list(got.shape)} != {list(ref.shape)}")
    max_abs = float(np.abs(got - ref).max())
    cos = np.sum(got * ref, 1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1) + 1e-30)
    # Greedy agreement per continuation step (teacher forced). A different
    # argmax counts as a tie, not a failure, when llama.cpp's own logits rank
    # the two tokens within atol of each other (a near-tie decided by rounding).
    agree = ties = 0
    for i, tok in enumerate(gen):
        pos = n_prompt - 1 + i
        mine = int(got[pos].argmax())
        if mine == tok:
            agree += 1
        elif ref[pos, tok] - ref[pos, mine] <= atol:
            ties += 1
    return dict(max_abs=max_abs, cos=float(cos.min()), agree=agree, ties=ties)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rlx", default=os.path.join(ROOT, "build", "rlx"))
    p.add_argument("--peer", default=default_peer())
    p.add_argument("--workdir", default="/tmp/rlx-llm-parity")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--dtypes", default="f32,f16,q8_0,q4_0,q4_K,q5_K,q6_K")
    p.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog. Once upon a time")
    p.add_argument("--n-gen", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fresh", action="store_true", help="re-create the models")
    p.add_argument("--f32-prefill", action="store_true",
                   help="rlx's default prefill numerics instead of RLX_GGML_NUMERICS=1 (f32 activations "
                        "for types without the integer GEMM, or under RLX_ISA=portable)")
    a = p.parse_args()

    if not (os.path.isfile(a.peer) and os.access(a.peer, os.X_OK)):
        sys.exit(f"llm_parity: llama_peer not found at {a.peer} (build bench/llama_peer)")
    have_rlx = os.path.isfile(a.rlx) and os.access(a.rlx, os.X_OK)
    if a.fresh and os.path.isdir(a.workdir):
        shutil.rmtree(a.workdir)
    os.makedirs(a.workdir, exist_ok=True)
    th = ["--threads", str(a.threads)]
    if not a.f32_prefill:
        os.environ["RLX_GGML_NUMERICS"] = "1"

    rows, failed = [], False
    for name in a.models.split(","):
        arch, vocab, extra = MODELS[name]
        for dtype in a.dtypes.split(","):
            tag = f"{name}-{dtype}"
            model = make_model(os.path.join(a.workdir, f"{tag}.gguf"), arch, vocab, dtype, extra, a.seed, a.rlx)
            toks = run([a.peer, "tokenize", model, "-p", a.prompt]).split()
            gen = [int(t) for t in run([a.peer, "generate", model, "--tokens", " ".join(toks), "-n",
                                        str(a.n_gen)] + th).split()]
            full = toks + [str(t) for t in gen[:-1]]  # teacher forcing: one run covers every step
            ref_path = os.path.join(a.workdir, f"{tag}.peer.safetensors")
            run([a.peer, "logits", model, "--tokens", " ".join(full), "--out", ref_path] + th)
            ref = read_logits(ref_path)
            top2 = np.sort(ref[len(toks) - 1:], 1)[:, -2:]
            row = dict(model=tag, n=len(full), gap=float((top2[:, 1] - top2[:, 0]).min()))
            if not have_rlx:
                row["status"] = "rlx: not available"
            else:
                out = os.path.join(a.workdir, f"{tag}.rlx.safetensors")
                if os.path.exists(out):
                    os.remove(out)
                try:
                    run([a.rlx, "run", model, "--tokens", " ".join(full), "--out", out] + th)
                    row.update(compare(ref, read_logits(out), len(toks), gen, TOL[dtype][0]))
                except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
                    row["status"] = f"rlx failed: {e}"
                if "max_abs" in row:
                    atol, cmin = TOL[dtype]
                    ok = row["max_abs"] <= atol and row["cos"] >= cmin and row["agree"] + row["ties"] == len(gen)
                    row["status"] = "PASS" if ok else "FAIL"
                    failed |= not ok
                elif "error" in row:
                    row["status"], failed = f"FAIL: {row['error']}", True
                else:
                    failed = True
            rows.append(row)
            print(f"{tag}: {row.get('status')}", file=sys.stderr)

    print(f"\nrlx: {a.rlx if have_rlx else 'not available'}; llama.cpp: {a.peer}; prompt {len(toks)} tokens "
          f"(last model) + {a.n_gen} greedy; threads {a.threads}\n")
    print("| model | tokens | max abs diff | min cosine | greedy match | min top-2 gap (llama.cpp) | status |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ma = f"{r['max_abs']:.3g}" if "max_abs" in r else "-"
        co = f"{r['cos']:.6f}" if "cos" in r else "-"
        gm = f"{r['agree']}/{a.n_gen}" + (f" (+{r['ties']} ties)" if r.get("ties") else "") if "agree" in r else "-"
        print(f"| {r['model']} | {r['n']} | {ma} | {co} | {gm} | {r['gap']:.3g} | {r['status']} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
