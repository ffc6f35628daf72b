#!/usr/bin/python3
"""Voice activity detection with Silero VAD v5 on rlx: a WAV file streamed in
32 ms windows with the model's recurrent state carried from one to the next;
prints the speech segments.

    /usr/bin/python3 examples/vad/vad.py speech.wav [--threshold 0.5] [--check-ort]

The WAV must be 16 kHz mono 16-bit (sox in.wav -r 16000 -c 1 -b 16 out.wav).
"""
import argparse
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import onnx_common  # noqa: E402

RATE = 16000
WINDOW = 512   # samples per step at 16 kHz (32 ms), what the model was trained on
CONTEXT = 64   # the previous window's last samples, prepended to each window


def read_wav(path):
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            sys.exit(f"{path}: {w.getframerate()} Hz, {w.getnchannels()} channel(s), "
                     f"{8 * w.getsampwidth()}-bit; the model takes 16000 Hz mono 16-bit "
                     f"(sox {path} -r 16000 -c 1 -b 16 out.wav)")
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    return pcm.astype(np.float32) / 32768.0


def load_model(path):
    """Silero's graph branches on the sample rate and on input shapes: rlx imports
    it for one window shape, and each run takes the branch of the rate it is given
    (the 8 kHz branch does not lower for this window, so a run at 8 kHz would fail
    with the reason)."""
    rlx = onnx_common.import_rlx()
    return rlx.load(path, input_shapes={"input": [1, CONTEXT + WINDOW], "state": [2, 1, 128]})


def stream(model, audio):
    """Speech probability of every window, the (input, state) each was run on,
    and the state after the last."""
    n = len(audio) // WINDOW
    audio = audio[:n * WINDOW]
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(CONTEXT, np.float32)
    probs, inputs, states = np.empty(n, np.float32), [], []
    for i in range(n):
        window = audio[i * WINDOW:(i + 1) * WINDOW]
        x = np.concatenate([context, window])[None, :]
        inputs.append(x)
        states.append(state)
        out = model.run({"input": x, "state": state, "sr": np.array(RATE, np.int64)})
        probs[i] = out["output"][0, 0]
        state = out["stateN"]
        context = window[-CONTEXT:]
    return probs, inputs, states + [state]


def segments(probs, threshold=0.5, min_speech_s=0.25, min_silence_s=0.1, pad_s=0.03):
    """Speech segments [(start_s, end_s)] as Silero's get_speech_timestamps finds
    them: speech starts above `threshold`, ends after `min_silence_s` below
    threshold - 0.15; too-short segments are dropped, kept ones padded."""
    step = WINDOW / RATE
    off = threshold - 0.15
    found, start, below = [], None, None
    for i, p in enumerate(probs):
        t = i * step
        if start is None:
            if p >= threshold:
                start, below = t, None
        elif p < off:
            below = t if below is None else below
            if t + step - below >= min_silence_s:
                found.append((start, below))
                start = None
        else:
            below = None
    if start is not None:
        found.append((start, len(probs) * step))
    total = len(probs) * step
    return [(max(0.0, s - pad_s), min(total, e + pad_s)) for s, e in found
            if e - s >= min_speech_s]


def check_ort(model_file, probs, inputs, states):
    """ONNX Runtime on the same windows and states, all in one batch (the rows
    of a batch are independent): the largest difference of the probabilities
    and of the states rlx carried."""
    ort = onnx_common.ort_run(model_file, {
        "input": np.concatenate(inputs), "state": np.concatenate(states[:-1], axis=1),
        "sr": np.array(RATE, np.int64)})
    prob_diff = float(np.abs(ort["output"][:, 0] - probs).max())
    state_diff = float(np.abs(ort["stateN"] - np.concatenate(states[1:], axis=1)).max())
    return prob_diff, state_diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wav")
    ap.add_argument("--model", help="silero_vad_v5.onnx (default: scripts/install-models.sh's)")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--check-ort", action="store_true",
                    help="also run ONNX Runtime on the same windows and print the largest difference")
    a = ap.parse_args()
    model_file = a.model or onnx_common.model_path("silero", "silero_vad_v5.onnx")
    audio = read_wav(a.wav)
    probs, inputs, states = stream(load_model(model_file), audio)
    for s, e in segments(probs, a.threshold):
        print(f"speech {s:7.2f} s - {e:7.2f} s")
    if a.check_ort:
        prob_diff, state_diff = check_ort(model_file, probs, inputs, states)
        print(f"ONNX Runtime on the same {len(probs)} windows: max |rlx - ort| = "
              f"{prob_diff:.2e} (probability), {state_diff:.2e} (state)")


if __name__ == "__main__":
    main()
