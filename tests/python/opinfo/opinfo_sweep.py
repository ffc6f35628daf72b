#!/usr/bin/env python3
"""Sweep PyTorch's OpInfo database (op_db) through rlx_torch + rlx and compare with eager.

    /usr/bin/python3 tests/python/opinfo/opinfo_sweep.py [--ops a,b] [--max-samples N]
        [--jobs J] [--timeout S] [--write-expected FILE] [--check FILE] [--verbose]

Each sample becomes a small nn.Module whose forward calls `opinfo.op(input, *args, **kwargs)`:
every tensor in (input, args, kwargs) is a module input, everything else is baked in. The
module is exported with rlx_torch.export (default decomposition "high"), loaded with rlx.load,
run with rlx on the same inputs, and every output is compared with torch eager: same shape,
same dtype, np.allclose(rtol=1e-4, atol=1e-5, equal_nan=True) for floats, exact otherwise.

Scope (what the pass rate is measured over):
  * op level: every OpInfo in op_db (torch 1.13: 621 entries, named `name` or
    `name.variant_test_name`) whose CPU dtypes include float32, except ops with
      - random results: uniform, normal, bernoulli, multinomial, randn, rand*_like,
        dropout, dropout2d/3d, feature_alpha_dropout.with_train, fractional_max_pool*,
        svd_lowrank, pca_lowrank (rrelu and feature_alpha_dropout.without_train stay: their
        samples are caught by the determinism check below when they are random);
      - uninitialized results: empty, empty_like, new_empty, new_empty_strided, and
        linalg.lstsq(.grad_oriented), whose eager result is partly uninitialized on some
        samples (which would make the determinism check below flaky);
      - in-place-only semantics: resize_, resize_as_, zero_;
      - sparse or complex semantics: to_sparse, sparse.*, complex, polar, view_as_complex,
        chalf, stft, istft;
      - CUDA-only ops: jiterator_*.
  * sample level: op.sample_inputs("cpu", torch.float32, requires_grad=False), generated
    after torch.manual_seed(crc32(op name)) so that sample indices are reproducible; a sample
    is taken when every leaf of (input, args, kwargs) is either a CPU strided tensor of dtype
    float32, int64 or bool, or a Python constant (bool/int/float/str/None/slice/Ellipsis,
    torch.Size, torch.dtype among those three, device/layout/memory_format), and kwargs has no
    `out`. The first --max-samples (default 3; 0: all) such samples of each op are run; the
    index reported is the sample's position in the op's sample_inputs generator.
  * a taken sample is still out of scope (reported, not counted in the pass rate) when eager
    raises, returns a non-tensor or non-strided leaf, returns a dtype other than
    float32/int64/bool (conversions, fft's complex), mutates an input, or gives different
    results under two different RNG seeds.

A sample passes when export, load and run succeed and every output matches. Failures are
classified as "export error: <first line>" (rlx_torch / tracing), "import error: unsupported
<aten ops>" or "import error: <aten op>: <rlx's reason>" (rlx.load), "run error: <aten op>:
<reason>", "mismatch: shape|dtype|values|outputs", "timeout" or "crash: <signal>" ("sweep
error" would be a bug in this script). Samples run in worker subprocesses (--jobs, default 1)
with a per-sample wall-clock limit (--timeout, default 60 s); a worker that crashes or hangs
is replaced and the sweep resumes after the offending sample (OPINFO_SWEEP_FAULT=op:index:
crash|hang injects one, to test that). The summary gives the pass rate over all samples in
scope and over those whose graph rlx supports op by op (not stopped by "unsupported").

--write-expected FILE writes the failing samples, one `op<TAB>index<TAB>reason` line each,
sorted, after a comment header (date, command, --max-samples, totals). --check FILE exits 1
when a sample fails that FILE does not list (a regression), and prints listed samples that
now pass (refresh FILE then) or fail for another reason; without --max-samples it runs with
the value FILE was written with.
"""
import argparse
import collections
import datetime
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("RLX_BUILD_DIR", os.path.join(ROOT, "build"))

