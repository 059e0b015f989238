"""`dlvm exec`: .npz arguments and results, and one-line errors for bad calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

Invoke = Callable[..., Any]


@pytest.fixture
def args_npz(tmp_path: Path) -> Path:
    path = tmp_path / "in.npz"
    np.savez(path, arg0=np.array([1.5, -2.0], dtype=np.float32))
    return path


def test_prints_results(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["out0: <2 x f32>", "[ 3. -4.]"]


def test_writes_npz(invoke: Invoke, double: Path, args_npz: Path, tmp_path: Path) -> None:
    out = tmp_path / "result"  # no suffix: written under exactly this name
    result = invoke("exec", str(double), "-f", "@f", "--args", str(args_npz), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    with np.load(out) as archive:
        assert archive.files == ["out0"]
        np.testing.assert_array_equal(archive["out0"], np.array([3.0, -4.0], np.float32))
        assert archive["out0"].dtype == np.float32


def test_explicit_interp_target_and_seed(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz),
                    "--target", "interp", "--seed", "7")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_scalar_arguments_and_results(invoke: Invoke, tmp_path: Path) -> None:
    src = tmp_path / "scalar.dl"
    src.write_text("func @g: (f64) -> f64 {\n'entry(%x: f64):\n"
                   "    %y = multiply %x: f64, %x: f64\n    return %y: f64\n}\n")
    args = tmp_path / "in.npz"
    np.savez(args, arg0=np.array(3.0))
    result = invoke("exec", str(src), "-f", "g", "--args", str(args))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["out0: f64", "9.0"]


def test_unknown_function_lists_available(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "nope", "--args", str(args_npz))
    assert result.exit_code == 1
    assert result.stderr == f"dlvm: error: no function '@nope' to call in '{double}' " \
                            "(available: @f)\n"


def test_wrong_argument_count(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "two.npz"
    np.savez(args, arg0=np.ones(2, np.float32), arg1=np.ones(2, np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert "takes 1 argument, 2 given" in result.stderr
    assert result.stderr.count("\n") == 1


def test_no_args_file_for_a_function_with_arguments(invoke: Invoke, double: Path) -> None:
    result = invoke("exec", str(double), "-f", "f")
    assert result.exit_code == 1
    assert "takes 1 argument, 0 given" in result.stderr


def test_missing_args_file(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(tmp_path / "none.npz"))
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error: cannot read arguments file")
    assert result.stderr.count("\n") == 1


def test_badly_named_arrays(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "named.npz"
    np.savez(args, x=np.ones(2, np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert "arg0" in result.stderr
    assert "found x" in result.stderr


@pytest.mark.parametrize("content", [b"not an archive\n", b""])
def test_not_an_npz(invoke: Invoke, double: Path, tmp_path: Path, content: bytes) -> None:
    args = tmp_path / "bad.npz"
    args.write_bytes(content)
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error:")
    assert "Traceback" not in result.stdout + result.stderr


def test_wrong_shape_is_a_run_time_error(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "shape.npz"
    np.savez(args, arg0=np.ones(3, np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error:")


def test_unknown_target(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz), "-t", "nosuch")
    assert result.exit_code == 1
    assert "nosuch" in result.stderr
    assert "interp" in result.stderr  # the known targets are listed


def test_missing_required_option_is_a_usage_error(invoke: Invoke, double: Path) -> None:
    result = invoke("exec", str(double))
    assert result.exit_code == 2
    assert "--function" in result.stderr
