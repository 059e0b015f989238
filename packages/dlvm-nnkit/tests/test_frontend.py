"""A Python file of staged functions is a module for every `dlvm` command: named after the
variables that hold them, gradients as declarations; failures are one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import dlvm.ir as ir
from dlvm.nnkit.frontend import load_file

MODEL = '''
from dlvm import nnkit as nn
from dlvm.nnkit import Float1D, Float2D

f = nn.lambda_(lambda x, w, b: x @ w + b.rank_lifted(), (Float2D, Float2D, Float1D))
g = nn.lambda_(lambda x, w, b: nn.tanh(f[x, w, b]), (Float2D, Float2D, Float1D))
dg = nn.gradient(g, wrt=(1, 2), keeping=0)
'''


def dlvm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_the_staged_functions_of_a_file_are_a_module(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    module = load_file(str(path))
    assert [fn.name for fn in module.functions] == ["f", "g", "dg"]
    assert "[gradient @g wrt 1, 2 keeping 0]" in ir.print_module(module)
    exe = ir.compile(module, "interp")
    rng = np.random.default_rng(0)
    x, w, b = rng.random((2, 3)), rng.random((3, 4)), rng.random(4)
    x, w, b = (a.astype(np.float32) for a in (x, w, b))
    dw, db, y = exe["dg"](x, w, b)
    np.testing.assert_allclose(y, np.tanh(x @ w + b), rtol=1e-5)
    np.testing.assert_allclose(db, (1 - y * y).sum(0), rtol=1e-5)
    np.testing.assert_allclose(dw, x.T @ (1 - y * y), rtol=1e-5)


def test_the_command_line_reads_python_files(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    done = dlvm("opt", str(path), "-p", "differentiation,O2")
    assert done.returncode == 0, done.stderr
    assert "func @dg:" in done.stdout and "[gradient" not in done.stdout


def test_failures_are_one_line_errors(tmp_path: Path) -> None:
    crash = tmp_path / "crash.py"
    crash.write_text("import math\n\nx = math.log(0)\n")
    done = dlvm("verify", str(crash))
    assert done.returncode == 1
    assert done.stderr == f"dlvm: error: {crash}:3: error: ValueError: math domain error\n"
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    done = dlvm("verify", str(empty))
    assert done.returncode == 1 and "defines no staged function" in done.stderr
    untyped = tmp_path / "untyped.py"
    untyped.write_text("from dlvm import nnkit as nn\nh = nn.lambda_(lambda x: x * 2.0)\n")
    done = dlvm("verify", str(untyped))
    assert done.returncode == 1 and "'h' declares no argument types" in done.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("from dlvm import nnkit as nn\n"
                   "h = nn.lambda_(lambda x, w: nn.dot(x, w), (nn.Float2D, nn.Float1D))\n")
    done = dlvm("verify", str(bad))
    assert done.returncode == 1
    assert done.stderr.startswith(f"dlvm: error: {bad}:2: error: 'dot': ")
    assert done.stderr.count("\n") == 1
