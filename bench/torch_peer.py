#!/usr/bin/python3
"""PyTorch 1.13 peer of rlx_bench: the same ops, shapes and benchmark names.

Each op is timed as the median of N single calls after a warm-up (up to 20
calls or 0.3 s, like rlx_bench), N chosen so
one benchmark takes about --min-time seconds (at least --min-runs calls).
Prints JSON: {"settings": {...}, "results": {name: {"time_s", "runs"}}}.

Threading caveats of this torch build (Debian 1.13, BLAS_INFO=generic): matmul
goes to OpenBLAS (pthread build, own pool, OPENBLAS_NUM_THREADS), convs to
oneDNN and element-wise ops to ATen, both on OpenMP (torch.set_num_threads).
Two pools share the cores, so OpenMP is told not to spin between regions
(OMP_WAIT_POLICY=PASSIVE); otherwise idle OpenMP threads steal the cores
OpenBLAS needs. All of this is set before torch is imported.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int,
                    default=int(os.environ.get("RLX_BENCH_THREADS", "2")))
    ap.add_argument("--filter", default=".", help="regex on benchmark names")
    ap.add_argument("--min-time", type=float, default=0.5,
                    help="seconds of timed calls per benchmark")
    ap.add_argument("--min-runs", type=int, default=5)
    ap.add_argument("--max-runs", type=int, default=1000)
    ap.add_argument("--out", help="write JSON here instead of stdout")
    return ap.parse_args()


args = parse_args()
n = str(args.threads)
for var, val in (("OMP_NUM_THREADS", n), ("OPENBLAS_NUM_THREADS", n),
                 ("MKL_NUM_THREADS", n), ("OMP_WAIT_POLICY", "PASSIVE")):
    os.environ.setdefault(var, val)

import torch  # noqa: E402  (after the thread environment is set)
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
torch.set_grad_enabled(False)
gen = torch.Generator().manual_seed(0)


def rand(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, generator=gen) * (hi - lo) + lo


# ---- the benchmarks: name -> a zero-argument callable (inputs prepared here)
BENCHES = []


def bench(name):
    def deco(make):
        BENCHES.append((name, make))
        return make
    return deco


def membw():
    nfl = (256 << 20) // 4
    x = torch.ones(nfl)
    y = torch.empty(nfl)
    return [("membw/read_sum_256MiB", lambda: x.sum()),
            ("membw/memcpy_256MiB", lambda: y.copy_(x))]


def sgemm(m, k, nn):
    a, b = rand(m, k), rand(k, nn)
    return lambda: torch.matmul(a, b)


def dims_name(d):
    return "x".join(str(v) for v in d)


def elementwise(d):
    out = []
    x = rand(*d, lo=-4, hi=4)
    out.append((f"softmax/{dims_name(d)}", lambda: F.softmax(x, dim=-1)))
    xl, g, b = rand(*d), rand(d[-1], lo=0.5, hi=1.5), rand(d[-1])
    out.append((f"layer_norm/{dims_name(d)}",
                lambda: F.layer_norm(xl, (d[-1],), g, b, 1e-5)))
    p, q = rand(*d), rand(*d)
    out.append((f"add/{dims_name(d)}", lambda: torch.add(p, q)))
    out.append((f"mul/{dims_name(d)}", lambda: torch.mul(p, q)))
    out.append((f"gelu/{dims_name(d)}", lambda: F.gelu(x)))  # erf form
    out.append((f"gelu_tanh/{dims_name(d)}", lambda: F.gelu(x, approximate="tanh")))
    out.append((f"silu/{dims_name(d)}", lambda: F.silu(x)))
    return out


def conv(cin, hw, cout, k, s, pad):
    x = rand(1, cin, hw, hw)
    w = rand(cout, cin, k, k, lo=-0.1, hi=0.1)
    return lambda: F.conv2d(x, w, None, s, pad)


def attention(mask, S, B=1, H=12, D=64):
    # torch 1.13 has no F.scaled_dot_product_attention: the textbook form,
    # scaled and masked in place so only the score matrix and its softmax are
    # allocated per call (each is B*H*S*S floats: 200 MB at S=2048).
    q, k, v = rand(B, H, S, D), rand(B, H, S, D), rand(B, H, S, D)
    scale = 1.0 / math.sqrt(D)
    m = torch.ones(S, S, dtype=torch.bool).triu(1) if mask == "causal" else None

    def run():
        s = torch.matmul(q, k.transpose(-2, -1)).mul_(scale)
        if m is not None:
            s.masked_fill_(m, float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), v)
    return run


def all_benches():
    """Yields (name, builder) lazily so only one benchmark's data is alive."""
    yield "membw", membw
    for m, k, nn in ((256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                     (2048, 2048, 2048), (128, 768, 3072), (128, 3072, 768),
                     (512, 768, 768)):
        yield f"sgemm/{m}x{k}x{nn}", (lambda m=m, k=k, nn=nn: sgemm(m, k, nn))
    for d in ((4, 512, 768), (1, 128, 768)):
        yield f"elementwise/{dims_name(d)}", (lambda d=d: elementwise(d))
    for cin, hw, cout, k, s, pad in ((3, 224, 64, 7, 2, 3), (64, 56, 64, 3, 1, 1),
                                     (128, 28, 128, 3, 1, 1), (256, 14, 256, 3, 1, 1),
                                     (512, 7, 512, 3, 1, 1), (64, 56, 128, 1, 2, 0),
                                     (128, 28, 256, 1, 2, 0), (256, 14, 512, 1, 2, 0)):
        name = f"conv/{cin}x{hw}x{hw}-{cout}k{k}s{s}"
        yield name, (lambda a=(cin, hw, cout, k, s, pad): conv(*a))
    for mask in ("none", "causal"):
        for S in (128, 512, 1024, 2048):
            yield f"attention/{mask}/s{S}", (lambda mask=mask, S=S: attention(mask, S))


def expand(name, make, rx):
    """A builder returns one callable (its own name) or a list of (name, fn)."""
    # Group builders (membw, elementwise) are only built when a member matches.
    if name in ("membw",) or name.startswith("elementwise/"):
        items = make()
        return [(nm, fn) for nm, fn in items if rx.search(nm)]
    return [(name, make())] if rx.search(name) else []


def time_one(fn):
    # Warm-up (allocator, oneDNN primitive cache, pools): up to 20 calls or
    # 0.3 s, the same rule as rlx_bench. glibc needs ~10 large allocations of
    # one size before it reuses memory instead of page-faulting fresh memory.
    t_end = time.perf_counter() + 0.3
    for _ in range(20):
        fn()
        if time.perf_counter() > t_end:
            break
    t0 = time.perf_counter()
    fn()
    est = max(time.perf_counter() - t0, 1e-7)
    runs = int(min(args.max_runs, max(args.min_runs, args.min_time / est)))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), runs


def main():
    rx = re.compile(args.filter)
    results = {}
    for name, make in all_benches():
        for nm, fn in expand(name, make, rx):
            t, runs = time_one(fn)
            results[nm] = {"time_s": t, "runs": runs}
            print(f"  torch {nm:32s} {t * 1e3:10.3f} ms ({runs} runs)", file=sys.stderr)
    settings = {
        "torch": torch.__version__,
        "threads": args.threads,
        "torch.get_num_threads": torch.get_num_threads(),
        "parallel_backend": torch.__config__.parallel_info().splitlines()[-1].strip(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "timing": f"median of >= {args.min_runs} calls (~{args.min_time}s)"
                  " after warm-up (<= 20 calls / 0.3 s)",
    }
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"):
        settings[var] = os.environ.get(var)
    doc = json.dumps({"settings": settings, "results": results}, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(doc + "\n")
    else:
        print(doc)


if __name__ == "__main__":
    main()
