#!/usr/bin/python3
"""Writes the hostile-file suite into DIR: malformed safetensors, .npy, GGUF,
torch-ir.json and model.rlx.json files (truncations, lying headers and
counts, huge counts, cyclic and undefined references, deep nesting, bad
dtypes), each with the rlx command that must reject it, and the good files
they derive from with commands that must succeed. Given the rlx binary, it
also exports a .mlpackage and breaks copies of it. DIR/cases.json lists them
for run_hostile.py.

  gen_hostile.py DIR [RLX]
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases_gguf  # noqa: E402
import cases_graphs  # noqa: E402
import cases_mlpackage  # noqa: E402
import cases_tensors  # noqa: E402
from suite import Suite  # noqa: E402


def generate(root, rlx=None):
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    s = Suite(os.path.abspath(root))
    for module in (cases_tensors, cases_graphs, cases_gguf):
        module.add(s)
    if rlx:
        cases_mlpackage.add(s, os.path.abspath(rlx))
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"cases": s.cases, "controls": s.controls}, f, indent=1)
    return s


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    s = generate(*sys.argv[1:])
    print("wrote %d cases and %d controls to %s" % (len(s.cases), len(s.controls), sys.argv[1]))
