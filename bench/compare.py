#!/usr/bin/python3
"""Joins rlx_bench's Google Benchmark JSON with torch_peer.py's JSON into one
Markdown table: benchmark, rlx time, torch time, torch/rlx (> 1: rlx faster),
rates and % of peak.

Rates are recomputed here from real time and the per-iteration `flop` /
`bytes` counters rlx_bench exports. "% peak" is of the fp32 compute peak
(cores x GHz x FLOP/cycle of the ISA path: 32 AVX2, 64 AVX-512) for FLOP benchmarks and of the measured read bandwidth
(membw/read_sum_256MiB) for byte benchmarks.
"""
import argparse
import json
import re
import sys

UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
READ_BW = "membw/read_sum_256MiB"


def base_name(entry):
    name = entry.get("run_name") or entry["name"]
    # Drop Google Benchmark's option suffixes: /real_time, /min_time:0.100, /repeats:3 ...
    return re.sub(r"(/(real_time|manual_time|min_time:[^/]*|repeats:[^/]*|iterations:[^/]*))+$",
                  "", name)


def load_rlx(docs):
    """Google Benchmark JSON documents (one per family run) -> context, rows, order."""
    rows, order, ctx = {}, [], {}
    for doc in docs:
        ctx = ctx or doc.get("context", {})
        for e in doc.get("benchmarks", []):
            add_rlx_entry(rows, order, e)
    for r in rows.values():
        if r["median"] is None and r["times"]:
            ts = sorted(r["times"])
            r["median"] = ts[len(ts) // 2]
    return ctx, rows, order


def add_rlx_entry(rows, order, e):
    name = base_name(e)
    if name not in rows:
        rows[name] = {"times": [], "median": None, "cv": None, "error": None, "flop": 0.0,
                      "bytes": 0.0}
        order.append(name)
    r = rows[name]
    if e.get("error_occurred"):
        r["error"] = e.get("error_message", "error")
        return
    t = e["real_time"] * UNIT_S[e.get("time_unit", "ns")]
    agg = e.get("aggregate_name") if e.get("run_type") == "aggregate" else None
    if agg == "cv":  # stddev / mean of the repetitions (a fraction)
        r["cv"] = e["real_time"]
    if agg not in (None, "median"):
        return  # mean/stddev/cv rows carry aggregated (zeroed) counters
    r["flop"] = float(e.get("flop", 0.0))
    r["bytes"] = float(e.get("bytes", 0.0))
    if agg == "median":
        r["median"] = t
    else:
        r["times"].append(t)


def load_torch(docs):
    settings, results = {}, {}
    for doc in docs:
        settings = settings or doc.get("settings", {})
        results.update(doc.get("results", {}))
    return settings, results


def read_docs(paths):
    """Splits the JSON files into rlx_bench ones ("benchmarks") and torch ones ("results")."""
    rlx, torch = [], []
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"(skipping {path}: {e})", file=sys.stderr)
            continue
        (rlx if "benchmarks" in doc else torch).append(doc)
    return rlx, torch


def fmt_ms(t):
    if t is None:
        return "n/a"
    ms = t * 1e3
    return f"{ms:.4f}" if ms < 0.1 else f"{ms:.3f}" if ms < 10 else f"{ms:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="rlx_bench and torch_peer.py JSON files, any order")
    a = ap.parse_args()

    rlx_docs, torch_docs = read_docs(a.json)
    ctx, rlx, order = load_rlx(rlx_docs)
    tset, torch = load_torch(torch_docs)
    peak = float(ctx.get("fp32_peak_gflops", "0") or 0)
    read_bw = None
    if rlx.get(READ_BW, {}).get("median"):
        read_bw = rlx[READ_BW]["bytes"] / rlx[READ_BW]["median"] / 1e9

    print(f"threads: rlx {ctx.get('rlx_threads', '?')}, torch {tset.get('threads', '?')}"
          f" | cpu: {ctx.get('online_cpus', '?')} online, {float(ctx.get('cpu_ghz', 0)):.3f} GHz"
          f" (from {ctx.get('cpu_ghz_source', '?')})")
    print(f"fp32 peak: {peak:.1f} GFLOP/s = {ctx.get('peak_cores', '?')} cores x "
          f"{float(ctx.get('cpu_ghz', 0)):.3f} GHz, {ctx.get('fp32_peak_formula', '?')}"
          f" [{ctx.get('cpu_isa', '?')} path]")
    for nm in ("membw/read_sum_256MiB", "membw/memcpy_256MiB"):
        r = rlx.get(nm)
        if r and r["median"]:
            print(f"measured {nm}: {r['bytes'] / r['median'] / 1e9:.1f} GB/s"
                  + (f" (torch: {r['bytes'] / torch[nm]['time_s'] / 1e9:.1f} GB/s)"
                     if nm in torch else ""))
    if tset:
        keys = ("torch", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "timing")
        print("torch peer: " + ", ".join(f"{k}={tset.get(k)}" for k in keys))
    print()
    print("| benchmark | rlx ms | rlx cv | torch ms | torch/rlx | rlx rate | torch rate | % peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    missing = []
    names = order + [n for n in torch if n not in rlx]
    for name in names:
        r = rlx.get(name, {"median": None, "error": "not run", "flop": 0.0, "bytes": 0.0})
        t_rlx = r["median"]
        t_torch = torch.get(name, {}).get("time_s")
        ratio = f"{t_torch / t_rlx:.2f}" if t_rlx and t_torch else "n/a"
        rate_r = rate_t = pct = ""
        if r["flop"] > 0:
            unit, work, ref = "GFLOP/s", r["flop"], peak
        elif r["bytes"] > 0:
            unit, work, ref = "GB/s", r["bytes"], read_bw
        else:
            unit = None
        if unit:
            if t_rlx:
                v = work / t_rlx / 1e9
                rate_r = f"{v:.1f} {unit}"
                if ref and not name.startswith("membw/"):
                    pct = f"{100 * v / ref:.0f}%"
            if t_torch:
                rate_t = f"{work / t_torch / 1e9:.1f} {unit}"
        if t_rlx is None:
            missing.append((name, r.get("error") or "no result"))
        cv = f"{100 * r['cv']:.0f}%" if r.get("cv") is not None else ""
        print(f"| {name} | {fmt_ms(t_rlx)} | {cv} | {fmt_ms(t_torch)} | {ratio} | {rate_r} | {rate_t} "
              f"| {pct} |")
    print()
    print("torch/rlx > 1 means rlx is faster. rlx ms: median of the repetitions; rlx cv: their "
          "stddev/mean. % peak: of the fp32 compute peak (GFLOP/s rows) or of the measured read "
          "bandwidth (GB/s rows).")
    if missing:
        print()
        print("not measured in rlx:")
        for name, err in missing:
            print(f"  {name}: {err.splitlines()[0][:160]}")


if __name__ == "__main__":
    main()
