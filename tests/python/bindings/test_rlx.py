"""The rlx Python package against NumPy / PyTorch references."""
import json
import os
import struct
import threading

import numpy as np
import pytest
import torch

import rlx
import tiny_gguf


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dt = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dt[v["dtype"]]).reshape(v["shape"])
    return out


def mlp_reference(mlp_dir, x):
    w = {k: torch.from_numpy(v.copy())
         for k, v in read_safetensors(os.path.join(mlp_dir, "weights.safetensors")).items()}
    h = torch.nn.functional.gelu(torch.from_numpy(x) @ w["fc1.weight"].T + w["fc1.bias"])
    logits = h @ w["fc2.weight"].T + w["fc2.bias"]
    return logits.numpy(), torch.softmax(logits, -1).numpy()


# ------------------------------------------------------------------ load / run


def test_load_specs_and_run_match_reference(mlp_dir):
    m = rlx.load(mlp_dir)
    assert m.format == "rlx-graph"
    assert [(s.name, s.shape, s.dtype) for s in m.inputs] == [("x", (8, 64), "f32")]
    assert [(s.name, s.shape, s.dtype) for s in m.outputs] == [
        ("logits", (8, 10), "f32"), ("probs", (8, 10), "f32")]
    assert m.inputs[0].numpy_dtype == np.float32
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    out = m.run({"x": x})
    assert list(out) == ["logits", "probs"]
    ref_logits, ref_probs = mlp_reference(mlp_dir, x)
    assert out["logits"].dtype == np.float32 and out["logits"].shape == (8, 10)
    np.testing.assert_allclose(out["logits"], ref_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["probs"], ref_probs, rtol=1e-5, atol=1e-6)
    assert "x [8,64] f32" in repr(m)


def test_matmul_precision_bf16(mlp_dir):
    # bf16 rounds the Linear layers' operands (f32 sums): close to the f32
    # reference at bf16's precision, and not equal to it where the CPU has
    # AVX-512 BF16; anything but f32 / bf16 is an rlx.Error.
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    ref_logits, _ = mlp_reference(mlp_dir, x)
    out = rlx.load(mlp_dir, matmul_precision="bf16").run({"x": x})["logits"]
    np.testing.assert_allclose(out, ref_logits, rtol=0.05, atol=0.05)
    if "avx512_bf16" in open("/proc/cpuinfo").read() and os.environ.get("RLX_ISA", "") in ("", "avx512"):
        assert np.abs(out - ref_logits).max() > 1e-4
    with pytest.raises(rlx.Error, match="not one of f32, bf16"):
        rlx.load(mlp_dir, matmul_precision="tf32")


def test_outputs_survive_later_runs(mlp_dir):
    # Outputs share rlx's buffers; a buffer still held by an array is never reused.
    m = rlx.load(mlp_dir)
    rng = np.random.default_rng(1)
    x1, x2 = (rng.standard_normal((8, 64)).astype(np.float32) for _ in range(2))
    first = m.run({"x": x1})["logits"]
    keep = first.copy()
    for _ in range(3):
        m.run({"x": x2})
    np.testing.assert_array_equal(first, keep)
    first[:] = 0  # writable, and writing it does not disturb the next run
    np.testing.assert_allclose(m.run({"x": x1})["logits"], keep, rtol=0, atol=0)


def test_non_contiguous_and_list_inputs(mlp_dir):
    m = rlx.load(mlp_dir)
    x = np.random.default_rng(2).standard_normal((64, 8)).astype(np.float32)
    ref = m.run({"x": np.ascontiguousarray(x.T)})["logits"]
    np.testing.assert_array_equal(m.run({"x": x.T})["logits"], ref)  # a transposed view
    np.testing.assert_array_equal(m.run({"x": x.T.tolist()})["logits"], ref)  # list: declared dtype