RTOL, ATOL = 1e-4, 1e-5

RANDOM_OPS = {
    "uniform", "normal", "normal.number_mean", "bernoulli", "multinomial", "randn",
    "randn_like", "rand_like", "randint_like", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank",
}
UNINITIALIZED_OPS = {"empty", "empty_like", "new_empty", "new_empty_strided"}
# Eager differs from run to run on some samples (driver gelsy, fewer rows than columns: part
# of the solution is uninitialized memory), so the determinism check below is itself flaky.
FLAKY_EAGER_OPS = {"linalg.lstsq", "linalg.lstsq.grad_oriented"}
INPLACE_OPS = {"resize_", "resize_as_", "zero_"}
SPARSE_COMPLEX_OPS = {"to_sparse", "complex", "polar", "view_as_complex", "chalf", "stft",
                      "istft"}


def op_full_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def op_scope(op):
    """None when the op is in scope, else the reason it is not."""
    import torch
    name = op_full_name(op)
    if torch.float32 not in op.supported_dtypes("cpu"):
        return "no float32 on CPU"
    if name in RANDOM_OPS:
        return "random"
    if name in UNINITIALIZED_OPS:
        return "uninitialized result"
    if name in FLAKY_EAGER_OPS:
        return "eager result partly uninitialized"
    if name in INPLACE_OPS:
        return "in-place"
    if name in SPARSE_COMPLEX_OPS or name.startswith("sparse."):
        return "sparse/complex"
    if name.startswith("jiterator_"):
        return "CUDA only"
    return None


def import_op_db():
    # common_utils parses sys.argv (argparse) and imports expecttest (the stand-in here).
    sys.path.insert(0, HERE)
    saved = sys.argv
    sys.argv = [saved[0]]
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    finally:
        sys.argv = saved
    return op_db


# ============================================================== worker side


def _allowed_const(v):
    import torch
    if v is None or v is Ellipsis or isinstance(v, (bool, int, float, str, slice, torch.Size,
                                                    torch.device, torch.layout,
                                                    torch.memory_format)):
        return True
    if isinstance(v, torch.dtype):
        return v in (torch.float32, torch.int64, torch.bool)
    return False


def sample_scope(sample):
    """(leaves, spec) of (input, args, kwargs), or a str: why the sample is out of scope."""
    import torch
    import torch.utils._pytree as pytree
    if "out" in sample.kwargs:
        return "out="
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    for v in leaves:
        if isinstance(v, torch.Tensor):
            if v.layout != torch.strided or v.device.type != "cpu":
                return "non-strided or non-CPU tensor"
            if v.dtype not in (torch.float32, torch.int64, torch.bool):
                return f"tensor dtype {v.dtype}"
        elif not _allowed_const(v):
            return f"argument of type {type(v).__name__}"
    return leaves, spec


def make_module(fn, leaves, spec):
    import torch
    import torch.utils._pytree as pytree

    pos = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
    consts = [None if isinstance(v, torch.Tensor) else v for v in leaves]

    class Sample(torch.nn.Module):
        def forward(self, *t):
            flat = list(consts)
            for p, x in zip(pos, t):
                flat[p] = x
            inp, args, kwargs = pytree.tree_unflatten(flat, spec)
            return fn(inp, *args, **kwargs)

    # Distinct clones: one tensor passed twice would otherwise become one graph input.
    tensors = [leaves[p].detach().clone() for p in pos]
    return Sample().eval(), tensors


