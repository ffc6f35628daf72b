#!/usr/bin/env python3
"""Whole-model latency: rlx vs PyTorch eager at the same thread count.

  bench/torch_models.py [--threads T] [--bench N] [--size S] [--build DIR] [MODEL...]

Exports every model once (tests/frontends/torch_models.py; torchvision models at
SxS, default 224), runs `rlx run DIR --bench N --threads T` and times eager
PyTorch (no_grad, median of N after a warm-up) in a fresh process with
torch.set_num_threads(T) and OMP_WAIT_POLICY=PASSIVE. Torch's matmuls run on
OpenBLAS's pthread pool, its convs on OpenMP's; on a small machine they fight,
so CNNs are timed with OPENBLAS_NUM_THREADS=1 (their work is in OpenMP convs)
and MLP/transformers with OPENBLAS_NUM_THREADS=T (their work is in BLAS).
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
DEFAULT = ["mlp", "cnn_bn", "transformer_fast", "transformer_slow", "gpt", "resnet18",
           "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0"]
CNNS = {"cnn_bn", "resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0"}


def torch_time(name, size, n):
    """Runs in the child process: prints the eager median in ms."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "frontends"))
    import torch_models as TM
    TM.SIZE = size
    torch.set_num_threads(int(os.environ["RLX_BENCH_THREADS"]))
    model, inputs = TM.MODELS[name]()
    model.eval()
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        ms = []
        for _ in range(n):
            t0 = time.perf_counter()
            model(*inputs)
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    print(f"median {ms[len(ms) // 2]:.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bench", type=int, default=20)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench_models"))
    ap.add_argument("--torch-time", help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.torch_time:
        return torch_time(a.torch_time, a.size, a.bench)
    models = a.models or DEFAULT
    T = a.threads
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", RLX_BENCH_THREADS=str(T))
    print(f"exporting {len(models)} models (images {a.size}x{a.size}) to {a.out} ...", flush=True)
    subprocess.run([PY, os.path.join(ROOT, "tests", "frontends", "torch_models.py"), a.out,
                    "--size", str(a.size)] + models, check=True, env=env)

    sys.path.insert(0, os.path.join(ROOT, "python"))
    from rlx_torch import _safetensors as st
    load = os.getloadavg()[0]
    rows = []
    for name in models:
        d = os.path.join(a.out, name)
        ref = st.load_file(os.path.join(d, "reference.safetensors"))
        inp = os.path.join(d, "inputs.safetensors")
        st.save_file({k[4:]: v for k, v in ref.items() if k.startswith("in::")}, inp)
        r = subprocess.run([os.path.join(a.build, "rlx"), "run", d, "--inputs", inp, "--bench",
                            str(a.bench), "--threads", str(T)], capture_output=True, text=True,
                           env=env)
        m = re.search(r"median ([0-9.]+) ms", r.stdout)
        rlx_ms = float(m.group(1)) if m else float("nan")
        if not m:
            print(f"{name}: rlx failed:\n{r.stdout}{r.stderr}", file=sys.stderr)
        tenv = dict(env, OPENBLAS_NUM_THREADS="1" if name in CNNS else str(T))
        r = subprocess.run([PY, os.path.abspath(__file__), "--torch-time", name, "--size",
                            str(a.size), "--bench", str(a.bench)], capture_output=True, text=True,
                           env=tenv)
        m = re.search(r"median ([0-9.]+)", r.stdout)
        torch_ms = float(m.group(1)) if m else float("nan")
        if not m:
            print(f"{name}: torch timing failed:\n{r.stderr}", file=sys.stderr)
        rows.append((name, rlx_ms, torch_ms))
        print(f"  {name}: rlx {rlx_ms:.3f} ms, torch {torch_ms:.3f} ms", flush=True)
    print(f"\nthreads {T}, {a.bench} runs each, medians; load average before/after: "
          f"{load:.2f} / {os.getloadavg()[0]:.2f}")
    print(f"{'model':<22} {'rlx ms':>10} {'torch ms':>10} {'rlx/torch':>10}")
    for name, r, t in rows:
        print(f"{name:<22} {r:>10.3f} {t:>10.3f} {r / t:>10.2f}")


if __name__ == "__main__":
    main()
