"""The `dlvm` command with ONNX models: the IR printed, a model run with `dlvm exec`, the
example CNN fine-tuned by `dlvm run` and written back with `dlvm onnx update`, and clean
errors for bad files."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.onnx

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "onnx-cnn"


def run_dlvm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_compile_emit_dlvm_prints_the_imported_module() -> None:
    result = run_dlvm("compile", str(EXAMPLE / "cnn.onnx"), "--emit", "dlvm")
    assert result.returncode == 0, result.stderr
    module = ir.parse(result.stdout)
    assert str(module) == result.stdout
    assert [f.name for f in module.functions] == [
        "forward", "init_params", "main", "loss", "loss_grad", "predict", "train_step"]
    assert "%conv1.weight = extract 0 from %params" in result.stdout


def test_import_freeze_keeps_only_main(tmp_path: Path) -> None:
    out = tmp_path / "cnn.dl"
    result = run_dlvm("onnx", "import", str(EXAMPLE / "cnn.onnx"), "--freeze", "-o", str(out))
    assert result.returncode == 0, result.stderr
    module = ir.parse(out.read_text())
    assert [f.name for f in module.functions] == ["main"]
    x = np.random.default_rng(0).random((3, 64), dtype=np.float32)
    unfrozen = ir.compile(dlvm.onnx.load(EXAMPLE / "cnn.onnx"), "interp")["main"](x)
    np.testing.assert_allclose(ir.compile(module, "interp")["main"](x), unfrozen, rtol=1e-6)


def test_exec_runs_the_model(tmp_path: Path) -> None:
    x = np.random.default_rng(1).random((2, 64), dtype=np.float32)
    np.savez(tmp_path / "in.npz", arg0=x)
    result = run_dlvm("exec", str(EXAMPLE / "cnn.onnx"), "-f", "main", "--args",
                  str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz"))
    assert result.returncode == 0, result.stderr
    expected = ir.compile(dlvm.onnx.load(EXAMPLE / "cnn.onnx"), "interp")["main"](x)
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["out0"], expected, rtol=1e-5)


def test_the_cnn_fine_tunes_and_is_written_back(tmp_path: Path) -> None:
    work = tmp_path / "onnx-cnn"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("out"))
    digits = EXAMPLE.parent / "digits-mlp" / "digits.npz"
    result = run_dlvm("run", str(work / "pipeline.toml"), "--set", f'data.path="{digits}"',
                      "--set", "train.epochs=8")
    assert result.returncode == 0, result.stderr
    found = re.search(r"test accuracy: ([\d.]+)%", result.stdout)
    assert found is not None and float(found.group(1)) > 70.0  # from 10 %: it learns
    tuned = work / "out" / "tuned.onnx"
    trained = work / "out" / "pipeline" / "latest" / "params.npz"  # the newest run's
    result = run_dlvm("onnx", "update", str(work / "cnn.onnx"), "--params",
                  str(trained), "-o", str(tuned))
    assert result.returncode == 0, result.stderr
    params = np.load(trained)
    module = dlvm.onnx.load(tuned)
    exe = ir.compile(module, "interp")
    stored = exe.call("init_params")
    names = [n for n in params.files if n != "epoch"]
    for name, value in zip(names, stored, strict=True):
        np.testing.assert_array_equal(value, params[name])  # written back and read: exact
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(2).random((5, 64), dtype=np.float32)
    expected = ort.InferenceSession(str(tuned)).run(None, {"x": x})[0]
    np.testing.assert_allclose(exe["main"](x), expected, rtol=1e-4, atol=1e-5)


def test_update_refuses_parameters_that_do_not_fit(tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", **{"conv1.weight": np.zeros((2, 2), np.float32)})
    result = run_dlvm("onnx", "update", str(EXAMPLE / "cnn.onnx"), "--params",
                  str(tmp_path / "p.npz"), "-o", str(tmp_path / "t.onnx"))
    assert result.returncode == 1 and "no parameter 'conv1.bias'" in result.stderr
    module = dlvm.onnx.load(EXAMPLE / "cnn.onnx")
    params = ir.compile(module, "interp").call("init_params")
    names = ["conv1.weight", "conv1.bias", "norm.weight", "norm.bias", "conv2.weight",
             "conv2.bias", "fc.weight", "fc.bias"]
    arrays = dict(zip(names, params, strict=True))
    arrays["conv1.weight"] = np.zeros((2, 2), np.float32)
    np.savez(tmp_path / "p.npz", **arrays)
    result = run_dlvm("onnx", "update", str(EXAMPLE / "cnn.onnx"), "--params",
                  str(tmp_path / "p.npz"), "-o", str(tmp_path / "t.onnx"))
    assert result.returncode == 1 and "'conv1.weight' has shape (2, 2)" in result.stderr
    assert not (tmp_path / "t.onnx").exists()


@pytest.mark.parametrize("content", [b"", b"not a protobuf \x00\xff" * 10])
def test_a_damaged_file_is_a_clean_error(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    result = run_dlvm("verify", str(bad))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "bad.onnx" in result.stderr


def test_a_loss_of_ones_own_is_linked_into_the_imported_module(tmp_path: Path) -> None:
    work = tmp_path / "onnx-cnn"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("out"))
    digits = EXAMPLE.parent / "digits-mlp" / "digits.npz"
    result = run_dlvm("run", str(work / "pipeline-smoothed.toml"), "--set",
                      f'data.path="{digits}"', "--set", "train.epochs=3")
    assert result.returncode == 0, result.stderr
    assert (work / "out" / "pipeline-smoothed" / "latest" / "params.npz").exists()
    result = run_dlvm("run", str(work / "pipeline-smoothed.toml"), "--set",
                      f'data.path="{digits}"', "--set", 'module.link=["missing.dl"]',
                      "--dry-run")
    assert result.returncode == 1
    assert "module.link[0]: cannot read module" in result.stderr
    assert "missing.dl': it does not exist" in result.stderr


BERT = EXAMPLE.parent / "onnx-bert"


def test_the_bert_classifier_fine_tunes_and_is_written_back(tmp_path: Path) -> None:
    """examples/onnx-bert: a Hugging Face BERT classifier learns its made-up task from the
    ONNX file's weights, and the tuned weights, written back, run in ONNX Runtime."""
    work = tmp_path / "onnx-bert"
    shutil.copytree(BERT, work, ignore=shutil.ignore_patterns("out"))
    result = run_dlvm("run", str(work / "pipeline.toml"))
    assert result.returncode == 0, result.stderr
    found = re.search(r"test accuracy: ([\d.]+)%", result.stdout)
    assert found is not None and float(found.group(1)) > 90.0, result.stdout
    tuned = work / "out" / "tuned.onnx"
    result = run_dlvm("onnx", "update", str(work / "bert.onnx"), "--params",
                      str(work / "out" / "pipeline" / "latest" / "params.npz"), "-o",
                      str(tuned))
    assert result.returncode == 0, result.stderr
    ort = pytest.importorskip("onnxruntime")
    ids = np.load(work / "tokens.npz")["ids"][:64]
    labels = np.load(work / "tokens.npz")["labels"][:64]
    (logits,) = ort.InferenceSession(str(tuned)).run(None, {"ids": ids})
    assert (logits.argmax(axis=1) == labels).mean() > 0.9
    exe = ir.compile(dlvm.onnx.load(tuned), "interp")
    np.testing.assert_allclose(exe["main"](ids), logits, rtol=1e-3, atol=1e-4)
