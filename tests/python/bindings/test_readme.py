"""Runs the ```python blocks of README.md's "## Python" section, in order and
in one namespace, so the documented examples never rot."""
import os
import re
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "..", "..", "README.md")


def python_blocks():
    text = open(README, encoding="utf-8").read()
    start = text.index("\n## Python\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else None]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_python_section(mlp_dir, tiny_llm, tmp_path, monkeypatch, capsys):
    blocks = python_blocks()
    assert len(blocks) >= 3, "the README's Python section lost its examples"
    os.makedirs(tmp_path / "out")
    shutil.copytree(mlp_dir, tmp_path / "out" / "mlp")
    shutil.copy(tiny_llm[0], tmp_path / "model.gguf")
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "readme"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"README.md python block {i + 1}", "exec"), scope)
    printed = capsys.readouterr().out
    # The comments in the blocks show what they print; hold them to it.
    assert "TensorSpec(name='x', shape=(8, 64), dtype='f32')" in printed
    assert "input 'x' is float64 (f64) but the model declares [8,64] f32" in printed
    assert "shape=('batch', 4)" in printed
    assert "['grad::0.bias', 'grad::0.weight', 'grad::input']" in printed
    assert "['input', 'target'] True" in printed
    assert "[] optim::exp_avg::0.weight" in printed
    assert os.path.isdir(tmp_path / "mlp.mlpackage")
