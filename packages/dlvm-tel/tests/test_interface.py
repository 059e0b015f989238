"""`dlvm tel generate` writes a typed Python module: imported and used here (checked with
ruff and mypy --strict in test_generated_class.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def dlvm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True)


def generate(model: Path, out: Path) -> ModuleType:
    result = dlvm("tel", "generate", str(model), "-o", str(out))
    assert result.returncode == 0, result.stderr
    spec = importlib.util.spec_from_file_location(out.stem, out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_class_trains_the_recurrent_model(tmp_path: Path) -> None:
    api = generate(EXAMPLES / "tel-rnn" / "model.tel", tmp_path / "rnn_api.py")
    model = api.Sequences(seed=0, target="interp")
    assert list(model.parameters) == ["wx", "wh", "bh", "wy", "by"]
    assert "wx [2 x 16]" in api.Sequences.__doc__
    np.testing.assert_array_equal(model.bh, np.zeros(16, np.float32))  # declared constant
    data = np.load(EXAMPLES / "tel-rnn" / "sequences.npz")
    xs, labels = data["sequences"][:256], data["labels"][:256]
    targets = np.eye(2, dtype=np.float32)[labels]
    before = model.loss(xs, targets)
    for _ in range(3):
        for i in range(0, 256, 32):
            model.step(xs[i:i + 32], targets[i:i + 32], 0.1)
    assert model.loss(xs, targets) < before
    assert model(xs[:5]).shape == (5, 2)
    assert model(xs[:5, :3]).shape == (5, 2)  # any sequence length
    grads = model.grad(xs[:8], targets[:8])
    assert {k: v.shape for k, v in grads.items()} == {k: v.shape for k, v in
                                                       model.parameters.items()}


def test_parameters_are_saved_and_loaded_by_name(tmp_path: Path) -> None:
    api = generate(EXAMPLES / "tel-digits" / "model.tel", tmp_path / "digits_api.py")
    a, b = api.Digits(seed=0, target="interp"), api.Digits(seed=1, target="interp")
    assert not np.array_equal(a.w1, b.w1)
    a.save(tmp_path / "p.npz")
    b.load(tmp_path / "p.npz")
    x = np.random.default_rng(0).random((3, 64), dtype=np.float32)
    np.testing.assert_array_equal(a(x), b(x))  # the same code on the same values: exact
    np.savez(tmp_path / "bad.npz", w1=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no parameter 'b1'"):
        b.load(tmp_path / "bad.npz")


def test_generate_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tel"
    bad.write_text("module m\nx: in[3]\ny: out[3] = tahn(x)\n")
    result = dlvm("tel", "generate", str(bad), "-o", str(tmp_path / "a.py"))
    assert result.returncode == 1
    assert "bad.tel:3:13: error: unknown function 'tahn'; did you mean 'tanh'?" in \
        result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "a.py").exists()
    result = dlvm("tel", "generate", str(EXAMPLES / "tel-digits" / "model.tel"),
                  "-o", str(tmp_path / "a.txt"))
    assert result.returncode == 1 and "name it NAME.py" in result.stderr
    result = dlvm("tel", "generate", str(tmp_path / "missing.tel"))
    assert result.returncode == 1 and "cannot read" in result.stderr