def flat_outputs(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(flat_outputs(o))
        return res
    return [out]


def same(a, b):
    """Tensor-tree equality, NaN equal (for the mutation and determinism checks)."""
    import torch
    fa, fb = flat_outputs(a), flat_outputs(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            if x != y:
                return False
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.is_floating_point:
            if not torch.equal(torch.nan_to_num(x, nan=0.5), torch.nan_to_num(y, nan=0.5)):
                return False
            if not torch.equal(x.isnan(), y.isnan()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def first_line(e, limit=160):
    s = str(e).strip().splitlines()
    s = s[0] if s else type(e).__name__
    s = re.sub(r"/tmp/[^\s:'\"]*", "<tmp>", s)
    s = re.sub(r"0x[0-9a-f]{6,}", "0x...", s)
    return s[:limit]


def import_reason(e):
    msg = str(e).strip()
    m = re.search(r"unsupported op kind\(s\): (.*)", msg)
    if m:
        ops = [re.sub(r" \(x\d+\)$", "", s.strip()) for s in m.group(1).split(", ")]
        return "import error: unsupported " + ", ".join(ops)
    return "import error: " + rlx_message(msg)


def rlx_message(msg):
    """rlx's "<file>: while lowering node 'n' (aten.x.y): node %3 (...) from aten.x.y (...)
    [x]: why" (or "while running node %3 ...") -> "aten.x.y: why"."""
    line = msg.strip().splitlines()[0] if msg.strip() else ""
    m = re.search(r"while (?:lowering|running) node (.*)", line)
    if not m:
        return first_line(line)
    rest = m.group(1)
    op = re.search(r"\((aten\.[\w.]+|_getitem)\)", rest) or re.search(r"from (aten\.[\w.]+)", rest)
    why = rest.split("]: ")[-1] if "]: " in rest else rest.split("): ", 1)[-1]
    why = re.sub(r"^node %\d+ \([^)]*\): ", "", why)
    return first_line(f"{op.group(1)}: {why}" if op else why)


def run_sample(fn, leaves, spec):
    """(status, reason, detail) with status pass | fail | skip."""
    import numpy as np
    import torch
    import rlx
    import rlx_torch

    mod, tensors = make_module(fn, leaves, spec)
    try:
        with torch.no_grad():
            args = [t.clone() for t in tensors]
            torch.manual_seed(1)
            ref = mod(*args)
            mutated = not all(torch.equal(a.nan_to_num(0.5), t.nan_to_num(0.5))
                              for a, t in zip(args, tensors))
            torch.manual_seed(2)
            ref2 = mod(*[t.clone() for t in tensors])
    except Exception as e:
        return "skip", "eager error", first_line(e)
    if mutated:
        return "skip", "mutates an input", ""
    outs = flat_outputs(ref)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            return "skip", "non-tensor output", type(o).__name__
        if o.layout != torch.strided:
            return "skip", "non-strided output", ""
        if o.dtype not in (torch.float32, torch.int64, torch.bool):
            return "skip", "output dtype outside f32/i64/bool", str(o.dtype)
    if not outs:
        return "skip", "no outputs", ""
    if not same(ref, ref2):
        return "skip", "nondeterministic", ""

    with tempfile.TemporaryDirectory(prefix="rlx-opinfo-") as tmp:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rlx_torch.export(mod, tuple(t.clone() for t in tensors), tmp)
        except Exception as e:
            return "fail", "export error: " + first_line(e), traceback.format_exc(limit=-3)
        try:
            m = rlx.load(tmp)
        except Exception as e:
            return "fail", import_reason(e), first_line(e, 1000)
    try:
        feeds = {}
        by_name = {f"t_{i}": t for i, t in enumerate(tensors)}
        for k, s in enumerate(m.inputs):
            t = by_name.get(s.name, tensors[k] if k < len(tensors) else None)
            feeds[s.name] = t.numpy()
        got = list(m.run(feeds).values())
    except Exception as e:
        return "fail", "run error: " + rlx_message(str(e)), str(e)[:1000]
    if len(got) != len(outs):
        return "fail", "mismatch: outputs", f"{len(got)} outputs, eager has {len(outs)}"
    for i, (g, r) in enumerate(zip(got, outs)):
        r = r.detach().resolve_conj().resolve_neg().numpy()
        g = np.asarray(g)
        if g.shape != r.shape:
            return "fail", "mismatch: shape", f"output {i}: {g.shape} vs eager {r.shape}"
        if g.dtype != r.dtype:
            return "fail", "mismatch: dtype", f"output {i}: {g.dtype} vs eager {r.dtype}"
        if r.dtype.kind == "f":
            ok = np.allclose(g, r, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            ok = np.array_equal(g, r)
        if not ok:
            with np.errstate(all="ignore"):
                bad = ~np.isclose(g, r, rtol=RTOL, atol=ATOL, equal_nan=True) \
                    if r.dtype.kind == "f" else g != r
                err = np.abs(g.astype(np.float64) - r.astype(np.float64))
                err = np.nanmax(np.where(bad, err, 0)) if err.size else 0
            at = np.unravel_index(int(np.argmax(bad)), r.shape) if r.ndim else ()
            return "fail", "mismatch: values", (
                f"output {i}: {int(np.sum(bad))}/{r.size} elements differ, max abs err {err:.3g};"
                f" at {tuple(int(j) for j in at)}: rlx {g[at]!r}, eager {r[at]!r}")
    return "pass", "", ""


def worker_main(args):
    # Protocol lines go to a private copy of stdout; fd 1 (C++ prints, stray prints) -> stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    warnings.simplefilter("ignore")
    sys.path.insert(0, BUILD + "/python")
    import rlx  # the built package (python/rlx has no extension module)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import rlx_torch  # noqa: F401  (the source tree's copy)
    import torch
    torch.set_num_threads(1)
    rlx.set_num_threads(1)
    ops = {op_full_name(o): o for o in import_op_db()}
    # Tests the driver's recovery: OPINFO_SWEEP_FAULT=op:index:crash|hang.
    fault = os.environ.get("OPINFO_SWEEP_FAULT")

    def emit(**kw):
        proto.write(json.dumps(kw) + "\n")

    for line in sys.stdin:
        name, start = line.rstrip("\n").split("\t")
        start = int(start)
        op = ops[name]
        try:
            torch.manual_seed(zlib.crc32(name.encode()))
            chosen = []
            for idx, s in enumerate(op.sample_inputs("cpu", torch.float32, requires_grad=False)):
                sc = sample_scope(s)
                if isinstance(sc, str):
                    continue
                chosen.append((idx, sc))
                if len(chosen) == args.max_samples:  # 0: every sample
                    break
        except Exception as e:
            emit(ev="op", op=name, error="sample generation: " + first_line(e))
            emit(ev="done", op=name)
            continue
        emit(ev="op", op=name, n=len(chosen))
        for idx, (leaves, spec) in chosen:
            if idx < start:
                continue
            emit(ev="start", op=name, idx=idx)
            if fault == f"{name}:{idx}:crash":
                os.abort()
            if fault == f"{name}:{idx}:hang":
                time.sleep(1e6)
            try:
                status, reason, detail = run_sample(op.op, leaves, spec)
            except Exception as e:  # a bug in this script, not in rlx
                status, reason, detail = "fail", "sweep error: " + first_line(e), \
                    traceback.format_exc()
            emit(ev="result", op=name, idx=idx, status=status, reason=reason, detail=detail)
        emit(ev="done", op=name)


# ============================================================== driver side


class Worker:
    def __init__(self, args, log, tmp):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker",
               "--max-samples", str(args.max_samples)]
        # Exports go under `tmp`: a crashed worker leaves its directory there.
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=log, text=True, bufsize=1,
                                  env={**os.environ, "TMPDIR": tmp})
        self.fd = self.p.stdout.fileno()  # read raw: select() cannot see a file's buffer
        self.buf = b""
        self.op = None  # op being processed
        self.idx = None  # sample started and not finished
        self.deadline = None

    def send(self, op, start, timeout):
        self.op, self.idx = op, None
        self.p.stdin.write(f"{op}\t{start}\n")
        self.p.stdin.flush()
        # Sample generation plus the import of op_db on a fresh worker.
        self.deadline = time.monotonic() + timeout + 30

    def read_lines(self):
        """Complete lines available now; None at EOF."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        return [x.decode() for x in lines]

    def kill(self):
        try:
            self.p.kill()
        except ProcessLookupError:
            pass
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except OSError:
                pass


def drive(args, names, log_path):
    results = {}  # (op, idx) -> (status, reason, detail)
    op_errors = {}  # op -> why it produced no samples
    n_samples = {}
    queue = collections.deque((n, 0) for n in names)
    log = open(log_path, "a")
    tmp = tempfile.mkdtemp(prefix="rlx-opinfo-")
    workers = []
    t0 = time.monotonic()
    done_ops = 0

    def start_worker():
        w = Worker(args, log, tmp)
        workers.append(w)
        return w

    def feed(w):
        if queue:
            op, start = queue.popleft()
            w.send(op, start, args.timeout)
            return True
        w.op = None
        return False

    for _ in range(min(args.jobs, len(queue))):
        feed(start_worker())

    def replace(w, why):
        nonlocal done_ops
        w.kill()
        workers.remove(w)
        if w.idx is not None:
            results[(w.op, w.idx)] = ("fail", why, "")
            if args.verbose:
                print(f"  {w.op}[{w.idx}] fail: {why}", flush=True)
            queue.appendleft((w.op, w.idx + 1))
        elif w.op is not None:
            op_errors[w.op] = why + " (before any sample)"
            done_ops += 1
        if queue:
            feed(start_worker())

    def handle(w, ev, now):
        nonlocal done_ops
        if ev["ev"] == "op":
            if "error" in ev:
                op_errors[ev["op"]] = ev["error"]
            else:
                n_samples[ev["op"]] = ev["n"]
        elif ev["ev"] == "start":
            w.idx = ev["idx"]
            w.deadline = now + args.timeout
        elif ev["ev"] == "result":
            results[(ev["op"], ev["idx"])] = (ev["status"], ev["reason"], ev["detail"])
            w.idx = None
            w.deadline = now + args.timeout
            if args.verbose:
                detail = " | ".join(ev["detail"].strip().splitlines()[-2:])[-1000:]
                st = ev["status"] if ev["status"] == "pass" else \
                    f"{ev['status']}: {ev['reason']}  [{detail}]"
                print(f"  {ev['op']}[{ev['idx']}] {st}", flush=True)
        elif ev["ev"] == "done":
            done_ops += 1
            if args.progress and done_ops % 25 == 0:
                print(f"  ... {done_ops}/{len(names)} ops, "
                      f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
            feed(w)

    while any(w.op is not None for w in workers):
        active = [w for w in workers if w.op is not None]
        now = time.monotonic()
        wait = max(0.0, min(w.deadline for w in active) - now)
        ready, _, _ = select.select([w.fd for w in active], [], [], wait)
        now = time.monotonic()
        for w in list(active):
            if w.fd in ready:
                lines = w.read_lines()
                if lines is None:  # EOF: the worker died
                    rc = w.p.wait()
                    why = (f"crash: {signal.Signals(-rc).name}" if rc < 0 else f"crash: exit {rc}")
                    replace(w, why)
                    continue
                for line in lines:
                    handle(w, json.loads(line), now)
            elif now >= w.deadline:
                replace(w, "timeout")
    for w in workers:
        w.p.stdin.close()
        w.p.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return results, op_errors, n_samples


def summarize(results, op_errors, n_samples, out_of_scope_ops, n_ops_tried):
    lines = []
    ran = {k: v for k, v in results.items() if v[0] != "skip"}
    skipped = {k: v for k, v in results.items() if v[0] == "skip"}
    fails = {k: v for k, v in ran.items() if v[0] == "fail"}
    n_pass = len(ran) - len(fails)
    ops_with_samples = {k[0] for k in ran}
    rate = 100.0 * n_pass / len(ran) if ran else 0.0
    lines.append(f"ops tried: {n_ops_tried} ({len(ops_with_samples)} with in-scope samples); "
                 f"samples tried: {len(ran)}; pass: {n_pass} ({rate:.1f}%); "
                 f"fail: {len(fails)}")
    ops_all_pass = {o for o in ops_with_samples
                    if all(v[0] == "pass" for k, v in ran.items() if k[0] == o)}
    lines.append(f"ops with every sample passing: {len(ops_all_pass)}/{len(ops_with_samples)}")
    unsupported = collections.Counter()
    unsup_ops = collections.defaultdict(set)
    for (op, _), (_, reason, _) in fails.items():
        m = re.match(r"import error: unsupported (.*)", reason)
        if m:
            for a in m.group(1).split(", "):
                unsupported[a] += 1
                unsup_ops[a].add(op)
    not_unsup = {k: v for k, v in ran.items() if not v[1].startswith("import error: unsupported")}
    if not_unsup:
        p = sum(1 for v in not_unsup.values() if v[0] == "pass")
        lines.append(f"samples not stopped by an unsupported aten op: {len(not_unsup)}, "
                     f"pass {p} ({100.0 * p / len(not_unsup):.1f}%)")
    by_class = collections.Counter(v[1].split(":")[0] for v in fails.values())
    lines.append("failures by class: " + ", ".join(f"{c} {n}" for c, n in by_class.most_common()))
    lines.append("failure reasons (samples, ops):")
    groups = collections.defaultdict(list)
    for (op, idx), v in fails.items():
        groups[v[1]].append(op)
    for reason, ops in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        uops = sorted(set(ops))
        shown = ", ".join(uops[:6]) + (", ..." if len(uops) > 6 else "")
        lines.append(f"  {len(ops):4d}  {reason}   [{shown}]")
    if unsupported:
        lines.append("unsupported aten ops (samples blocked, OpInfo ops):")
        for a, n in unsupported.most_common():
            lines.append(f"  {n:4d}  {a}   [{', '.join(sorted(unsup_ops[a]))}]")
    if skipped:
        lines.append(f"samples out of scope at run time: {len(skipped)}")
        sk = collections.defaultdict(set)
        for (op, _), v in skipped.items():
            sk[v[1]].add(op)
        n = collections.Counter(v[1] for v in skipped.values())
        for reason, ops in sorted(sk.items(), key=lambda kv: -n[kv[0]]):
            lines.append(f"  {n[reason]:4d}  {reason}   [{', '.join(sorted(ops))}]")
    if op_errors:
        lines.append(f"ops with no sample run: {len(op_errors)}")
        for op, why in sorted(op_errors.items()):
            lines.append(f"        {op}: {why}")
    none = sorted(op for op, n in n_samples.items() if n == 0)
    if none:
        lines.append(f"ops with no sample in scope (tensor dtypes or argument types): {len(none)}")
        lines.append(f"        [{', '.join(none)}]")
    oos = collections.defaultdict(list)
    for op, why in out_of_scope_ops.items():
        oos[why].append(op)
    lines.append(f"ops out of scope: {len(out_of_scope_ops)}")
    for why, ops in sorted(oos.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(ops):4d}  {why}   [{', '.join(sorted(ops))}]")
    return lines, fails, n_pass, len(ran)


def read_expected(path):
    """({(op, index): reason}, the --max-samples it was written with or None)."""
    exp, max_samples = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"# max-samples: (\d+)", line)
            if m:
                max_samples = int(m.group(1))
            if not line.strip() or line.startswith("#"):
                continue
            op, idx, reason = line.rstrip("\n").split("\t", 2)
            exp[(op, int(idx))] = reason
    return exp, max_samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant)")
    ap.add_argument("--max-samples", type=int, default=None,
                    help="samples per op (default 3, or the value --check FILE was written "
                         "with; 0: all)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per sample")
    ap.add_argument("--write-expected", metavar="FILE")
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--verbose", "-v", action="store_true", help="one line per sample")
    ap.add_argument("--progress", action="store_true", help="progress on stderr")
    ap.add_argument("--log", help="worker stderr goes here (default: a temporary file)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)
    expected = read_expected(args.check) if args.check else None
    if args.max_samples is None:
        args.max_samples = expected[1] if expected and expected[1] is not None else 3

    t0 = time.monotonic()
    op_db = import_op_db()
    all_names = [op_full_name(o) for o in op_db]
    if args.ops:
        want = [s.strip() for s in args.ops.split(",") if s.strip()]
        unknown = [w for w in want if w not in all_names
                   and not any(n.split(".")[0] == w for n in all_names)]
        if unknown:
            sys.exit(f"unknown OpInfo names: {', '.join(unknown)}")
        selected = [o for o in op_db
                    if op_full_name(o) in want or o.name in want]
    else:
        selected = list(op_db)
    out_of_scope = {}
    names = []
    for o in selected:
        why = op_scope(o)
        if why:
            out_of_scope[op_full_name(o)] = why
        else:
            names.append(op_full_name(o))
    log_path = args.log or os.path.join(tempfile.gettempdir(), f"opinfo_sweep.{os.getpid()}.log")
    results, op_errors, n_samples = drive(args, names, log_path)
    elapsed = time.monotonic() - t0
    lines, fails, n_pass, n_ran = summarize(results, op_errors, n_samples, out_of_scope,
                                            len(names))
    lines.append(f"runtime: {elapsed:.0f} s (--jobs {args.jobs}, --max-samples "
                 f"{args.max_samples}); worker log: {log_path}")
    print("\n".join(lines))

    if args.write_expected:
        cmd = "/usr/bin/python3 tests/python/opinfo/opinfo_sweep.py " + " ".join(
            shlex.quote(a) for a in sys.argv[1:])
        import torch
        totals = [ln for ln in lines if ln.startswith(("ops tried", "ops with every",
                                                       "samples not stopped", "failures by"))]
        with open(args.write_expected, "w") as f:
            f.write(f"# rlx OpInfo sweep (tests/python/opinfo/opinfo_sweep.py), "
                    f"{datetime.date.today().isoformat()}, torch {torch.__version__}\n")
            f.write(f"# command: {cmd}\n")
            f.write(f"# max-samples: {args.max_samples}\n")
            for ln in totals:
                f.write(f"# {ln}\n")
            f.write(f"# runtime: {elapsed:.0f} s (--jobs {args.jobs})\n")
            f.write("# one line per failing sample, sorted: op<TAB>sample index<TAB>reason\n")
            for (op, idx), v in sorted(fails.items()):
                f.write(f"{op}\t{idx}\t{v[1]}\n")
        print(f"wrote {args.write_expected}: {len(fails)} failing samples")

    if args.check:
        exp = expected[0]
        new_fail = sorted(k for k in fails if k not in exp)
        now_pass = sorted(k for k, v in results.items() if v[0] == "pass" and k in exp)
        changed = sorted(k for k in fails if k in exp and exp[k] != fails[k][1])
        for op, idx in now_pass:
            print(f"now passes (listed in {args.check}): {op}\t{idx}")
        for op, idx in changed:
            print(f"reason changed: {op}\t{idx}\t{exp[(op, idx)]} -> {fails[(op, idx)][1]}")
        for op, idx in new_fail:
            print(f"REGRESSION: {op}\t{idx}\t{fails[(op, idx)][1]}\t{fails[(op, idx)][2][:300]}")
        if new_fail:
            print(f"check: {len(new_fail)} sample(s) fail that {args.check} does not list")
            return 1
        print(f"check: ok ({len(now_pass)} listed sample(s) now pass)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
