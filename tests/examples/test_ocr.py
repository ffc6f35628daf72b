"""examples/ocr on PaddleOCR v4: text rendered by ImageMagick in three fonts at
three sizes is read back exactly, line by line in reading order, also upside
down; rlx's outputs match ONNX Runtime's on the same inputs."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, require_model, require_ort

OCR_DIR = os.path.join(ROOT, "examples", "ocr")
sys.path.insert(0, OCR_DIR)
import db_postprocess  # noqa: E402
import ocr  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def models_dir():
    for f in ocr.FILES.values():
        require_model("ppocr", f)
    return ocr.default_models_dir()


@pytest.fixture(scope="module")
def models(models_dir):
    return ocr.Models(models_dir)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ocr"))
    subprocess.run([os.path.join(OCR_DIR, "make_images.sh"), out], check=True)
    found = sorted(glob.glob(os.path.join(out, "*.png")))
    assert len(found) >= 6, found
    return {os.path.basename(p)[:-4]: (p, open(p[:-4] + ".txt").read().splitlines()) for p in found}


def read(models, img):
    return [text for _, text, _ in ocr.ocr(models, img)]


def test_reads_every_image_exactly(models, images):
    wrong = {}
    for name, (path, want) in images.items():
        got = read(models, ocr.read_image(path))
        if got != want:
            wrong[name] = (got, want)
    assert not wrong, wrong


def test_upside_down_text_is_turned_by_the_classifier(models, images):
    path, want = images["sans56"]
    # The page turned over: its last line comes first, each line read upright.
    assert read(models, np.ascontiguousarray(ocr.read_image(path)[::-1, ::-1])) == want[::-1]


def test_min_area_rect_of_a_turned_rectangle():
    t = 0.3
    rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    corners = np.array([[0, 0], [40, 0], [40, 10], [0, 10]], float)
    inner = np.random.default_rng(0).uniform([0, 0], [40, 10], (200, 2))
    box, short = db_postprocess.min_area_rect(np.concatenate([corners, inner]) @ rot.T + 100)
    assert short == pytest.approx(10)
    assert sorted(np.round(np.hypot(*(np.roll(box, -1, 0) - box).T), 6)) == [10, 10, 40, 40]


def test_cli_json_and_a_missing_file(images):
    path, want = images["serif40"]
    cli = [sys.executable, os.path.join(OCR_DIR, "ocr.py")]
    out = subprocess.run(cli + [path, "--json"], check=True, capture_output=True, text=True).stdout
    assert [r["text"] for r in json.loads(out)] == want
    bad = subprocess.run(cli + [path + ".nope"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no such file" in bad.stderr


def test_matches_onnx_runtime(models_dir, images):
    require_ort()
    models = ocr.Models(models_dir, record=True)
    for name in ("sans28", "mono40"):
        read(models, ocr.read_image(images[name][0]))
    diffs = models.check_ort()
    assert all(d is not None and d <= 1e-3 for d in diffs.values()), diffs
