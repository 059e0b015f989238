"""Run-time errors of native code name the user's file, line and column — not the copy of
the module that the target optimized, and not another file whose compiled code the cache
serves for the same text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir

SOURCE = """\
module "memory"
stage raw

func @row: (<3 x 2 x f32>, i64) -> <2 x f32> {
'entry(%m: <3 x 2 x f32>, %i: i64):
    %r = extract %i: i64 from %m: <3 x 2 x f32>
    %s = tanh %r: <2 x f32>
    return %s: <2 x f32>
}
"""

M = np.zeros((3, 2), np.float32)
OUT_OF_RANGE = np.int64(5)


def write(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text(SOURCE)
    return path


def test_an_error_of_optimized_native_code_names_the_users_file(tmp_path: Path) -> None:
    exe = ir.compile(ir.parse_file(str(write(tmp_path, "memory.dl"))), target="llvm-cpu")
    with pytest.raises(ir.ExecutionError) as caught:
        exe["row"](M, OUT_OF_RANGE)
    assert str(caught.value) == (f"{tmp_path / 'memory.dl'}:6:10: 'extract': index 5 out of "
                                 "bounds for size 3")


def test_code_from_the_cache_names_the_file_it_now_serves(tmp_path: Path) -> None:
    """The cache is keyed by the module's text: a second file with the same text loads the
    first one's code, and its errors name the second file."""
    for name in ("first.dl", "second.dl"):
        exe = ir.compile(ir.parse_file(str(write(tmp_path, name))), target="llvm-cpu")
        with pytest.raises(ir.ExecutionError, match=rf"^{tmp_path / name}:6:10: 'extract'"):
            exe["row"](M, OUT_OF_RANGE)


def test_dlvm_exec_names_the_users_file(tmp_path: Path) -> None:
    source = write(tmp_path, "memory.dl")
    args = tmp_path / "args.npz"
    np.savez(args, arg0=M, arg1=OUT_OF_RANGE)
    out = subprocess.run([sys.executable, "-m", "dlvm.cli", "exec", str(source), "-f", "row",
                          "--target", "llvm-cpu", "--args", str(args)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr == (f"dlvm: error: {source}:6:10: 'extract': index 5 out of bounds for "
                          "size 3\n")
