#!/usr/bin/python3
"""GGUF LLM speed: rlx vs llama.cpp (llama_peer) prefill / decode tokens/s.

Needs: /usr/bin/python3 with numpy, scripts/make_test_llm.py, the llama_peer
binary (bench/llama_peer), optionally the rlx binary. Runs both engines on the
same files with the same thread count and prints a markdown table with the
rlx / llama.cpp ratio; rows say "rlx: not available" when rlx is missing or
fails.

  cmake -S bench/llama_peer -B build-peer -G Ninja && ninja -C build-peer
  scripts/llm_bench.py --rlx build/rlx --peer build-peer/llama_peer \\
      --presets 100m --dtypes f32,q8_0 --threads 2
  scripts/llm_bench.py --model /path/a.gguf --model /path/b.gguf

llama.cpp: one batch of --prompt random tokens into an empty cache (prefill),
then --decode single-token steps after --depth cached tokens (default: the
prompt length, as a generator decodes after its prompt; 0 = llama-bench tg).
Medians of --reps. rlx: --rlx-cmd (a template; default below) must print
either a JSON line with prefill_tok_s / decode_tok_s or lines matching
"prompt|prefill ... <x> tok/s" and "decode|eval ... <x> tok/s".
The machine must be otherwise idle: 2 ggml threads on 2 busy cores can run
100x slower (spin barriers); check `uptime` and repeat.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

from llm_common import HERE, ROOT, default_peer
from llm_common import run as run_quiet


def run(cmd, shell=False, timeout=1800):
    return run_quiet(cmd, shell=shell, timeout=timeout, with_stderr=True)
# As llama_peer's bench measures them: prefill into an empty cache, decode after
# {depth} cached tokens (rlx generate would decode after the prompt, whatever --depth says).
DEFAULT_RLX_CMD = ('{rlx} bench-llm {model} -p {prompt} -n 0 -r 1 -t {threads} --json && '
                   '{rlx} bench-llm {model} -p 0 -n {decode} -d {depth} -r 1 -t {threads} --json')


def parse_speeds(text):
    speeds = {}  # JSON lines, one or several (a prefill line and a decode line)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and "_tok_s" in line:
            speeds.update({k: float(v) for k, v in json.loads(line).items() if k.endswith("_tok_s")})
    if "decode_tok_s" in speeds:
        return speeds.get("prefill_tok_s", 0.0), speeds["decode_tok_s"]
    num = r"([0-9]+(?:\.[0-9]*)?)\s*(?:tok(?:ens)?/s|t/s)"
    pp = re.search(r"(?:prompt|prefill)[^\n]*?" + num, text, re.I)
    tg = re.search(r"(?:decode|eval|generat)[^\n]*?" + num, text, re.I)
    if not tg:
        raise RuntimeError("no tok/s in rlx output")
    return (float(pp.group(1)) if pp else 0.0), float(tg.group(1))


def n_vocab_of(model):
    # llama_peer tokenize prints ids only; the vocab size is read from the file instead.
    sys.path.insert(0, HERE)
    from make_test_llm import read_raw_kvs  # noqa: E402
    import struct
    for key, raw in read_raw_kvs(model):
        if key == "tokenizer.ggml.tokens":
            return struct.unpack_from("<Q", raw, 8)[0]
    raise RuntimeError(f"{model}: no tokenizer.ggml.tokens")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rlx", default=os.path.join(ROOT, "build", "rlx"))
    p.add_argument("--rlx-cmd", default=DEFAULT_RLX_CMD,
                   help="shell template; fields {rlx} {model} {tokens} {prompt} {decode} {depth} {threads}")
    p.add_argument("--peer", default=default_peer())
    p.add_argument("--model", action="append", default=[], help="existing GGUF file(s) instead of presets")
    p.add_argument("--presets", default="100m")
    p.add_argument("--dtypes", default="f32,q8_0")
    p.add_argument("--workdir", default="/tmp/rlx-llm-bench")
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--decode", type=int, default=64)
    p.add_argument("--depth", type=int, default=None, help="cached tokens before decoding (default --prompt)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    depth = a.prompt if a.depth is None else a.depth

    if not (os.path.isfile(a.peer) and os.access(a.peer, os.X_OK)):
        sys.exit(f"llm_bench: llama_peer not found at {a.peer} (build bench/llama_peer)")
    have_rlx = os.path.isfile(a.rlx) and os.access(a.rlx, os.X_OK)
    models = list(a.model)
    if not models:
        os.makedirs(a.workdir, exist_ok=True)
        for preset in a.presets.split(","):
            for dtype in a.dtypes.split(","):
                out = os.path.join(a.workdir, f"llama-{preset}-{dtype}.gguf")
                if not os.path.exists(out):
                    run([sys.executable, os.path.join(HERE, "make_test_llm.py"), "--preset", preset, "--dtype", dtype,
                         "-o", out])
                models.append(out)

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    rows = []
    for model in models:
        name = os.path.basename(model)
        j = json.loads(run([a.peer, "bench", model, "--prompt", str(a.prompt), "--decode", str(a.decode),
                            "--decode-depth", str(depth), "--reps", str(a.reps), "--threads", str(a.threads)]))
        row = dict(model=name, l_pp=j["prefill_tok_s"], l_tg=j["decode_tok_s"])
        if not have_rlx:
            row["status"] = "rlx: not available"
        else:
            rng = random.Random(1234)
            nv = n_vocab_of(model)
            toks = " ".join(str(rng.randrange(nv)) for _ in range(a.prompt))
            cmd = a.rlx_cmd.format(rlx=a.rlx, model=model, tokens=toks, prompt=a.prompt, decode=a.decode,
                                   depth=depth, threads=a.threads)
            try:
                pp, tg = [], []
                for _ in range(a.reps):
                    x, y = parse_speeds(run(cmd, shell=True))
                    pp.append(x)
                    tg.append(y)
                row.update(r_pp=sorted(pp)[len(pp) // 2], r_tg=sorted(tg)[len(tg) // 2], status="ok")
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                row["status"] = f"rlx failed: {e}"
        rows.append(row)
        print(f"{name}: {row['status']}", file=sys.stderr)

    print(f"\nthreads {a.threads}; prefill {a.prompt} tokens in one batch; decode {a.decode} tokens after {depth}; "
          f"median of {a.reps}; load average at start {load:.1f}\n")
    print("| model | rlx prefill tok/s | llama.cpp prefill tok/s | ratio | rlx decode tok/s | "
          "llama.cpp decode tok/s | ratio | status |")
    print("|---|---|---|---|---|---|---|---|")

    def f(x):
        return f"{x:.1f}" if x is not None else "-"

    for r in rows:
        rp, rt = r.get("r_pp"), r.get("r_tg")
        ratio_p = f"{rp / r['l_pp']:.2f}" if rp and r["l_pp"] else "-"
        ratio_t = f"{rt / r['l_tg']:.2f}" if rt and r["l_tg"] else "-"
        print(f"| {r['model']} | {f(rp)} | {f(r['l_pp'])} | {ratio_p} | {f(rt)} | {f(r['l_tg'])} | {ratio_t} | "
              f"{r['status']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
