"""rlx_torch.export(train=True) and the seeded dropout op (unittest; run by ctest).

Run: /usr/bin/python3 -m unittest tests/python/test_train_export.py
"""
import copy
import os
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import rlx_torch  # noqa: E402
from rlx_torch import _dropout  # noqa: E402
from rlx_torch import _safetensors as st  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.bn = nn.BatchNorm2d(3)
        self.d1 = nn.Dropout(0.5)
        self.fc = nn.Linear(3 * 4 * 4, 4)
        self.d2 = nn.Dropout(0.25)

    def forward(self, x):
        return self.d2(self.fc(self.d1(torch.flatten(F.relu(self.bn(self.conv(x))), 1))))


def example():
    torch.manual_seed(0)
    return Net(), torch.randn(2, 1, 6, 6), torch.tensor([1, 3])


class TrainExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model, cls.x, cls.y = example()
        cls.before = copy.deepcopy(cls.model.state_dict())
        cls.model.eval()
        cls.dir = os.path.join(cls.tmp.name, "t")
        cls.doc = rlx_torch.export(cls.model, (cls.x,), cls.dir, train=True,
                                   loss_fn=F.cross_entropy, target=cls.y, dropout_seed=10)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_inputs_outputs_and_weights(self):
        d = self.doc
        self.assertEqual([(j["id"], j["dtype"], j["shape"]) for j in d["inputs"]],
                         [("x", "f32", [2, 1, 6, 6]), ("target", "i64", [2]),
                          ("rlx::step", "i64", [])])
        self.assertEqual([o["name"] for o in d["outputs"]],
                         ["loss", "logits", "update::bn.running_mean", "update::bn.running_var",
                          "update::bn.num_batches_tracked"])
        self.assertEqual(d["outputs"][0]["shape"], [])
        kinds = {w["key"]: w["kind"] for w in d["weights"]}
        self.assertEqual(kinds["bn.running_mean"], "buffer")
        self.assertEqual(kinds["fc.weight"], "param")
        self.assertEqual(d["extra"]["train"], {"target": "target", "step": "rlx::step"})

    def test_model_untouched_and_mode_restored(self):
        self.assertFalse(self.model.training)
        for k, v in self.model.state_dict().items():
            self.assertTrue(torch.equal(v, self.before[k]), k)
        w = st.load_file(os.path.join(self.dir, "weights.safetensors"))
        self.assertTrue(torch.equal(w["bn.running_var"], self.before["bn.running_var"]))

    def test_dropout_nodes_have_distinct_seeds_and_read_the_step(self):
        drops = [n for n in self.doc["nodes"] if n["op"] == "rlx.dropout.default"]
        self.assertEqual([n["args"][2]["float"] for n in drops], [0.5, 0.25])
        self.assertEqual([n["args"][3]["int"] for n in drops], [10, 11])
        self.assertTrue(all(n["args"][1] == {"ref": "rlx::step"} for n in drops))
        self.assertFalse(any("batch_norm" in n["op"] for n in self.doc["nodes"]))

    def test_reference_is_torch_train_step(self):
        ref = st.load_file(os.path.join(self.dir, "reference.safetensors"))
        m = copy.deepcopy(self.model).train()
        with torch.no_grad():  # p > 0: torch's own RNG differs, so only BN stats compare here
            m(self.x)
        self.assertTrue(torch.allclose(ref["out::update::bn.running_mean"], m.bn.running_mean))
        self.assertTrue(torch.allclose(ref["out::update::bn.running_var"], m.bn.running_var))
        self.assertEqual(int(ref["out::update::bn.num_batches_tracked"]), 1)
        self.assertLess(self.doc["extra"]["graph_vs_eager_max_abs_err"], 1e-5)
        # loss = cross_entropy(logits, target)
        self.assertAlmostEqual(float(ref["out::loss"]),
                               float(F.cross_entropy(ref["out::logits"], self.y)), places=5)

    def test_eval_export_has_no_training_parts(self):
        with tempfile.TemporaryDirectory() as t:
            doc = rlx_torch.export(self.model, (self.x,), t)
        self.assertEqual([j["id"] for j in doc["inputs"]], ["x"])
        self.assertFalse(any(n["op"].startswith("rlx.") for n in doc["nodes"]))
        self.assertTrue(all("name" not in o for o in doc["outputs"]))

    def test_argument_errors(self):
        with tempfile.TemporaryDirectory() as t:
            with self.assertRaises(TypeError):
                rlx_torch.export(self.model, (self.x,), t, train=True, loss_fn=F.cross_entropy)
            with self.assertRaises(TypeError):
                rlx_torch.export(self.model, (self.x,), t, train=True, target=self.y)
            with self.assertRaises(ValueError):
                rlx_torch.export(self.model, (self.x,), t, loss_fn=F.cross_entropy)

    def test_cli(self):
        src = os.path.join(self.tmp.name, "factory.py")
        with open(src, "w") as f:
            f.write("import torch, torch.nn as nn\n"
                    "def make():\n"
                    "    m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))\n"
                    "    return m, (torch.randn(5, 4),), torch.tensor([0, 1, 2, 1, 0])\n")
        out = os.path.join(self.tmp.name, "cli")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-m", "rlx_torch", src + ":make", "-o", out,
                            "--train"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        ref = st.load_file(os.path.join(out, "reference.safetensors"))
        self.assertIn("out::update::1.running_var", ref)


class SeededDropout(unittest.TestCase):
    def test_statistics_and_determinism(self):
        n = 100000
        for p in (0.1, 0.5, 0.8):
            keep = _dropout.keep_mask(n, p, seed=3, step=7)
            self.assertAlmostEqual(keep.mean(), 1 - p, delta=5 * (p * (1 - p) / n) ** 0.5)
        a = _dropout.keep_mask(1000, 0.5, 3, 7)
        self.assertTrue((a == _dropout.keep_mask(1000, 0.5, 3, 7)).all())
        self.assertLess((a == _dropout.keep_mask(1000, 0.5, 3, 8)).mean(), 0.6)
        self.assertLess((a == _dropout.keep_mask(1000, 0.5, 4, 7)).mean(), 0.6)
        self.assertTrue(_dropout.keep_mask(1000, 0.0, 3, 7).all())

    def test_scale_and_vjp(self):
        x = torch.ones(64, dtype=torch.float64, requires_grad=True)
        step = torch.tensor(2)
        y = _dropout.dropout(x, step, 0.5, 1)
        self.assertEqual(set(y.unique().tolist()) - {0.0, 2.0}, set())
        (g,) = torch.autograd.grad(y.sum(), x)
        self.assertTrue(torch.equal(g, y.detach()))  # the same mask, the same scale


if __name__ == "__main__":
    unittest.main()
