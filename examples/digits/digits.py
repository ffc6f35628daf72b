"""A real model end to end: train a small CNN on sklearn's handwritten digits
(8x8 images, 1797 samples) with PyTorch, export it with rlx_torch, and check
what rlx computes on the held-out digits.

  digits.py train OUT [--threads T]   train, export OUT/model, write OUT/heldout.safetensors
                                      (input `x`), OUT/labels.safetensors, OUT/torch.json
  digits.py report OUT RLX_OUT.safetensors RLX_MS
                                      accuracy of rlx's predictions, agreement with torch,
                                      rlx/torch latency ratio
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import rlx_torch  # noqa: E402
from rlx_torch import _safetensors as st  # noqa: E402


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.b2 = nn.BatchNorm2d(32)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))                 # [N, 16, 8, 8]
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)  # [N, 32, 4, 4]
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def load(seed=0):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = 360
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]


def train(out, threads):
    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny batches: one thread trains fastest (and deterministically)
    xtr, ytr, xte, yte = load()
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    t0 = time.time()
    g = torch.Generator().manual_seed(1)
    for epoch in range(8):
        model.train()
        for idx in torch.randperm(len(ytr), generator=g).split(64):
            opt.zero_grad()
            F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
    model.eval()
    torch.set_num_threads(threads)
    with torch.no_grad():
        logits = model(xte)
        # eager latency on the held-out batch at the same thread count as rlx
        model(xte)
        ms = []
        for _ in range(50):
            s = time.perf_counter()
            model(xte)
            ms.append((time.perf_counter() - s) * 1e3)
    acc = (logits.argmax(1) == yte).float().mean().item()
    print(f"trained on {len(ytr)} digits in {time.time() - t0:.1f} s; "
          f"torch held-out accuracy {acc * 100:.2f}% ({len(yte)} digits)")
    rlx_torch.export(model, (xte,), os.path.join(out, "model"), name="digits_cnn")
    st.save_file({"x": xte.contiguous()}, os.path.join(out, "heldout.safetensors"))
    st.save_file({"labels": yte, "torch_pred": logits.argmax(1)},
                 os.path.join(out, "labels.safetensors"))
    with open(os.path.join(out, "torch.json"), "w") as f:
        json.dump({"median_ms": sorted(ms)[len(ms) // 2], "threads": threads, "accuracy": acc}, f)
    print(f"exported to {out}/model; held-out inputs in {out}/heldout.safetensors")


def report(out, rlx_out, rlx_ms):
    labels = st.load_file(os.path.join(out, "labels.safetensors"))
    y, torch_pred = labels["labels"], labels["torch_pred"]
    logits = st.load_file(rlx_out)["out::0"]
    pred = logits.argmax(1)
    with open(os.path.join(out, "torch.json")) as f:
        t = json.load(f)
    n = len(y)
    correct = int((pred == y).sum())
    agree = int((pred == torch_pred).sum())
    print(f"rlx accuracy on {n} held-out digits: {correct}/{n} = {correct / n * 100:.2f}% "
          f"(PyTorch: {t['accuracy'] * 100:.2f}%)")
    print(f"rlx vs PyTorch predictions agree on {agree}/{n} digits")
    print(f"latency for the {n}-digit batch at {t['threads']} thread(s): rlx {rlx_ms:.3f} ms, "
          f"PyTorch eager {t['median_ms']:.3f} ms, rlx/PyTorch = {rlx_ms / t['median_ms']:.2f}")
    if agree != n:
        sys.exit("rlx and PyTorch disagree")


if __name__ == "__main__":
    cmd, out = sys.argv[1], sys.argv[2]
    if cmd == "train":
        threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
        os.makedirs(out, exist_ok=True)
        train(out, threads)
    elif cmd == "report":
        report(out, sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(__doc__)
