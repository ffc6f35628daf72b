#!/usr/bin/python3
"""Race: rlx vs ONNX Runtime 1.30 vs PyTorch eager on whole models, CPU, batch 1.

  /usr/bin/python3 bench/race.py [--threads 2] [--runs 10] [--rounds 3] [--warmup 2]
                                 [--models resnet18,mobilenet_v2,bert,gpt2,small_cnn]
                                 [--out out/race] [--rlx build/rlx] [--peers DIR] [--reexport]
                                 [--bf16]

Needs Debian's torch 1.13 + torchvision (/usr/bin/python3) and onnxruntime-node
1.30 (scripts/install-peers.sh puts it in $RLX_PEERS_DIR, default ~/.cache/rlx-peers).

Each model is built once with random weights (BatchNorm statistics re-estimated
on random data, see shared/ref/peers.md) and exported twice into OUT/MODEL/
(cached; --reexport redoes it): with rlx_torch (OUT/MODEL/rlx/) and with
torch.onnx.export at opset 17 (OUT/MODEL/model.onnx), next to the inputs, the
eager outputs (reference) and the weights (state.pt) for the PyTorch process.

Then, in --rounds interleaved rounds (per round: every model, and per model the
three runtimes in an order that rotates from round to round), each runtime runs
in a fresh process, untimed warm-up runs first, then --runs timed runs:
  rlx      `rlx run OUT/MODEL/rlx --inputs IN --bench N --threads T` (its first
           run plus one warm-up are untimed; it prints median, min and max)
  ORT      bench/ort_peer.js: intraOpNumThreads T, interOpNumThreads 1,
           graphOptimizationLevel 'all', sequential execution
  PyTorch  eager, no_grad, torch.set_num_threads(T), OMP_WAIT_POLICY=PASSIVE;
           OPENBLAS_NUM_THREADS=1 for CNNs (their convs run on OpenMP) and =T for
           transformers (their matmuls run on OpenBLAS), which is fair on 2 cores.
The table's min is the fastest single run of all rounds, the median is the
median of the per-round medians and the max is the slowest per-round median;
the per-round medians and each runtime's slowest single run are printed too.
rlx's and ORT's outputs (first round) are compared with PyTorch eager's
(cosine, max |err|).

--bf16 adds a fourth runtime to every round, rlx with --matmul-precision bf16
(matmuls and GEMM convs with a constant weight round their operands to bf16
and sum in f32, as PyTorch's float32 matmul precision 'medium'; ORT and
PyTorch stay f32), with its own columns and cosine.

--models also takes trained models that ship as ONNX (silero_vad, ppocr_det,
ppocr_rec, ppocr_cls; scripts/install-models.sh installs them): rlx runs the
.onnx file itself (`rlx run MODEL.onnx`, importing for the inputs' dims), there
is no PyTorch run, and rlx's outputs are compared with ORT's (the "cosine rlx"
column; the details give max |err|). Peak memory: rlx's planned activation arena (from rlx
run), and each process's peak RSS (GNU /usr/bin/time: runtime + weights + arena).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
MODELS = ["resnet18", "mobilenet_v2", "bert", "gpt2", "small_cnn"]
CNNS = {"resnet18", "mobilenet_v2", "small_cnn"}
LABELS = {
    "resnet18": "resnet18 224²",
    "mobilenet_v2": "mobilenet_v2 224²",
    "bert": "BERT-base encoder, seq 128",
    "gpt2": "GPT-2-small prefill 128 → logits",
    "small_cnn": "small CNN 32²",
}
RUNTIMES = ["rlx", "ort", "torch"]
# Trained models that ship as ONNX (scripts/install-models.sh): no PyTorch
# runtime, and rlx's outputs are compared with ORT's. name: (file under the
# models directory, {input: (dims, dtype)} of the inputs fed, rlx run flags).
ONNX_MODELS = {
    "silero_vad": ("silero/silero_vad_v5.onnx",
                   {"input": ((1, 576), "float32"), "state": ((2, 1, 128), "float32"),
                    "sr": ((), "int64")}, []),
    "ppocr_det": ("ppocr/ch_PP-OCRv4_det_infer.onnx", {"x": ((1, 3, 640, 640), "float32")}, []),
    "ppocr_rec": ("ppocr/ch_PP-OCRv4_rec_infer.onnx", {"x": ((1, 3, 48, 320), "float32")}, []),
    "ppocr_cls": ("ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                  {"x": ((1, 3, 48, 192), "float32")}, []),
}
LABELS.update({
    "silero_vad": "Silero VAD v5, one 32 ms window",
    "ppocr_det": "PP-OCRv4 det 640²",
    "ppocr_rec": "PP-OCRv4 rec 48×320",
    "ppocr_cls": "PP-OCR cls 48×192",
})
# Single layers, to race one kernel: conv_C_O_H_k3s1g1 is Conv2d(C, O, 3, stride 1,
# padding 1, groups 1, no bias) + BatchNorm + ReLU on [1, C, H, H]; maxpool_C_H_k3s2 is
# MaxPool2d(3, 2, padding 1) on [1, C, H, H].
LAYERS = {
    "conv": re.compile(r"conv_(?P<c>\d+)_(?P<o>\d+)_(?P<h>\d+)_k(?P<k>\d+)s(?P<s>\d+)g(?P<g>\d+)"),
    "maxpool": re.compile(r"maxpool_(?P<c>\d+)_(?P<h>\d+)_k(?P<k>\d+)s(?P<s>\d+)"),
}


def parse_layer(name):
    """(kind, {field: int}) for a layer model name, else None."""
    for kind, rx in LAYERS.items():
        m = rx.fullmatch(name)
        if m:
            return kind, {k: int(v) for k, v in m.groupdict().items()}
    return None



# ---------------------------------------------------------------- models (child processes)


def _models():
    """Model factories, imported lazily: the parent process never builds a model."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python")]
    import rlx_torch_models as M

    def vision(name, fit):
        import torchvision
        M._seed()
        m = getattr(torchvision.models, name)()  # 1000 classes, random weights
        if fit:
            M._reestimate_bn(m, (4, 3, 224, 224), steps=3)
        m.eval()
        return m, (torch.randn(1, 3, 224, 224),)

    class BertEncoder(nn.Module):
        """BERT-base shaped encoder stack: 12 post-norm layers, 768/12/3072, no embeddings."""

        def __init__(self, n=12, d=768, h=12, ff=3072):
            super().__init__()
            self.layers = nn.ModuleList(
                [nn.TransformerEncoderLayer(d, h, ff, batch_first=True) for _ in range(n)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    def bert(fit):
        M._seed()
        m = BertEncoder()
        for layer in m.layers:  # distinct, well-scaled weights per layer
            M._reinit(layer)
        m.eval()
        return m, (torch.randn(1, 128, 768),)

    def gpt2(fit):
        # tests/python/rlx_torch_models.py's GPT at GPT-2 small's shape: 124M params, tied head.
        M._seed()
        m = M.GPT(vocab=50257, d=768, h=12, n=12, ctx=1024)
        m.eval()
        return m, (torch.randint(0, 50257, (1, 128)),)

    class SmallCNN5(nn.Module):
        """Five weight layers on 32x32: four conv+BN+ReLU (two max-pools), global pool, linear."""

        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.c2, self.b2 = nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
            self.c3, self.b3 = nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)
            self.c4, self.b4 = nn.Conv2d(64, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = F.relu(self.b1(self.c1(x)))
            x = self.pool(F.relu(self.b2(self.c2(x))))
            x = self.pool(F.relu(self.b3(self.c3(x))))
            x = F.relu(self.b4(self.c4(x)))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    def small_cnn(fit):
        M._seed()
        m = SmallCNN5()
        if fit:
            M._reestimate_bn(m, (8, 3, 32, 32))
        m.eval()
        return m, (torch.randn(1, 3, 32, 32),)

    def layer(name, fit):
        kind, f = parse_layer(name)
        C, H, k, st = f["c"], f["h"], f["k"], f["s"]
        M._seed()
        if kind == "conv":
            conv = nn.Conv2d(C, f["o"], k, st, k // 2, groups=f["g"], bias=False)
            net = nn.Sequential(conv, nn.BatchNorm2d(f["o"]), nn.ReLU())
            if fit:
                M._reestimate_bn(net, (4, C, H, H))
        else:
            net = nn.Sequential(nn.MaxPool2d(k, st, k // 2))
        net.eval()
        return net, (torch.randn(1, C, H, H),)

    class Factories(dict):
        def __missing__(self, name):  # a layer model (parse_layer)
            if not parse_layer(name):
                raise KeyError(name)
            return lambda fit: layer(name, fit)

    return Factories({
        "resnet18": lambda fit: vision("resnet18", fit),
        "mobilenet_v2": lambda fit: vision("mobilenet_v2", fit),
        "bert": bert,
        "gpt2": gpt2,
        "small_cnn": small_cnn,
    })


def export_child(name, d, threads):
    """Builds one model and writes OUT/NAME/{rlx/, model.onnx, inputs, reference, state.pt}."""
    import traceback

    import torch
    torch.set_num_threads(threads)
    import rlx_torch
    from rlx_torch import _safetensors as st
    model, inputs = _models()[name](True)
    os.makedirs(d, exist_ok=True)
    meta = {"name": name, "errors": {}}
    ids = [f"input_{i}" for i in range(len(inputs))]
    t0 = time.time()
    try:
        rlx_torch.export(model, inputs, os.path.join(d, "rlx"), name=name)
        with open(os.path.join(d, "rlx", "torch-ir.json")) as f:
            ids = [i["id"] for i in json.load(f)["inputs"]]
    except Exception as e:  # reported in the table, the ONNX export still runs
        meta["errors"]["rlx_export"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    meta["rlx_export_s"] = time.time() - t0
    if "rlx_export" in meta["errors"]:
        import inspect
        ids = list(inspect.signature(model.forward).parameters)[:len(inputs)]
    t0 = time.time()
    try:
        # Not under no_grad: nn.TransformerEncoderLayer would take its fused fast path
        # (_transformer_encoder_layer_fwd), which the ONNX exporter cannot express.
        torch.onnx.export(model, tuple(inputs), os.path.join(d, "model.onnx"), opset_version=17,
                          input_names=ids, output_names=["out::0"], do_constant_folding=True)
    except Exception as e:
        meta["errors"]["onnx_export"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    meta["onnx_export_s"] = time.time() - t0
    with torch.no_grad():
        out = model(*inputs)
    st.save_file(dict(zip(ids, inputs)), os.path.join(d, "inputs.safetensors"))
    st.save_file({"out::0": out}, os.path.join(d, "reference.safetensors"))
    torch.save(model.state_dict(), os.path.join(d, "state.pt"))
    meta["inputs"] = ids
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def prepare_onnx(name, d):
    """OUT/NAME/{model.onnx (a link to the installed file), inputs.safetensors, meta.json}."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import onnx_common
    file, inputs, _ = ONNX_MODELS[name]
    src = os.path.join(onnx_common.models_dir(), file)
    if not os.path.exists(src):
        return f"{src} is missing: run scripts/install-models.sh"
    os.makedirs(d, exist_ok=True)
    link = os.path.join(d, "model.onnx")
    for old in (link, os.path.join(d, "rlx_out.safetensors"), os.path.join(d, "ort_out.safetensors")):
        if os.path.lexists(old):
            os.remove(old)
    os.symlink(src, link)
    rng = np.random.default_rng(0)
    feeds = {}
    for k, (dims, dt) in inputs.items():
        # Silero's sample rate; else unit-scale data, as normalized images and audio are.
        feeds[k] = (np.array(16000, np.int64) if k == "sr"
                    else rng.standard_normal(dims).astype(dt) * (0.1 if name == "silero_vad" else 1))
    onnx_common.save_safetensors(feeds, os.path.join(d, "inputs.safetensors"))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"errors": {}, "onnx_file": src}, f)
    return None


def torch_child(name, d, threads, runs, warmup):
    """Times PyTorch eager in this (fresh) process; prints one JSON line."""
    import torch
    from rlx_torch import _safetensors as st
    torch.set_num_threads(threads)
    model, _ = _models()[name](False)
    model.load_state_dict(torch.load(os.path.join(d, "state.pt")))
    model.eval()
    with open(os.path.join(d, "meta.json")) as f:
        ids = json.load(f)["inputs"]
    feeds = st.load_file(os.path.join(d, "inputs.safetensors"))
    args = [feeds[i] for i in ids]
    ms = []
    with torch.no_grad():
        for _ in range(warmup):
            model(*args)
        for _ in range(runs):
            t0 = time.perf_counter()
            model(*args)
            ms.append((time.perf_counter() - t0) * 1e3)
    s = sorted(ms)
    print(json.dumps({"min_ms": s[0], "median_ms": s[len(s) // 2], "max_ms": s[-1], "ms": ms,
                      "torch": torch.__version__}))


# ---------------------------------------------------------------- parent


TIME = "/usr/bin/time"  # GNU time (Debian package "time") measures a child's peak RSS


def run_proc(cmd, env=None, timeout=900):
    """Runs cmd; returns (returncode, stdout, stderr, peak RSS bytes or None).

    The peak RSS comes from GNU time, not from our own wait4: Linux counts the
    memory a child had before exec (here a copy of this python process, torch
    included) in its ru_maxrss, while time's small forked child keeps it honest.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("w+", suffix=".rss") as rssf:
        full = [TIME, "-q", "-f", "%M", "-o", rssf.name] + cmd if os.access(TIME, os.X_OK) else cmd
        try:
            p = subprocess.Popen(full, stdout=out, stderr=err, env=env, text=True)
            p.wait(timeout)
        except OSError as e:
            return 127, "", f"{cmd[0]}: {e}", None
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            err.write(f"\n(killed after {timeout} s)")
        out.seek(0)
        err.seek(0)
        rss = None
        try:
            rss = int(open(rssf.name).read().split()[-1]) * 1024
        except (ValueError, IndexError):
            pass
        return p.returncode, out.read(), err.read(), rss


def tail(s, n=1500):
    s = s.strip()
    return s if len(s) <= n else "..." + s[-n:]


def parse_bytes(s):
    m = re.match(r"([0-9.]+)\s*(B|KiB|MiB|GiB)", s)
    if not m:
        return None
    return float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]


def human(b):
    if b is None:
        return "—"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:.1f} {unit}"
    return f"{b:.0f} B"


def time_rlx(a, name, d, check, rt="rlx"):
    model, flags = ((os.path.join(d, "model.onnx"), ONNX_MODELS[name][2]) if name in ONNX_MODELS
                    else (os.path.join(d, "rlx"), []))
    cmd = [a.rlx, "run", model, "--inputs", os.path.join(d, "inputs.safetensors"),
           "--bench", str(a.runs), "--threads", str(a.threads),
           "--matmul-precision", "bf16" if rt == "rlx_bf16" else "f32"] + flags
    if check:
        cmd += ["-o", os.path.join(d, f"{rt}_out.safetensors")]
    rc, out, err, rss = run_proc(cmd)
    m = re.search(r"median ([0-9.]+) ms, min ([0-9.]+) ms, max ([0-9.]+) ms", out)
    if rc != 0 or not m:
        return {"error": f"rlx run exited {rc}:\n{tail(out + err)}"}
    arena = re.search(r"peak activation memory: (.*)", out)
    return {"median_ms": float(m.group(1)), "min_ms": float(m.group(2)),
            "max_ms": float(m.group(3)), "rss": rss,
            "arena": parse_bytes(arena.group(1)) if arena else None}


def time_ort(a, d, check):
    cmd = ["node", os.path.join(HERE, "ort_peer.js"), os.path.join(d, "model.onnx"),
           os.path.join(d, "inputs.safetensors"), "--runs", str(a.runs), "--warmup",
           str(a.warmup), "--threads", str(a.threads), "--peers", a.peers]
    if check:
        cmd += ["--out", os.path.join(d, "ort_out.safetensors")]
    rc, out, err, rss = run_proc(cmd)
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"ort_peer.js exited {rc}:\n{tail(out + err)}"}
    r["rss"] = rss
    return r


def torch_env(name, T):
    return dict(os.environ, OMP_NUM_THREADS=str(T), OMP_WAIT_POLICY="PASSIVE",
                OPENBLAS_NUM_THREADS="1" if (name in CNNS or parse_layer(name)) else str(T))


def time_torch(a, name, d, check):
    cmd = [PY, os.path.abspath(__file__), "--torch-child", name, "--out", a.out, "--threads",
           str(a.threads), "--runs", str(a.runs), "--warmup", str(a.warmup)]
    rc, out, err, rss = run_proc(cmd, env=torch_env(name, a.threads))
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"PyTorch child exited {rc}:\n{tail(out + err)}"}
    r["rss"] = rss
    return r


def compare(ref_path, out_path):
    import numpy as np
    from rlx_torch import _safetensors as st
    ref = st.load_file(ref_path)["out::0"].double().numpy().ravel()
    got = st.load_file(out_path)
    if "out::0" not in got:
        return {"error": f"{out_path} has outputs {list(got)}, not out::0"}
    got = got["out::0"].double().numpy().ravel()
    if got.shape != ref.shape:
        return {"error": f"output has {got.size} elements, PyTorch's {ref.size}"}
    cos = float(np.dot(ref, got) / (np.linalg.norm(ref) * np.linalg.norm(got) + 1e-300))
    return {"cosine": cos, "max_err": float(np.max(np.abs(ref - got))),
            "max_ref": float(np.max(np.abs(ref)))}


def compare_outputs(ref_path, out_path):
    """rlx's outputs against ORT's, name by name: the worst cosine and max |err|."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import numpy as np
    import onnx_common
    ref, got = onnx_common.load_safetensors(ref_path), onnx_common.load_safetensors(out_path)
    if set(ref) != set(got):
        return {"error": f"{out_path} has outputs {sorted(got)}, ORT's {sorted(ref)}"}
    worst = {"cosine": 1.0, "max_err": 0.0, "max_ref": 0.0}
    for k in ref:
        r, g = ref[k].astype(np.float64).ravel(), got[k].astype(np.float64).ravel()
        if r.shape != g.shape:
            return {"error": f"output {k} has {g.size} elements, ORT's {r.size}"}
        cos = float(np.dot(r, g) / (np.linalg.norm(r) * np.linalg.norm(g) + 1e-300))
        worst = {"cosine": min(worst["cosine"], cos),
                 "max_err": max(worst["max_err"], float(np.max(np.abs(r - g)))),
                 "max_ref": max(worst["max_ref"], float(np.max(np.abs(r))))}
    return worst


def cpu_model():
    name, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k.strip() == "model name" and name == "unknown CPU":
                name = v.strip()
            elif k.strip() == "flags" and not flags:
                flags = set(v.split())
    isa = [x for x in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                       "avx512_bf16") if x in flags]
    return name, isa


def fmt3(mn, med, mx):
    def f(x):
        return "—" if x is None else (f"{x:.3g}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}")
    return f"{f(mn)} / {f(med)} / {f(mx)}"


def summarize(rounds):
    """Per-runtime summary over the rounds that succeeded."""
    ok = [r for r in rounds if "error" not in r]
    if not ok:
        return None
    meds = [r["median_ms"] for r in ok]
    return {"min": min(r["min_ms"] for r in ok), "median": statistics.median(meds),
            "max": max(meds), "round_medians": meds,
            "run_max": max(r["max_ms"] for r in ok) if all("max_ms" in r for r in ok) else None,
            "rss": max((r["rss"] for r in ok if r.get("rss")), default=None),
            "arena": ok[0].get("arena")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per runtime per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed runs before timing for ORT and PyTorch (rlx run does 2)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated: " + ",".join(MODELS) +
                    ", or single layers conv_C_O_H_kKsSgG / maxpool_C_H_kKsS")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "race"),
                    help="exports are cached here, results written here")
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "rlx"))
    ap.add_argument("--bf16", action="store_true",
                    help="also time rlx with --matmul-precision bf16 (matmuls and GEMM convs "
                    "with a constant weight on bf16 operands, f32 sums) in every round")
    ap.add_argument("--peers", default=os.environ.get(
        "RLX_PEERS_DIR", os.path.join(os.path.expanduser("~"), ".cache", "rlx-peers")))
    ap.add_argument("--reexport", action="store_true", help="ignore cached exports")
    ap.add_argument("--export-child", help=argparse.SUPPRESS)
    ap.add_argument("--torch-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)
    sys.path[:0] = [os.path.join(ROOT, "python")]
    if a.export_child:
        return export_child(a.export_child, os.path.join(a.out, a.export_child), a.threads)
    if a.torch_child:
        return torch_child(a.torch_child, os.path.join(a.out, a.torch_child), a.threads, a.runs,
                           a.warmup)

    t_start = time.time()
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    bad = [m for m in models if m not in MODELS and m not in ONNX_MODELS and not parse_layer(m)]
    if bad:
        ap.error(f"unknown model(s) {bad}; choose from {MODELS + list(ONNX_MODELS)}")
    a.rlx = os.path.abspath(a.rlx)
    if not os.access(a.rlx, os.X_OK):
        ap.error(f"no rlx binary at {a.rlx} (build it, or pass --rlx PATH)")
    if not os.path.exists(os.path.join(a.peers, "node_modules", "onnxruntime-node")):
        ap.error(f"no onnxruntime-node under {a.peers}: run scripts/install-peers.sh")
    cpu, isa = cpu_model()
    print(f"CPU: {cpu} ({os.cpu_count()} cores; {' '.join(isa)})")
    print(f"threads {a.threads}, {a.rounds} rounds × {a.runs} timed runs per runtime, "
          f"rlx {a.rlx}, peers {a.peers}")
    load_start = os.getloadavg()[0]
    print(f"load average at start: {load_start:.2f}", flush=True)
    failures = []

    # 1. export (cached)
    for name in models:
        d = os.path.join(a.out, name)
        meta_path = os.path.join(d, "meta.json")
        if name in ONNX_MODELS:
            e = prepare_onnx(name, d)
            if e:
                failures.append(f"{name}: {e}")
            continue
        if os.path.exists(meta_path) and not a.reexport:
            continue
        if os.path.exists(meta_path):
            os.remove(meta_path)
        print(f"exporting {name} to {d} ...", flush=True)
        t0 = time.time()
        rc, out, err, _ = run_proc([PY, os.path.abspath(__file__), "--export-child", name, "--out",
                                    a.out, "--threads", str(a.threads)],
                                   env=torch_env(name, a.threads), timeout=1800)
        if rc != 0 or not os.path.exists(meta_path):
            failures.append(f"{name}: export process exited {rc}:\n{tail(out + err)}")
            print(f"  failed ({time.time() - t0:.0f} s)", flush=True)
            continue
        print(f"  done in {time.time() - t0:.0f} s", flush=True)
    metas = {}
    for name in models:
        try:
            with open(os.path.join(a.out, name, "meta.json")) as f:
                metas[name] = json.load(f)
        except OSError:
            continue
        for what, e in metas[name]["errors"].items():
            failures.append(f"{name}: {what} failed: {tail(e, 3000)}")

    # 2. race: rounds × models × runtimes (order rotates per round)
    runtimes = RUNTIMES + (["rlx_bf16"] if a.bf16 else [])
    res = {n: {rt: [] for rt in runtimes} for n in metas}
    checks = {n: {} for n in metas}
    for rnd in range(a.rounds):
        k = rnd % len(runtimes)
        order = runtimes[k:] + runtimes[:k]
        print(f"round {rnd + 1}/{a.rounds} (order {', '.join(order)}; load "
              f"{os.getloadavg()[0]:.2f})", flush=True)
        for name in metas:
            d = os.path.join(a.out, name)
            errs = metas[name]["errors"]
            line = []
            for rt in order:
                if rt == "torch" and name in ONNX_MODELS:
                    continue
                if rt.startswith("rlx") and "rlx_export" in errs:
                    continue
                if rt == "ort" and "onnx_export" in errs:
                    continue
                check = rnd == 0
                r = (time_rlx(a, name, d, check, rt) if rt.startswith("rlx") else
                     time_ort(a, d, check) if rt == "ort" else time_torch(a, name, d, check))
                res[name][rt].append(r)
                if "error" in r:
                    failures.append(f"{name}: {rt} round {rnd + 1}: {r['error']}")
                    line.append(f"{rt} FAILED")
                    continue
                line.append(f"{rt} {r['median_ms']:.3g} ms")
                if check and rt != "torch" and name not in ONNX_MODELS:
                    c = compare(os.path.join(d, "reference.safetensors"),
                                os.path.join(d, f"{rt}_out.safetensors"))
                    checks[name][rt] = c
                    if "error" in c:
                        failures.append(f"{name}: {rt} output: {c['error']}")
            if rnd == 0 and name in ONNX_MODELS and all(
                    os.path.exists(os.path.join(d, f"{rt}_out.safetensors")) for rt in ("rlx", "ort")):
                c = compare_outputs(os.path.join(d, "ort_out.safetensors"),
                                    os.path.join(d, "rlx_out.safetensors"))
                checks[name]["rlx"] = c
                if "error" in c:
                    failures.append(f"{name}: rlx output: {c['error']}")
            print(f"  {name}: " + ", ".join(line), flush=True)
    load_end = os.getloadavg()[0]

    # 3. report
    rows, detail = [], []
    for name in metas:
        s = {rt: summarize(res[name][rt]) for rt in runtimes}
        c = checks[name]

        def ms(rt):
            if not s[rt]:
                return "—" if rt == "torch" and name in ONNX_MODELS else "failed"
            return fmt3(s[rt]["min"], s[rt]["median"], s[rt]["max"])

        def ratio(x, y):
            return f"{s[x]['median'] / s[y]['median']:.2f}" if s[x] and s[y] else "—"

        def cos(rt):
            return f"{c[rt]['cosine']:.6f}" if "cosine" in c.get(rt, {}) else "—"

        bf16 = (f" {ms('rlx_bf16')} | {ratio('rlx_bf16', 'ort')} | {cos('rlx_bf16')} |"
                if a.bf16 else "")
        rows.append(f"| {LABELS.get(name, name)} | {ms('rlx')} | {ms('ort')} | {ms('torch')} | "
                    f"{ratio('rlx', 'ort')} | {ratio('rlx', 'torch')} | {cos('rlx')} | {cos('ort')} | "
                    f"{human(s['rlx']['arena']) if s['rlx'] else '—'} | "
                    f"{human(s['ort']['rss']) if s['ort'] else '—'} | "
                    f"{human(s['rlx']['rss']) if s['rlx'] else '—'} |{bf16}")
        for rt, label in (("rlx", "rlx"), ("ort", "ORT"), ("torch", "PyTorch"),
                          ("rlx_bf16", "rlx bf16")):
            if rt not in s:
                continue
            if not s[rt]:
                continue
            extra = ""
            if s[rt]["run_max"] is not None:
                extra = f"; slowest single run {s[rt]['run_max']:.3g} ms"
            if rt in c and "cosine" in c[rt]:
                extra += (f"; vs {'ORT' if name in ONNX_MODELS else 'PyTorch'}: cosine {c[rt]['cosine']:.7f}, max |err| "
                          f"{c[rt]['max_err']:.3g} (max |ref| {c[rt]['max_ref']:.3g})")
            detail.append(f"  {name} {label}: round medians "
                          f"{', '.join(f'{x:.3g}' for x in s[rt]['round_medians'])} ms; peak RSS "
                          f"{human(s[rt]['rss'])}{extra}")
    head = ("| model | rlx ms (min/median/max) | ORT ms | PyTorch ms | rlx/ORT | rlx/PyTorch | "
            "cosine rlx | cosine ORT | rlx peak arena | ORT RSS | rlx RSS |" +
            (" rlx bf16 ms | bf16/ORT | cosine bf16 |" if a.bf16 else ""))
    table = "\n".join([head, "|---" + "|---:" * (13 if a.bf16 else 10) + "|"] + rows)
    total = time.time() - t_start
    torch_note = ("PyTorch: OMP_WAIT_POLICY=PASSIVE, OPENBLAS_NUM_THREADS=1 for CNNs, "
                  f"={a.threads} for transformers")
    summary = (f"CPU: {cpu}; {a.threads} threads, batch 1, {a.rounds} interleaved rounds × "
               f"{a.runs} timed runs per runtime; ms = min / median of round medians / max of round "
               f"medians; ratios on medians; "
               f"{'rlx bf16 = rlx run --matmul-precision bf16, the other columns f32; ' if a.bf16 else ''}"
               f"{torch_note}; load average start/end "
               f"{load_start:.2f} / {load_end:.2f}; total {total:.0f} s")
    print()
    print(summary)
    print()
    print(table)
    print()
    print("details:")
    print("\n".join(detail))
    if failures:
        print("\nfailures:")
        for f in failures:
            print("- " + f.replace("\n", "\n  "))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "race.md"), "w") as f:
        f.write(summary + "\n\n" + table + "\n")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"cpu": cpu, "isa": isa, "threads": a.threads, "runs": a.runs,
                   "rounds": a.rounds, "results": res, "checks": checks, "failures": failures,
                   "total_s": total}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
