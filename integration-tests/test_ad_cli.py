"""`dlvm exec FILE -f df` differentiates on the way: gradients from the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

LOOP = Path(__file__).parent / "lit" / "ad" / "loop-tape.dl"


def dlvm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True, check=False)


def test_exec_of_a_gradient_through_a_loop(tmp_path: Path) -> None:
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    x, n = 0.7, 3
    np.savez(inputs, arg0=np.float64(x), arg1=np.int64(n))
    done = dlvm("exec", str(LOOP), "-f", "dp", "--args", str(inputs), "-o", str(outputs))
    assert done.returncode == 0, done.stderr
    got = np.load(outputs)["out0"]
    h = 1e-6
    plus = dlvm("exec", str(LOOP), "-f", "p", "--args", str(_save(tmp_path, x + h, n)))
    minus = dlvm("exec", str(LOOP), "-f", "p", "--args", str(_save(tmp_path, x - h, n)))
    numeric = (_value(plus.stdout) - _value(minus.stdout)) / (2 * h)
    np.testing.assert_allclose(got, numeric, rtol=1e-5)


def _save(tmp_path: Path, x: float, n: int) -> Path:
    path = tmp_path / f"at-{x}.npz"
    np.savez(path, arg0=np.float64(x), arg1=np.int64(n))
    return path


def _value(stdout: str) -> float:
    return float(stdout.strip().split()[-1])


def test_a_function_that_cannot_be_differentiated_is_a_one_line_error(tmp_path: Path) -> None:
    source = tmp_path / "digamma.dl"
    source.write_text("""
func @f: (f64) -> f64 {
'entry(%x: f64):
    %y = digamma %x: f64
    return %y: f64
}
[gradient @f]
func @df: (f64) -> (f64)
""")
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=np.float64(1.5))
    done = dlvm("exec", str(source), "-f", "df", "--args", str(inputs))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "'digamma' cannot be differentiated" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
