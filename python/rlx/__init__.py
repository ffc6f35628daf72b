"""rlx: an ML compiler and runtime, from Python.

    import numpy as np, rlx
    m = rlx.load("out/mlp")                    # model dir, graph JSON, GGUF, ONNX
    print(m.inputs)                            # [TensorSpec(name='x', shape=(8, 64), dtype='f32')]
    y = m.run({"x": np.zeros((8, 64), np.float32)})["logits"]

    rlx.compile(m, target="coreml", path="mlp.mlpackage")

    llm = rlx.LLM("model.gguf")
    print(llm.generate("Once upon a time", max_tokens=32, temperature=0))
    for piece in llm.generate("Hello", stream=True):
        print(piece, end="")

    m = rlx.from_torch(torch_module, (example,), dynamic={0: {0: "batch"}})

Errors raised by rlx itself are rlx.Error (a RuntimeError) carrying rlx's
message. The GIL is released while rlx computes. The thread count is
process-wide (rlx.set_num_threads, or threads= on load / LLM).

dtypes: every rlx dtype maps to its NumPy dtype (f32 float32, f16 float16,
f64 float64, i8/i16/i32/i64, u8 uint8, bool bool_), except bf16, which NumPy
lacks: bf16 outputs come back as float32 (exact), bf16 inputs take float32
(rounded to nearest even) or uint16 arrays holding the raw bf16 bits.
"""
import codecs
import os
import tempfile

from ._rlx import (  # noqa: F401
    Error,
    Model,
    TensorSpec,
    Trainer,
    __version__,
    check_coreml,
    grad,
    load,
    num_threads,
    set_num_threads,
)
from . import _rlx

__all__ = [
    "Error", "Model", "TensorSpec", "LLM", "load", "compile", "compile_training_step",
    "from_torch", "check_coreml",
    "set_num_threads", "num_threads", "__version__",
]


def compile(model, target="coreml", path=None, *, opset="CoreML6", fp16=False, seq_len=64,
            opt_level=1, disable_passes=()):
    """Exports a model for another runtime, as `rlx compile` does; returns `path`.

    model: an rlx.Model or a path load() takes (GGUF models are rebuilt for a
    static token count of `seq_len`: CoreML needs static lengths). target:
    "coreml", an ML Program package written to `path` (X.mlpackage). opset:
    "CoreML5".."CoreML8". fp16: weights and compute in fp16 (I/O stays fp32).
    Every optimization pass but constant folding runs first (the exporter
    writes the weights itself). Raises rlx.Error, before anything is written,
    listing every op that does not lower.
    """
    if target != "coreml":
        raise ValueError(f"compile: unknown target {target!r}; rlx exports to 'coreml'")
    if path is None:
        raise TypeError("compile: pass path= (the .mlpackage to write)")
    path = os.fspath(path)
    if isinstance(model, Model):
        _rlx._export_coreml(model, "", path, opset, fp16, seq_len, opt_level, list(disable_passes))
    else:
        _rlx._export_coreml(None, os.fspath(model), path, opset, fp16, seq_len, opt_level,
                            list(disable_passes))
    return path


def compile_training_step(model, path, *, optimizer="adamw", weight_decay=0.0, momentum=0.0,
                          dampening=0.0, nesterov=False, betas=None, eps=1e-8, clip_norm=0.0,
                          input_shapes=None, opset="CoreML6", fp16=False):
    """Exports one training step of a model with a 'loss' output to a CoreML package at
    `path`, as `rlx compile --train` does; returns (state, holds).

    The package computes forward, backward, clipping (clip_norm > 0) and the optimizer's
    update (sgd | adam | adamw | lion, torch.optim's formulas). Its inputs are the model's
    data inputs, `lr` and `optim_step` (float scalars: this step's learning rate, and 1 for
    the first update), and every state tensor S; its outputs are the model's (loss, ...)
    and next__S for every S, to feed back as S on the next call. `state` maps every S to
    its initial value (np.ndarray); `holds` says what each one is ("fc1.weight",
    "optim::exp_avg::fc1.weight"). input_shapes ({input: dims}) binds symbolic dims, which
    the step needs static. Raises rlx.Error with rlx's message.
    """
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    state, holds = _rlx._compile_training_step(
        os.fspath(model), os.fspath(path), opset, fp16,
        optimizer, weight_decay, momentum, dampening, nesterov,
        None if betas is None else tuple(betas), eps, clip_norm, shapes)
    return state, holds


