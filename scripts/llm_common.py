"""Helpers shared by llm_parity.py and llm_bench.py."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, shell=False, timeout=600, with_stderr=False):
    """Runs cmd; returns stdout (and stderr after it when with_stderr), raises with the last output line on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", shell=shell, timeout=timeout)
    if r.returncode != 0:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()
        raise RuntimeError(f"exit {r.returncode}: {tail[-1] if tail else ''}")
    return r.stdout + r.stderr if with_stderr else r.stdout


def default_peer():
    """llama_peer from the rlx build (bench/llama_peer) or a standalone build-peer/."""
    for p in (os.path.join(ROOT, "build", "bench", "llama_peer", "llama_peer"), os.path.join(ROOT, "build-peer", "llama_peer")):
        if os.path.exists(p):
            return p
    return os.path.join(ROOT, "build-peer", "llama_peer")
