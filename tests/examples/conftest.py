"""Shared by the example tests: the examples' directory on the path, and the
rule for the real models and ONNX Runtime they need: skipped when absent,
failed instead when RLX_REQUIRE_MODELS=1 (CI installs both)."""
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import onnx_common  # noqa: E402


def _missing(what):
    if os.environ.get("RLX_REQUIRE_MODELS") == "1":
        pytest.fail(f"{what} (RLX_REQUIRE_MODELS=1)")
    pytest.skip(what)


def require_model(*parts):
    path = os.path.join(onnx_common.models_dir(), *parts)
    if not os.path.exists(path):
        _missing(f"{path} is missing: run scripts/install-models.sh")
    return path


def require_ort():
    peers = os.environ.get("RLX_PEERS_DIR", os.path.expanduser("~/.cache/rlx-peers"))
    if not shutil.which("node") or not os.path.isdir(
            os.path.join(peers, "node_modules", "onnxruntime-node")):
        _missing("node or onnxruntime-node is missing: run scripts/install-peers.sh")