def from_torch(module, example_inputs, dynamic=None, *, path=None, decomposition="high",
               **load_options):
    """Exports a torch.nn.Module with rlx_torch and loads it: one call.

    example_inputs: a tensor, a tuple of tensors, or (args, kwargs), as
    rlx_torch.export takes them. dynamic: {input index or name: {dim: symbol}},
    e.g. {0: {0: "batch", 2: "h", 3: "w"}}, for dims that may change between
    runs; a symbol is a name (an identifier, as torch.export's Dim names) or
    torch-ir's number (0 batch, 1 seq, ...); the same symbol on two inputs
    means the same size. path: keep
    the export (torch-ir.json + weights) in this directory; by default it goes
    to a temporary directory that is removed once the model is loaded.
    load_options go to rlx.load (threads=, opt_level=, cast_inputs=, ...).
    """
    import rlx_torch

    if path is not None:
        rlx_torch.export(module, example_inputs, os.fspath(path), decomposition=decomposition,
                         dynamic=dynamic)
        return load(os.fspath(path), **load_options)
    with tempfile.TemporaryDirectory(prefix="rlx-from-torch-") as tmp:
        rlx_torch.export(module, example_inputs, tmp, decomposition=decomposition,
                         dynamic=dynamic)
        # Weights are memory-mapped: the mapping outlives the removed files.
        return load(tmp, **load_options)


class LLM:
    """A GGUF language model (llama, qwen2, qwen3) with its tokenizer and a KV cache.

    The same pieces `rlx generate` uses: prefill of the prompt, then one token
    at a time, sampled in llama.cpp's order (repetition penalty, top-k, top-p,
    min-p, temperature). threads: process-wide worker threads (None keeps the
    current count). dequantize: every weight to f32 up front instead of
    running on the quant blocks.
    """

    def __init__(self, path, *, threads=None, dequantize=False):
        if threads is not None:
            set_num_threads(threads)
        self._m = _rlx._LLM(os.fspath(path), dequantize)
        self.last_tokens = []  # ids produced by the last generate()

    @property
    def n_vocab(self):
        return self._m.n_vocab

    @property
    def arch(self):
        return self._m.arch

    @property
    def summary(self):
        """'llama: 2 layers, d=64, 4/2 heads x 16, ff 128, vocab 32000'."""
        return self._m.summary

    @property
    def bos(self):
        return self._m.bos

    @property
    def eos(self):
        return self._m.eos

    def tokenize(self, text, add_bos=True, special=False):
        """Token ids of `text`. add_bos: BOS (and EOS) as the model's
        add_bos_token / add_eos_token say. special: text spelling a control
        token (e.g. "<|im_start|>") becomes that token."""
        return self._m.tokenize(text, add_bos, special)

    def detokenize(self, ids, special=False):
        """Text of `ids`; control tokens are dropped unless `special`.
        Invalid UTF-8 (a multi-byte character cut by the ids) is replaced."""
        return self._m.detokenize(list(ids), special).decode("utf-8", errors="replace")

    def logits(self, tokens):
        """Logits of every token, np.ndarray float32 [len(tokens), n_vocab],
        for ids (or text, tokenized with BOS) at positions 0..; does not touch
        the generation state."""
        if isinstance(tokens, str):
            tokens = self.tokenize(tokens)
        return self._m.logits(list(tokens))

    def generate(self, prompt, max_tokens=64, temperature=0.8, *, top_k=40, top_p=0.95,
                 min_p=0.0, repeat_penalty=1.0, repeat_last_n=64, seed=0, stream=False,
                 add_bos=True, ignore_eos=False):
        """Generates up to `max_tokens` tokens after `prompt` (text, or a list
        of ids) and returns the new text (without the prompt); with
        stream=True, returns an iterator over text pieces as they are decoded.
        Stops early at an end-of-generation token unless ignore_eos.
        temperature <= 0 is greedy; top_k <= 0, top_p >= 1, min_p <= 0 and
        repeat_penalty 1 turn those off. The ids produced are in
        `last_tokens` afterwards. Ctrl-C stops between tokens."""
        if isinstance(prompt, str):
            ids = self._m.tokenize(prompt, add_bos, True)
        else:
            ids = [int(i) for i in prompt]
        if not ids:
            raise Error("generate: the prompt encodes to no tokens")
        sampler = _rlx._Sampler(float(temperature), int(top_k), float(top_p), float(min_p),
                                float(repeat_penalty), int(repeat_last_n), int(seed))
        pieces = self._pieces(ids, sampler, int(max_tokens), ignore_eos)
        return pieces if stream else "".join(pieces)

    def _pieces(self, ids, sampler, max_tokens, ignore_eos):
        # The loop of `rlx generate` (tools/rlx/cmd_generate.cc), yielding text;
        # pieces are bytes, so a character split over tokens waits for its rest.
        m = self._m
        self.last_tokens = []
        m.reset()
        logits = m.feed(ids)
        history = list(ids)
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for produced in range(max_tokens):
            nxt = sampler.sample(logits, history)
            if not ignore_eos and m.is_eog(nxt):
                break
            self.last_tokens.append(nxt)
            history.append(nxt)
            s = text.decode(m.piece(nxt, False))
            if s:
                yield s
            if produced + 1 < max_tokens:
                logits = m.feed([nxt])
        s = text.decode(b"", final=True)
        if s:
            yield s

    def __repr__(self):
        return f"<rlx.LLM {self.summary} '{self._m.path}'>"
