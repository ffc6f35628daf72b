#!/usr/bin/python3
"""Runs the hostile-file suite (gen_hostile.py) against the rlx binary.

Every case must end with exit code 1 and a one-line `rlx: error:` message
that names what is wrong; no signal, no hang, no std::terminate, no sanitizer
report, no C++ library message, no "out of memory" (a lying size must not be
allocated: children run under an address-space limit unless rlx is built
with ASan), and no output file nor temporary file left at the output path.
Every control must succeed, so each case fails for the defect it plants.

  run_hostile.py --rlx build/rlx --dir build/tests/hostile [--jobs 2]
"""
import argparse
import concurrent.futures
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_hostile  # noqa: E402

FORBIDDEN = ["terminate called", "internal error", "Sanitizer", "runtime error:", "vector::",
             "basic_string", "std::", "out of memory", "Segmentation", "core dumped"]

# An error about an absurd file (a 10^6-element attribute, a huge name) is
# still a message a person reads: bounded, not megabytes.
MAX_MESSAGE = 16384


def limit_memory(mb):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    return apply if mb else None


def leftovers(out):
    """Files at or beside `out` that share its name (temporaries included)."""
    d, base = os.path.split(out)
    return [n for n in os.listdir(d) if n.startswith(base)] if os.path.isdir(d) else []


def run(rlx, c, mem_mb, timeout, want_ok):
    t0 = time.time()
    try:
        p = subprocess.run([rlx] + c["args"], capture_output=True, text=True, errors="replace",
                           timeout=timeout, preexec_fn=limit_memory(mem_mb))
    except subprocess.TimeoutExpired:
        return ["hangs (no exit after %d s)" % timeout], time.time() - t0
    problems = []
    text = p.stdout + p.stderr
    if want_ok:
        if p.returncode != 0:
            problems.append("control failed (exit %d): %s" % (p.returncode, p.stderr.strip()[-400:]))
        elif c.get("out") and not os.path.exists(c["out"]):
            problems.append("control wrote no output")
        return problems, time.time() - t0
    if p.returncode < 0:
        problems.append("killed by signal %d" % -p.returncode)
    elif p.returncode == 0:
        problems.append("accepted (exit 0): %s" % p.stdout.strip()[-300:])
    elif p.returncode != 1:
        problems.append("exit code %d" % p.returncode)
    lines = p.stderr.splitlines()
    if p.returncode > 0 and not any(ln.startswith("rlx: error: ") for ln in lines):
        problems.append("no 'rlx: error:' message: %s" % p.stderr.strip()[-300:])
    problems += ["output has '%s'" % f for f in FORBIDDEN if f in text]
    if len(p.stderr) > MAX_MESSAGE:
        problems.append("message is %d bytes, over %d" % (len(p.stderr), MAX_MESSAGE))
    problems += ["message does not name '%s'" % n for n in c["names"] if n not in p.stderr]
    if c.get("out"):
        problems += ["left %s behind" % n for n in leftovers(c["out"])]
    if problems and p.returncode > 0:
        problems.append("message: " + p.stderr.strip()[-300:])
    return problems, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rlx", required=True)
    ap.add_argument("--dir", required=True, help="work directory (wiped)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per command")
    ap.add_argument("--mem-mb", type=int, default=4096,
                    help="address-space limit per command (0: none; ASan builds get none)")
    ap.add_argument("-k", default="", help="run only cases whose name contains this")
    a = ap.parse_args()
    with open(a.rlx, "rb") as f:
        if b"__asan_init" in f.read():
            a.mem_mb = 0  # ASan reserves terabytes of address space for its shadow
    t0 = time.time()
    s = gen_hostile.generate(a.dir, a.rlx)
    jobs = [(c, False) for c in s.cases if a.k in c["name"]]
    jobs += [(c, True) for c in s.controls if a.k in c["name"]]
    failures, slowest = [], (0, "")
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(run, a.rlx, c, a.mem_mb, a.timeout, ok): c for c, ok in jobs}
        for fut in concurrent.futures.as_completed(futures):
            problems, secs = fut.result()
            name = futures[fut]["name"]
            slowest = max(slowest, (secs, name))
            if problems:
                failures.append("%s:\n    %s" % (name, "\n    ".join(problems)))
    for f in sorted(failures):
        print("FAIL " + f)
    n_cases = sum(1 for _, ok in jobs if not ok)
    print("hostile: %d cases, %d controls, %d failed, %.1f s (slowest %.2f s: %s)" %
          (n_cases, len(jobs) - n_cases, len(failures), time.time() - t0, slowest[0], slowest[1]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
