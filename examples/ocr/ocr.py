#!/usr/bin/python3
"""Text reading with PaddleOCR v4 on rlx: detection (DB), direction
classification and recognition (CTC), PaddleOCR's pipeline; prints the text
of each box found, in reading order.

    /usr/bin/python3 examples/ocr/ocr.py IMAGE [--models DIR] [--json] [--check-ort]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
from PIL import Image, UnidentifiedImageError
from scipy import ndimage

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import onnx_common  # noqa: E402
import db_postprocess  # noqa: E402

FILES = {"det": "ch_PP-OCRv4_det_infer.onnx", "cls": "ch_ppocr_mobile_v2.0_cls_infer.onnx",
         "rec": "ch_PP-OCRv4_rec_infer.onnx", "keys": "ppocr_keys_v1.txt"}
DET_LIMIT = 960            # longest side the detector sees (PaddleOCR's det_limit_side_len)
DET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
DET_STD = np.array([0.229, 0.224, 0.225], np.float32)
REC_H, REC_MIN_W, REC_BUCKET = 48, 320, 160
CLS_SHAPE = (48, 192)
CLS_THRESH, DROP_SCORE = 0.9, 0.5


def default_models_dir():
    return os.path.join(onnx_common.models_dir(), "ppocr")


def missing_files(models_dir):
    return [os.path.join(models_dir, f) for f in FILES.values()
            if not os.path.exists(os.path.join(models_dir, f))]


class Models:
    """The three networks, each imported once with its dynamic dims (batch,
    height, width: rlx plans each new input shape on first use), and with
    `record` every call's input and output kept for the comparison with ONNX
    Runtime."""

    def __init__(self, models_dir, record=False):
        missing = missing_files(models_dir)
        if missing:
            sys.exit(f"{', '.join(missing)} missing: run scripts/install-models.sh first")
        self.paths = {k: os.path.join(models_dir, f) for k, f in FILES.items()}
        keys = open(self.paths["keys"], encoding="utf-8").read().splitlines()
        self.chars = ["<blank>"] + keys + [" "]   # CTC blank first; use_space_char appends " "
        self.rlx = onnx_common.import_rlx()
        self.cache, self.record, self.calls = {}, record, {"det": [], "cls": [], "rec": []}

    def run(self, kind, x):
        if kind not in self.cache:
            self.cache[kind] = self.rlx.load(self.paths[kind])
        (y,) = self.cache[kind].run({"x": x}).values()
        if self.record:
            self.calls[kind].append((x, y))
        return y

    def check_ort(self):
        """ONNX Runtime on every recorded input, calls of one shape batched
        together (the rows are independent): the largest |rlx - ort| per model."""
        diffs = {}
        for kind, calls in self.calls.items():
            groups = {}
            for x, y in calls:
                groups.setdefault(x.shape, []).append((x, y))
            diff = 0.0
            for group in groups.values():
                (ort,) = onnx_common.ort_run(self.paths[kind], {
                    "x": np.concatenate([x for x, _ in group])}).values()
                diff = max(diff, float(np.abs(ort - np.concatenate([y for _, y in group])).max()))
            diffs[kind] = diff if calls else None
        return diffs


def read_image(path):
    """The image as BGR uint8 [H, W, 3]: PaddleOCR reads with OpenCV, and its
    models were trained on BGR with the normalisations below in that order."""
    try:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"))
    except (OSError, UnidentifiedImageError) as e:
        sys.exit(f"{path}: cannot read the image ({e})")
    return np.ascontiguousarray(rgb[:, :, ::-1])


def resize(img, w, h):
    # PIL resizes the channels independently, so the BGR order passes through.
    return np.asarray(Image.fromarray(img).resize((w, h), Image.BILINEAR))


def detect(models, img):
    """Text boxes [(box, score)] in reading order."""
    h, w = img.shape[:2]
    r = min(1.0, DET_LIMIT / max(h, w))
    # Sides in multiples of 32: the network downsamples by 32 and upsamples back.
    rh, rw = (max(int(round(s * r / 32) * 32), 32) for s in (h, w))
    x = (resize(img, rw, rh).astype(np.float32) / 255 - DET_MEAN) / DET_STD
    prob = models.run("det", np.ascontiguousarray(x.transpose(2, 0, 1)[None]))
    return db_postprocess.reading_order(db_postprocess.boxes_from_map(prob[0, 0], w, h))


def crop(img, box):
    """The box warped to an upright rectangle (PaddleOCR's get_rotate_crop_image),
    sampled bilinearly with the border repeated; tall crops turned to lie flat."""
    cw = int(max(np.hypot(*(box[0] - box[1])), np.hypot(*(box[2] - box[3]))))
    ch = int(max(np.hypot(*(box[0] - box[3])), np.hypot(*(box[1] - box[2]))))
    dst = np.array([[0, 0], [cw, 0], [cw, ch], [0, ch]], np.float64)
    # The homography taking crop pixel (u, v) to image pixel (x, y).
    a = []
    for (u, v), (x, y) in zip(dst, box):
        a.append([u, v, 1, 0, 0, 0, -u * x, -v * x, x])
        a.append([0, 0, 0, u, v, 1, -u * y, -v * y, y])
    a = np.array(a)
    hm = np.append(np.linalg.solve(a[:, :8], a[:, 8]), 1.0).reshape(3, 3)
    vs, us = np.mgrid[0:ch, 0:cw]
    p = hm @ np.stack([us.ravel(), vs.ravel(), np.ones(us.size)])
    xs, ys = p[0] / p[2], p[1] / p[2]
    out = np.stack([ndimage.map_coordinates(img[:, :, c].astype(np.float32), [ys, xs], order=1,
                                            mode="nearest").reshape(ch, cw) for c in range(3)], -1)
    out = np.clip(np.round(out), 0, 255).astype(np.uint8)
    return np.rot90(out) if ch / max(cw, 1) >= 1.5 else out


def to_input(img, width, max_width):
    """[1, 3, 48, max_width]: resized to height 48 and at most `width` wide,
    normalised to [-1, 1], the rest zero (PaddleOCR's resize_norm_img)."""
    h, w = img.shape[:2]
    rw = min(width, int(math.ceil(REC_H * w / h)))
    x = resize(img, rw, REC_H).astype(np.float32) / 255 * 2 - 1
    out = np.zeros((1, 3, REC_H, max_width), np.float32)
    out[0, :, :, :rw] = x.transpose(2, 0, 1)
    return out


def upright(models, img):
    """The crop turned 180 degrees when the classifier is sure it is upside down."""
    p = models.run("cls", to_input(img, CLS_SHAPE[1], CLS_SHAPE[1]))[0]
    return np.ascontiguousarray(img[::-1, ::-1]) if p.argmax() == 1 and p[1] > CLS_THRESH else img


def recognize(models, img):
    """(text, score): greedy CTC, repeats collapsed and blanks dropped; the
    score is the mean probability of the characters kept."""
    h, w = img.shape[:2]
    need = max(REC_MIN_W, int(REC_H * w / h))
    # Padded up to a bucket so that few distinct shapes need an import.
    width = -(-need // REC_BUCKET) * REC_BUCKET
    probs = models.run("rec", to_input(img, need, width))[0]
    if probs.shape[1] != len(models.chars):
        sys.exit(f"{models.paths['keys']}: {len(models.chars) - 2} characters, but the recognizer "
                 f"scores {probs.shape[1]} classes (blank + characters + space)")
    idx, best = probs.argmax(1), probs.max(1)
    keep = (idx != 0) & np.append(True, idx[1:] != idx[:-1])
    text = "".join(models.chars[i] for i in idx[keep])
    return text, float(best[keep].mean()) if keep.any() else 0.0


def ocr(models, img):
    """[(box, text, score)] in reading order; low-confidence reads dropped as
    PaddleOCR drops them."""
    out = []
    for box, _ in detect(models, img):
        text, score = recognize(models, upright(models, crop(img, box)))
        if score >= DROP_SCORE:
            out.append((box, text, score))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image")
    ap.add_argument("--models", default=None,
                    help="directory of the PaddleOCR models (default: scripts/install-models.sh's)")
    ap.add_argument("--json", action="store_true", help="print boxes, text and scores as JSON")
    ap.add_argument("--check-ort", action="store_true",
                    help="also run ONNX Runtime on every model input and print the largest difference")
    a = ap.parse_args()
    if not os.path.exists(a.image):
        sys.exit(f"{a.image}: no such file")
    models = Models(a.models or default_models_dir(), record=a.check_ort)
    found = ocr(models, read_image(a.image))
    if a.json:
        rows = [json.dumps({"box": box.tolist(), "text": text, "score": round(score, 4)},
                           ensure_ascii=False) for box, text, score in found]
        print("[" + ",\n ".join(rows) + "]")
    else:
        for _, text, _ in found:
            print(text)
    if a.check_ort:
        for kind, diff in models.check_ort().items():
            n = len(models.calls[kind])
            print(f"ONNX Runtime, {kind}: {n} call(s), " +
                  (f"max |rlx - ort| = {diff:.2e}" if diff is not None else "nothing to compare"),
                  file=sys.stderr if a.json else sys.stdout)


if __name__ == "__main__":
    main()
