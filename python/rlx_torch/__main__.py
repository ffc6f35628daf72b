"""Command line: python3 -m rlx_torch FILE.py:FACTORY -o DIR [options]

FACTORY is called with no arguments and returns (model, example_inputs) or
(model, example_inputs, dynamic). example_inputs takes the forms documented
in rlx_torch.split_example_inputs.

With --train, FACTORY returns (model, example_inputs, target[, loss_fn]) and
the export is a training step's forward (rlx_torch.export(train=True)): the
loss is loss_fn, else --loss (torch.nn.functional.<name>).
"""
import argparse
import collections
import importlib.util
import json
import os
import sys

from . import LEVELS, export


def _load_factory(target):
    path, sep, fn = target.rpartition(":")
    if not sep or not path:
        raise SystemExit(f"expected FILE.py:FACTORY, got {target!r}")
    path = os.path.abspath(path)
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(
        os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, fn):
        raise SystemExit(f"{path} has no {fn}")
    return getattr(mod, fn), fn


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m rlx_torch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="FILE.py:FACTORY")
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--decomposition", default="high", choices=LEVELS)
    p.add_argument("--name", default=None, help="model_name (default: the factory name)")
    p.add_argument("--dynamic", default=None,
                   help='JSON {input index or id: {dim: symbol}}, e.g. \'{"0": {"0": 0}}\'')
    p.add_argument("--train", action="store_true",
                   help="export the training forward: loss, logits, BatchNorm updates")
    p.add_argument("--loss", default="cross_entropy",
                   help="with --train: torch.nn.functional loss when FACTORY gives none")
    a = p.parse_args(argv)
    factory, fname = _load_factory(a.target)
    made = factory()
    train = {}
    if a.train:
        if not isinstance(made, tuple) or len(made) not in (3, 4):
            raise SystemExit("with --train, FACTORY must return (model, example_inputs, target"
                             "[, loss_fn])")
        import torch.nn.functional as F
        loss_fn = made[3] if len(made) == 4 else getattr(F, a.loss, None)
        if loss_fn is None:
            raise SystemExit(f"--loss: torch.nn.functional has no {a.loss!r}")
        train = {"train": True, "target": made[2], "loss_fn": loss_fn}
        made = made[:2]
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise SystemExit("FACTORY must return (model, example_inputs[, dynamic])")
    model, example = made[0], made[1]
    dynamic = made[2] if len(made) == 3 else None
    if a.dynamic:
        dynamic = {(int(k) if k.lstrip("-").isdigit() else k): v
                   for k, v in json.loads(a.dynamic).items()}
    doc = export(model, example, a.out, decomposition=a.decomposition, dynamic=dynamic,
                 name=a.name or fname, **train)
    ops = collections.Counter(n["op"] for n in doc["nodes"])
    print(f"wrote {a.out}: {len(doc['inputs'])} inputs, {len(doc['weights'])} weights, "
          f"{len(doc['nodes'])} nodes, {len(doc['outputs'])} outputs")
    for op, c in sorted(ops.items()):
        print(f"  {c:5d} {op}")
    for note in doc["extra"]["notes"]:
        print("note:", note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
