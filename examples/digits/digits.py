"""A real model end to end, trained by rlx: a small CNN on sklearn's handwritten
digits (8x8 images, 1797 samples), defined in PyTorch, exported for training
with rlx_torch (train=True: the loss is an output, BatchNorm in training form),
trained by `rlx train`, then run by rlx, checked against PyTorch running the
same trained weights, and exported to CoreML.

  digits.py prepare OUT           the untrained CNN exported twice: OUT/train_model
                                  (train=True, loss output, batch 64) and OUT/model;
                                  OUT/train.safetensors, OUT/eval.safetensors (x, target),
                                  OUT/heldout.safetensors (x), OUT/labels.safetensors
  digits.py assemble OUT TRAINED [--threads T]
                                  OUT/trained_model: OUT/model's graph with the weights
                                  `rlx train` wrote to TRAINED; PyTorch runs the same
                                  weights on the held-out digits (predictions, latency)
  digits.py report OUT RLX_OUT.safetensors RLX_MS [COREML_OUT.safetensors]
                                  accuracy of rlx's predictions, agreement with PyTorch
                                  (and with the CoreML program), rlx/PyTorch latency
"""
import json
import os
import shutil
import sys
import time

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


def prepare(out):
    torch.manual_seed(0)
    xtr, ytr, xte, yte = load()
    model = DigitsCNN()
    # A static batch of 64 (train-mode BatchNorm's variance does not import
    # with a symbolic batch yet): rlx train drops each epoch's partial batch.
    rlx_torch.export(model, (xtr[:64],), os.path.join(out, "train_model"), name="digits_cnn_train",
                     train=True, loss_fn=F.cross_entropy, target=ytr[:64])
    rlx_torch.export(model.eval(), (xte,), os.path.join(out, "model"), name="digits_cnn")
    st.save_file({"x": xtr.contiguous(), "target": ytr}, os.path.join(out, "train.safetensors"))
    st.save_file({"x": xte.contiguous(), "target": yte}, os.path.join(out, "eval.safetensors"))
    st.save_file({"x": xte.contiguous()}, os.path.join(out, "heldout.safetensors"))
    st.save_file({"labels": yte}, os.path.join(out, "labels.safetensors"))
    print(f"exported the untrained CNN to {out}/train_model (train=True) and {out}/model; "
          f"{len(ytr)} training and {len(yte)} held-out digits")


def assemble(out, trained, threads):
    dst = os.path.join(out, "trained_model")
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    shutil.copy(os.path.join(out, "model", "torch-ir.json"), dst)
    shutil.copy(os.path.join(trained, "weights.safetensors"), dst)
    # PyTorch runs the weights rlx trained: the parity check and the latency peer.
    weights = st.load_file(os.path.join(trained, "weights.safetensors"))
    model = DigitsCNN()
    model.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
    model.eval()
    torch.set_num_threads(threads)
    xte = st.load_file(os.path.join(out, "heldout.safetensors"))["x"]
    xte = torch.as_tensor(xte)
    with torch.no_grad():
        pred = model(xte).argmax(1)
        ms = []
        for _ in range(51):
            s = time.perf_counter()
            model(xte)
            ms.append((time.perf_counter() - s) * 1e3)
    st.save_file({"torch_pred": pred}, os.path.join(out, "torch_pred.safetensors"))
    with open(os.path.join(out, "torch.json"), "w") as f:
        json.dump({"median_ms": sorted(ms[1:])[len(ms) // 2], "threads": threads}, f)
    print(f"{dst}: the inference graph with the weights rlx trained")


def report(out, rlx_out, rlx_ms, coreml_out=None):
    y = torch.as_tensor(st.load_file(os.path.join(out, "labels.safetensors"))["labels"])
    torch_pred = torch.as_tensor(st.load_file(os.path.join(out, "torch_pred.safetensors"))["torch_pred"])
    pred = torch.as_tensor(st.load_file(rlx_out)["out::0"]).argmax(1)
    with open(os.path.join(out, "torch.json")) as f:
        t = json.load(f)
    n = len(y)
    correct = int((pred == y).sum())
    agree = int((pred == torch_pred).sum())
    print(f"rlx-trained CNN, run by rlx: {correct}/{n} = {correct / n * 100:.2f}% of the held-out "
          f"digits right")
    print(f"PyTorch running the same weights agrees on {agree}/{n} predictions")
    if coreml_out:
        outs = st.load_file(coreml_out)
        cm = torch.as_tensor(next(iter(outs.values()))).argmax(1)
        print(f"the CoreML program (rlx's MIL interpreter) agrees on {int((cm == pred).sum())}/{n}")
        if int((cm == pred).sum()) != n:
            sys.exit("CoreML and rlx disagree")
    print(f"latency for the {n}-digit batch at {t['threads']} thread(s): rlx {rlx_ms:.3f} ms, "
          f"PyTorch eager {t['median_ms']:.3f} ms, rlx/PyTorch = {rlx_ms / t['median_ms']:.2f}")
    if agree != n:
        sys.exit("rlx and PyTorch disagree")
    if correct / n < 0.97:
        sys.exit(f"held-out accuracy {correct / n * 100:.2f}% is below 97%")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, out = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
    if cmd == "prepare":
        os.makedirs(out, exist_ok=True)
        prepare(out)
    elif cmd == "assemble":
        assemble(out, sys.argv[3], threads)
    elif cmd == "report":
        report(out, sys.argv[3], float(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        sys.exit(__doc__)
