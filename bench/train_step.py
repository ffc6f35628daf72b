#!/usr/bin/python3
"""Training-step time, rlx beside PyTorch 1.13 eager, side by side (issue 11, section 6).

  /usr/bin/python3 bench/train_step.py [--threads 1,2] [--rounds 3] [--epochs 8] [--rlx build/rlx]

The digits CNN of `make run` (examples/digits/digits.py: 2 conv + BatchNorm in
training mode, batch 64, cross-entropy, Adam lr 3e-3): `rlx train` on the
train=True export against the same model and data trained by torch.optim.Adam
in a plain loop (shuffled batches of 64, the partial batch dropped as rlx
does). Each run is a fresh process, rounds interleave the two; printed per
thread count: ms per step (the median round), rlx/PyTorch (< 1: rlx faster).
rlx's time is what `rlx train` reports for its steps (no process start or
export); PyTorch's is its loop, timed the same way.
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

TORCH_LOOP = r"""
import sys, time, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
torch.set_num_threads(int(sys.argv[2]))
import digits
torch.manual_seed(0)
xtr, ytr, _, _ = digits.load()
model = digits.DigitsCNN().train()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
epochs, batch, steps = int(sys.argv[3]), 64, 0
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "rlx"))
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "train_step"))
    a = ap.parse_args()
    d = a.out
    if not os.path.exists(os.path.join(d, "train_model")):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        subprocess.run([PY, os.path.join(ROOT, "examples", "digits", "digits.py"), "prepare", d],
                       check=True, env=env)
    examples = os.path.join(ROOT, "examples", "digits")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OPENBLAS_NUM_THREADS="1")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| threads | rlx ms/step | PyTorch ms/step | rlx/PyTorch |")
    print("|---|---:|---:|---:|")
    for t in [int(x) for x in a.threads.split(",")]:
        rlx_ms, torch_ms = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.rounds):
                steps, s = run([a.rlx, "train", os.path.join(d, "train_model"), "--data",
                                os.path.join(d, "train.safetensors"), "--optimizer", "adam",
                                "--lr", "3e-3", "--epochs", str(a.epochs), "--batch", "64",
                                "--seed", "0", "--threads", str(t), "--out",
                                os.path.join(tmp, f"r{r}")])
                rlx_ms.append(1e3 * s / steps)
                steps, s = run([PY, "-c", TORCH_LOOP, examples, str(t), str(a.epochs)], env=env)
                torch_ms.append(1e3 * s / steps)
        rm, tm = statistics.median(rlx_ms), statistics.median(torch_ms)
        print(f"| {t} | {rm:.2f} | {tm:.2f} | {rm / tm:.2f} |", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
