#!/usr/bin/python3
"""Training-step time, rlx beside PyTorch 1.13 eager, side by side (issue 11, section 6).

  /usr/bin/python3 bench/train_step.py [--threads 1,2] [--rounds 3] [--epochs 8]
                                       [--models digits_cnn,mlp,transformer] [--rlx build/rlx]

Models (bench/train_models.py), each trained with Adam and cross-entropy:
  digits_cnn   the CNN of `make run` (examples/digits/digits.py: 2 conv + BatchNorm
               in training mode), sklearn's digits, batch 64, lr 3e-3
  mlp          256 -> 512 -> 512 -> 10 with ReLU, 2048 synthetic samples, batch 128
  transformer  one nn.TransformerEncoderLayer (d 128, 4 heads, ff 512, no dropout)
               over 32 tokens, mean-pooled into a linear head, 1024 samples, batch 32
`rlx train` runs the train=True export (rlx_torch, exported once into OUT/MODEL);
PyTorch trains the same module on the same data with torch.optim.Adam in a plain
loop (shuffled batches, the partial batch dropped as rlx does). Each run is a
fresh process, rounds interleave the two; printed per model and thread count:
ms per step (the median round), rlx/PyTorch (< 1: rlx faster). rlx's time is
what `rlx train` reports for its steps (no process start or export); PyTorch's
is its loop, timed the same way. PyTorch gets OMP_WAIT_POLICY=PASSIVE and
OPENBLAS_NUM_THREADS=1 for the CNN (its convs run on OpenMP) and =T for the
others (their matmuls run on OpenBLAS).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"

EXPORT = r"""
import os, sys, torch, torch.nn.functional as F
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import rlx_torch, train_models
from rlx_torch import _safetensors as st
w, out = train_models.WORKLOADS[sys.argv[3]], sys.argv[4]
torch.manual_seed(0)
x, y = w.load()
rlx_torch.export(w.factory(), (x[:w.batch],), os.path.join(out, "train_model"),
                 name=sys.argv[3] + "_train", train=True, loss_fn=F.cross_entropy,
                 target=y[:w.batch])
st.save_file({"x": x.contiguous(), "target": y}, os.path.join(out, "train.safetensors"))
"""

TORCH_LOOP = r"""
import sys, time, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
torch.set_num_threads(int(sys.argv[3]))
import train_models
w = train_models.WORKLOADS[sys.argv[2]]
torch.manual_seed(0)
xtr, ytr = w.load()
model = w.factory().train()
opt = torch.optim.Adam(model.parameters(), lr=w.lr)
epochs, batch, steps = int(sys.argv[4]), w.batch, 0
g = torch.Generator().manual_seed(0)
t0 = time.perf_counter()
for _ in range(epochs):
    perm = torch.randperm(len(ytr), generator=g)
    for b in range(len(ytr) // batch):
        idx = perm[b * batch:(b + 1) * batch]
        opt.zero_grad()
        loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
        steps += 1
print(f"torch {steps} steps in {time.perf_counter() - t0:.4f}s")
"""


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    m = re.search(r"(\d+) steps in ([0-9.]+)s", p.stdout + p.stderr)
    if not m:
        sys.exit(f"no step time in the output of {' '.join(cmd)}:\n{p.stdout}\n{p.stderr}")
    return int(m.group(1)), float(m.group(2))


def main():
    sys.path.insert(0, HERE)
    import train_models
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--models", default=",".join(train_models.WORKLOADS))
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "rlx"))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "train_step"))
    a = ap.parse_args()
    models = a.models.split(",")
    for name in models:
        if name not in train_models.WORKLOADS:
            sys.exit(f"unknown model {name!r}; the models are {', '.join(train_models.WORKLOADS)}")
        d = os.path.join(a.out, name)
        if not os.path.exists(os.path.join(d, "train.safetensors")):
            subprocess.run([PY, "-c", EXPORT, os.path.join(ROOT, "python"), HERE, name, d],
                           check=True)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| model | threads | rlx ms/step | PyTorch ms/step | rlx/PyTorch |")
    print("|---|---:|---:|---:|---:|")
    for name in models:
        w, d = train_models.WORKLOADS[name], os.path.join(a.out, name)
        for t in [int(x) for x in a.threads.split(",")]:
            blas = "1" if name == "digits_cnn" else str(t)
            env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OPENBLAS_NUM_THREADS=blas)
            rlx_ms, torch_ms = [], []
            with tempfile.TemporaryDirectory() as tmp:
                for r in range(a.rounds):
                    steps, s = run([a.rlx, "train", os.path.join(d, "train_model"), "--data",
                                    os.path.join(d, "train.safetensors"), "--optimizer", "adam",
                                    "--lr", str(w.lr), "--epochs", str(a.epochs), "--batch",
                                    str(w.batch), "--seed", "0", "--threads", str(t), "--out",
                                    os.path.join(tmp, f"r{r}")])
                    rlx_ms.append(1e3 * s / steps)
                    steps, s = run([PY, "-c", TORCH_LOOP, HERE, name, str(t), str(a.epochs)],
                                   env=env)
                    torch_ms.append(1e3 * s / steps)
            rm, tm = statistics.median(rlx_ms), statistics.median(torch_ms)
            print(f"| {name} | {t} | {rm:.2f} | {tm:.2f} | {rm / tm:.2f} |", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