def test_errors_carry_rlx_messages(mlp_dir, tmp_path):
    assert issubclass(rlx.Error, RuntimeError)
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(rlx.Error, match="no-such-model"):
        rlx.load(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(rlx.Error, match="bad.json"):
        rlx.load(str(bad))
    m = rlx.load(mlp_dir)
    with pytest.raises(rlx.Error, match=r"input 'x' is float64 \(f64\) but the model declares "
                                        r"\[8,64\] f32.*cast_inputs=True"):
        m.run({"x": np.zeros((8, 64))})
    with pytest.raises(rlx.Error, match=r"input 'x' \(\[8,64\] f32\) is missing"):
        m.run({})
    with pytest.raises(rlx.Error, match=r"unknown input 'y'; the model takes: x"):
        m.run({"x": np.zeros((8, 64), np.float32), "y": np.zeros(1)})
    with pytest.raises(rlx.Error, match=r"input 'x' has shape \[3,64\], expected \[8,64\] f32"):
        m.run({"x": np.zeros((3, 64), np.float32)})  # the C++ shape check
    with pytest.raises(rlx.Error, match=r"input 'x' is complex64, which rlx has no dtype for"):
        m.run({"x": np.zeros((8, 64), np.complex64)})
    with pytest.raises(rlx.Error, match=r"unknown pass 'no_such_pass'; valid passes: .*fold"):
        rlx.load(mlp_dir, disable_passes=["no_such_pass"])


def test_profile(mlp_dir):
    m = rlx.load(mlp_dir)
    x = np.zeros((8, 64), np.float32)
    prof = m.profile({"x": x}, runs=3)
    ops = {p["op"] for p in prof}
    assert {"softmax"} <= ops and all(p["runs"] == 3 for p in prof), prof
    assert [p["total_ms"] for p in prof] == sorted((p["total_ms"] for p in prof), reverse=True)
    assert all(p["mean_ms"] >= 0 for p in prof)
    with pytest.raises(rlx.Error, match="runs must be > 0"):
        m.profile({"x": x}, runs=0)
    m.run({"x": x})  # profiling is off again


def test_cast_inputs(mlp_dir):
    x = np.random.default_rng(3).standard_normal((8, 64))
    m = rlx.load(mlp_dir, cast_inputs=True)
    ref = rlx.load(mlp_dir).run({"x": x.astype(np.float32)})["logits"]
    np.testing.assert_array_equal(m.run({"x": x})["logits"], ref)
    np.testing.assert_array_equal(rlx.load(mlp_dir).run({"x": x}, cast_inputs=True)["logits"], ref)


def test_threads_and_concurrent_runs(mlp_dir):
    rlx.set_num_threads(1)
    assert rlx.num_threads() == 1
    m = rlx.load(mlp_dir, threads=2)
    assert rlx.num_threads() == 2
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((8, 64)).astype(np.float32) for _ in range(4)]
    refs = [mlp_reference(mlp_dir, x)[0] for x in xs]
    results = [None] * len(xs)

    def work(i):
        for _ in range(20):
            results[i] = m.run({"x": xs[i]})["logits"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, ref in zip(results, refs):
        np.testing.assert_allclose(r, ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ PyTorch


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)
        self.norm = torch.nn.LayerNorm(5)

    def forward(self, x):
        return torch.tanh(self.norm(self.fc(x))) * 2


def test_from_torch_dynamic_batch(tmp_path):
    torch.manual_seed(0)
    mod = Small().eval()
    m = rlx.from_torch(mod, (torch.randn(3, 6),), dynamic={0: {0: "batch"}})
    assert m.format == "torch-ir"
    assert m.inputs[0].shape == ("batch", 6) and m.inputs[0].dtype == "f32"
    assert m.outputs[0].shape[1] == 5
    assert not os.path.exists(m.source)  # the temporary export is gone
    for batch in (1, 7):
        x = torch.randn(batch, 6)
        (name, y), = m.run({m.inputs[0].name: x.numpy()}).items()
        np.testing.assert_allclose(y, mod(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    kept = rlx.from_torch(mod, (torch.randn(2, 6),), path=tmp_path / "small")
    assert os.path.exists(tmp_path / "small" / "torch-ir.json")
    assert kept.inputs[0].shape == (2, 6)


def test_from_torch_dynamic_symbols_by_name_or_number():
    torch.manual_seed(0)
    mod = Small().eval()
    for sym, name in (("rows_a", "rows_a"), (1, "seq")):
        m = rlx.from_torch(mod, (torch.randn(3, 6),), dynamic={0: {0: sym}})
        assert m.inputs[0].shape == (name, 6)
        x = torch.randn(5, 6)
        (y,) = m.run({m.inputs[0].name: x.numpy()}).values()
        np.testing.assert_allclose(y, mod(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="not an identifier"):
        rlx.from_torch(mod, (torch.randn(3, 6),), dynamic={0: {0: "2x"}})


def test_grad_matches_torch_autograd(tmp_path):
    torch.manual_seed(0)
    mod = Small().eval()
    x = torch.randn(3, 6)
    m = rlx.from_torch(mod, (x,))
    name = m.inputs[0].name
    ct = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    grads = rlx.grad(m, {name: x.numpy()}, cotangents={m.outputs[0].name: ct})
    xr = x.clone().requires_grad_(True)
    mod(xr).backward(torch.from_numpy(ct))
    want = {"grad::" + k: p.grad.numpy() for k, p in mod.named_parameters()}
    want["grad::" + name] = xr.grad.numpy()
    assert sorted(grads) == sorted(want)
    for k, g in grads.items():
        np.testing.assert_allclose(g, want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # A path works as well as a Model; no cotangents needs a loss or one scalar output.
    kept = rlx.from_torch(mod, (x,), path=tmp_path / "small")
    with pytest.raises(rlx.Error, match="cotangent"):
        rlx.grad(kept.source, {name: x.numpy()})
    with pytest.raises(rlx.Error, match="'nope' is not one of the model's inputs"):
        rlx.grad(kept, {"nope": x.numpy()})


def export_small_for_training(tmp_path):
    """Small as a train=True export (mse loss) in tmp_path/small: (module, x, target)."""
    import rlx_torch
    torch.manual_seed(0)
    mod = Small()
    x, target = torch.randn(4, 6), torch.randn(4, 5)
    rlx_torch.export(mod, (x,), str(tmp_path / "small"), train=True,
                     loss_fn=torch.nn.functional.mse_loss, target=target)
    return mod, x, target


def test_trainer_matches_torch_optim(tmp_path):
    mod, x, target = export_small_for_training(tmp_path)
    t = rlx.Trainer(tmp_path / "small", optimizer="sgd", lr=0.1, momentum=0.9)
    assert sorted(t.trainable) == sorted(k for k, _ in mod.named_parameters())
    opt = torch.optim.SGD(mod.parameters(), lr=0.1, momentum=0.9)
    batch = {n: (x if n != "target" else target).numpy() for n in t.data_inputs}
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(mod(x), target)
        loss.backward()
        opt.step()
        assert abs(t.step(batch) - loss.item()) < 1e-5
    assert t.step_count == 3 and abs(t.last_lr - 0.1) < 1e-12
    w = t.weights()
    for k, p in mod.named_parameters():
        np.testing.assert_allclose(w[k], p.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert "loss" in t.evaluate(batch)
    t.save(str(tmp_path / "trained"))
    assert rlx.load(tmp_path / "trained").outputs
    with pytest.raises(rlx.Error, match="is not a data input"):
        t.step({"nope": x.numpy()})


def test_compile_training_step(tmp_path):
    # The CoreML training step of a train=True export: a valid package, and the initial
    # state of every param and optimizer buffer, named as rlx compile --train names them.
    mod, _, _ = export_small_for_training(tmp_path)
    pkg = tmp_path / "step.mlpackage"
    state, holds = rlx.compile_training_step(tmp_path / "small", pkg, optimizer="adam",
                                             clip_norm=1.0)
    assert rlx.check_coreml(str(pkg)) == []
    assert sorted(holds) == sorted(state)
    params = dict(mod.named_parameters())
    for name, what in holds.items():
        if name.startswith("param__"):
            np.testing.assert_array_equal(state[name], params[what].detach().numpy())
        else:
            assert what.startswith("optim::exp_avg") and not state[name].any()
    assert len(state) == 3 * len(params)  # each param, its exp_avg and exp_avg_sq
    with pytest.raises(rlx.Error, match="unknown optimizer"):
        rlx.compile_training_step(tmp_path / "small", tmp_path / "x.mlpackage", optimizer="nope")


def test_ctrl_c_interrupts_a_long_run():
    import signal
    import time
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(64)]).eval()
    m = rlx.from_torch(net, (torch.randn(1024, 512),))
    x = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)
    t0 = time.perf_counter()
    m.run({m.inputs[0].name: x})
    full = time.perf_counter() - t0
    assert full > 0.05, f"the model runs in {full:.3f} s, too fast to interrupt"
    threading.Timer(full / 4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        m.run({m.inputs[0].name: x})
    assert time.perf_counter() - t0 < full * 0.9  # stopped part-way, not at the end
    # Python's own handler is back, and the model runs again.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert m.run({m.inputs[0].name: x})


class AllDTypes(torch.nn.Module):
    def forward(self, f32, f16, bf16, f64, i8, i16, i32, i64, u8, b):
        return (f32 * 2, f16 * 2, bf16 * 2, f64 * 2, i8 * 2, i16 * 2, i32 * 2, i64 * 2, u8 * 2,
                torch.logical_not(b))


def test_every_dtype_round_trips():
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
              torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
    base = torch.arange(6).reshape(2, 3)
    ex = tuple(base % 3 == 0 if d == torch.bool else (base if d == torch.uint8 else base - 2).to(d)
               for d in dtypes)
    m = rlx.from_torch(AllDTypes(), ex)
    assert [s.dtype for s in m.inputs] == ["f32", "f16", "bf16", "f64", "i8", "i16", "i32",
                                          "i64", "u8", "bool"]
    feeds = {}
    for spec, t in zip(m.inputs, ex):
        # bf16 goes in as float32 (NumPy has no bf16); the rest as their own dtype.
        feeds[spec.name] = (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    out = list(m.run(feeds).values())
    want = AllDTypes()(*ex)
    np_dtypes = [np.float32, np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                 np.int64, np.uint8, np.bool_]
    for got, ref, dt in zip(out, want, np_dtypes):
        assert got.dtype == dt
        ref = ref.float() if ref.dtype == torch.bfloat16 else ref
        np.testing.assert_array_equal(got, ref.numpy())
    # bf16 as raw bits (uint16) reads the same values; float32 rounds to nearest even.
    bits = (np.array([1.0, 1.0078125, -3.5, 0, 0, 0], np.float32).view(np.uint32) >> 16)
    feeds[m.inputs[2].name] = bits.astype(np.uint16).reshape(2, 3)
    np.testing.assert_array_equal(m.run(feeds)[m.outputs[2].name].ravel(),
                                  [2.0, 2.015625, -7.0, 0, 0, 0])
    # 1 + 2^-8 lies halfway between two bf16 values: ties go to even (1.0).
    feeds[m.inputs[2].name] = np.array([[1.00390625 + 1e-6, 1.00390625, 1], [1, 1, 1]],
                                       np.float32)
    np.testing.assert_array_equal(m.run(feeds)[m.outputs[2].name][0], [2.015625, 2.0, 2.0])


def test_onnx(tmp_path):
    torch.manual_seed(1)
    mod = Small().eval()
    x = torch.randn(4, 6)
    path = str(tmp_path / "small.onnx")
    torch.onnx.export(mod, (x,), path, input_names=["x"], output_names=["y"], opset_version=17)
    m = rlx.load(path)
    assert m.format.startswith("onnx")
    np.testing.assert_allclose(m.run({"x": x.numpy()})["y"], mod(x).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ CoreML


def test_compile_coreml(mlp_dir, tmp_path):
    m = rlx.load(mlp_dir)
    pkg = str(tmp_path / "mlp.mlpackage")
    assert rlx.compile(m, target="coreml", path=pkg) == pkg
    assert os.path.isdir(pkg) and rlx.check_coreml(pkg) == []
    pkg16 = rlx.compile(mlp_dir, path=tmp_path / "mlp16.mlpackage", opset="CoreML7", fp16=True)
    assert rlx.check_coreml(pkg16) == []
    assert rlx.check_coreml(str(tmp_path)) != []  # not a package
    with pytest.raises(rlx.Error, match="CoreML9"):
        rlx.compile(m, path=str(tmp_path / "x.mlpackage"), opset="CoreML9")
    with pytest.raises(ValueError, match="onnx"):
        rlx.compile(m, target="onnx", path=str(tmp_path / "x"))


# ------------------------------------------------------------------ LLM


def greedy_reference(w, ids, n):
    ids = list(ids)
    out = []
    for _ in range(n):
        nxt = int(np.argmax(tiny_gguf.reference_logits(w, ids)[-1]))
        out.append(nxt)
        ids.append(nxt)
    return out


def test_llm_tokenize_logits_generate(tiny_llm):
    path, w = tiny_llm
    llm = rlx.LLM(path)
    assert llm.n_vocab == 50 and llm.arch == "llama" and llm.bos == 1 and llm.eos == 2
    # '▁a' = 3, '▁b' = 5, 'b' = 6 in the fixture's vocabulary; BOS first.
    assert llm.tokenize("a b") == [1, 3, 5]
    assert llm.tokenize("a bb", add_bos=False) == [3, 5, 6]
    assert llm.detokenize(llm.tokenize("ab ba")) == "ab ba"
    ids = llm.tokenize("abc cab")
    ref = tiny_gguf.reference_logits(w, ids)
    got = llm.logits(ids)
    assert got.shape == (len(ids), 50) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)

    text = llm.generate(ids, max_tokens=6, temperature=0, ignore_eos=True)
    assert llm.last_tokens == greedy_reference(w, ids, 6)
    vocab = tiny_gguf.vocab(50)
    want = "".join("" if i < 3 else vocab[i].replace("\u2581", " ") for i in llm.last_tokens)
    assert text == want
    pieces = list(llm.generate(ids, max_tokens=6, temperature=0, ignore_eos=True, stream=True))
    assert "".join(pieces) == text and llm.last_tokens == greedy_reference(w, ids, 6)
    # Sampling is seeded: same seed, same text; the prompt as text works too.
    a = llm.generate("abc", max_tokens=8, temperature=0.9, seed=7, ignore_eos=True)
    b = llm.generate("abc", max_tokens=8, temperature=0.9, seed=7, ignore_eos=True)
    assert a == b and len(llm.last_tokens) == 8


def test_llm_errors(tiny_llm, tmp_path):
    path, _ = tiny_llm
    llm = rlx.LLM(path)
    with pytest.raises(rlx.Error, match="50"):
        llm.logits([1, 99])  # outside the vocabulary
    with pytest.raises(rlx.Error, match="gguf|GGUF|magic"):
        (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\0\0\0garbage")
        rlx.LLM(str(tmp_path / "x.gguf"))


def test_gguf_through_load(tiny_llm):
    path, w = tiny_llm
    m = rlx.load(path)
    assert {s.name for s in m.inputs} == {"tokens", "positions"}
    ids = [1, 3, 8, 5]
    out = m.run({"tokens": np.array(ids, np.int64), "positions": np.arange(4, dtype=np.int64)})
    np.testing.assert_allclose(out["logits"], tiny_gguf.reference_logits(w, ids),
                               rtol=1e-4, atol=1e-4)


def test_logsumexp_of_infinite_rows_is_infinite():
    # A row all -inf, a row holding +inf: -inf and +inf as eager gives, not NaN.
    class M(torch.nn.Module):
        def forward(self, x):
            return x.logsumexp(-1)

    x = torch.tensor([[-float("inf"), -float("inf")], [float("inf"), 1.0], [0.0, 1.0]])
    m = rlx.from_torch(M(), (x,))
    (_, got), = m.run({m.inputs[0].name: x.numpy()}).items()
    np.testing.assert_array_equal(got[:2], [-np.inf, np.inf])
    np.testing.assert_allclose(got[2], M()(x)[2].item(), rtol=1e-6)


def test_topk_and_sort_of_a_scalar_are_the_scalar_at_index_0():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.topk(x, 1, 0) + torch.sort(x, 0)

    m = rlx.from_torch(M(), (torch.tensor(5.0),))
    got = [v for _, v in sorted(m.run({m.inputs[0].name: np.float32(5.0)}).items())]
    assert [float(v) for v in got] == [5.0, 0.0, 5.0, 0.0]
