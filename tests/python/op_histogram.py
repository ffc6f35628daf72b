"""Print the aten op histogram of the test models per decomposition level.

PYTHONPATH=python /usr/bin/python3 tests/python/op_histogram.py [model ...]
(The C++ importer must handle every op listed for the levels it supports.)
"""
import collections
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlx_torch  # noqa: E402
import rlx_torch_models as M  # noqa: E402


def main(names):
    names = names or list(M.ALL)
    with tempfile.TemporaryDirectory() as tmp:
        for lvl in rlx_torch.LEVELS:
            hist = collections.Counter()
            users = collections.defaultdict(set)
            for name in names:
                model, ex = M.ALL[name]()
                doc = rlx_torch.export(model, ex, os.path.join(tmp, f"{name}_{lvl}"),
                                       decomposition=lvl, name=name)
                for n in doc["nodes"]:
                    hist[n["op"]] += 1
                    users[n["op"]].add(name)
            print(f"== {lvl}: {len(hist)} distinct ops, {sum(hist.values())} nodes")
            for op, c in sorted(hist.items()):
                print(f"  {c:5d}  {op:48s} {','.join(sorted(users[op]))}")


if __name__ == "__main__":
    main(sys.argv[1:])
