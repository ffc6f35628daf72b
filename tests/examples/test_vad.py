"""examples/vad on Silero VAD v5: speech spoken by espeak-ng with silence
around it is found, and only it; rlx's outputs match ONNX Runtime's."""
import os
import subprocess
import wave

import sys

import numpy as np
import pytest

from conftest import ROOT, require_model, require_ort

sys.path.insert(0, os.path.join(ROOT, "examples", "vad"))
import vad  # noqa: E402


@pytest.fixture(scope="module")
def model_file():
    return require_model("silero", "silero_vad_v5.onnx")


@pytest.fixture(scope="module")
def model(model_file):
    return vad.load_model(model_file)


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    wav = str(tmp_path_factory.mktemp("vad") / "speech.wav")
    lines = subprocess.run([os.path.join(ROOT, "examples", "vad", "make_speech.sh"), wav],
                           check=True, capture_output=True, text=True).stdout.split("\n")
    truth = [tuple(map(float, ln.split())) for ln in lines if ln.strip()]
    return wav, truth


def test_finds_each_sentence_and_no_silence(model, speech):
    wav, truth = speech
    probs, _, _ = vad.stream(model, vad.read_wav(wav))
    found = vad.segments(probs)
    assert len(found) == len(truth), (found, truth)
    for (s, e), (ts, te) in zip(found, truth):
        # Speech onsets ramp up: a segment may start a little late, never early.
        assert ts - 0.1 <= s <= ts + 0.35, (found, truth)
        assert te - 0.35 <= e <= te + 0.3, (found, truth)
    # Every window well inside the silences is called silence.
    t = np.arange(len(probs)) * vad.WINDOW / vad.RATE
    near = np.zeros(len(probs), bool)
    for ts, te in truth:
        near |= (t > ts - 0.3) & (t < te + 0.3)
    assert probs[~near].max() < 0.35, probs[~near].max()


def test_quiet_noise_is_not_speech(model):
    rng = np.random.default_rng(0)
    noise = (rng.standard_normal(3 * vad.RATE) * 0.003).astype(np.float32)
    probs, _, _ = vad.stream(model, noise)
    assert vad.segments(probs) == []


def test_rejects_a_wav_at_another_rate(tmp_path):
    path = str(tmp_path / "8k.wav")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * 800)
    with pytest.raises(SystemExit, match="16000 Hz mono 16-bit"):
        vad.read_wav(path)


def test_matches_onnx_runtime(model, model_file, speech):
    require_ort()
    probs, inputs, states = vad.stream(model, vad.read_wav(speech[0]))
    prob_diff, state_diff = vad.check_ort(model_file, probs, inputs, states)
    assert prob_diff <= 1e-4 and state_diff <= 1e-4, (prob_diff, state_diff)
