"""Fixtures for the rlx Python package tests (run by ctest as python_bindings:
PYTHONPATH=build/python, RLX_BUILD_DIR=build)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
BUILD = os.environ.get("RLX_BUILD_DIR",
                       os.path.join(HERE, "..", "..", "..", "build"))

import tiny_gguf  # noqa: E402


@pytest.fixture(scope="session")
def mlp_dir(tmp_path_factory):
    """examples/mlp's model (x [8,64] f32 -> logits, probs), written by make_mlp."""
    d = tmp_path_factory.mktemp("mlp") / "mlp"
    subprocess.run([os.path.join(BUILD, "examples", "make_mlp"), str(d)], check=True,
                   stdout=subprocess.DEVNULL)
    return str(d)


@pytest.fixture(scope="session")
def tiny_llm(tmp_path_factory):
    """(path, weights) of a 2-layer random llama GGUF with a 50-token vocabulary."""
    w = tiny_gguf.make_weights()
    path = str(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    tiny_gguf.write(path, w)
    return path, w
