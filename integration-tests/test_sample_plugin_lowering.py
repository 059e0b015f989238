"""The example plugin's instruction `softsign` brings a scalar rule for dlvm-llvm
(examples/plugin/src/dlvm_sample_plugin/lowering.py): on `llvm-cpu` it is native code,
fused with its neighbours, and on `nvptx` it runs in the kernels — no call back into
Python, and an object file that links anywhere."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugin"
SOFTSIGN = EXAMPLE / "softsign.dl"
X = np.array([-3.0, -0.5, 0.0, 0.25, 4.0], np.float32)


def installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not installed("dlvm_sample_plugin"),
                       reason="dlvm-sample-plugin (examples/plugin) is not installed"),
    pytest.mark.skipif(not installed("dlvm.llvm"), reason="dlvm-llvm is not installed"),
]


def softsign_on(target: str, **options: object) -> tuple[ir.Executable, ir.Executable]:
    """The example compiled for `target`, and for the interpreter (the oracle)."""
    module = ir.parse_file(str(SOFTSIGN))
    return ir.compile(module, target=target, **options), ir.compile(module, target="interp")


@pytest.mark.parametrize("passes", ["O3", ""])
def test_softsign_is_native_code_on_llvm_cpu_and_agrees_with_interp(passes: str) -> None:
    exe, oracle = softsign_on("llvm-cpu", passes=passes)
    x = np.resize(X, 3)
    # the same operations in the same order: within an ulp (vectorized division may differ)
    np.testing.assert_allclose(exe["f"](x), oracle["f"](x), rtol=2e-7)
    (grad,) = exe["df"](x)
    np.testing.assert_allclose(grad, oracle["df"](x)[0], rtol=2e-7)
    assert exe.fallbacks == []  # type: ignore[attr-defined]


def test_softsign_runs_in_the_gpu_kernels() -> None:
    pytest.importorskip("dlvm.llvm_gpu", reason="dlvm-llvm-gpu is not installed")
    exe, oracle = softsign_on("nvptx", device="host")
    x = np.resize(X, 3)
    np.testing.assert_allclose(exe["f"](x), oracle["f"](x), rtol=2e-7)  # as on llvm-cpu
    assert "softsign" not in exe.plan.host_opcodes  # type: ignore[attr-defined]
    ptx = ir.registry().make_target("nvptx").emit(ir.parse_file(str(SOFTSIGN)), "ptx")
    assert "abs.f32" in ptx and "div.rn.f32" in ptx  # x / (1 + |x|), in PTX


def test_the_emitted_code_needs_no_python(tmp_path: Path) -> None:
    target = ir.registry().make_target("llvm-cpu")
    assert "dlvm_evaluate" not in target.emit(ir.parse_file(str(SOFTSIGN)), "llvm")
    out = subprocess.run([sys.executable, "-m", "dlvm.cli", "compile", str(SOFTSIGN),
                          "--target", "llvm-cpu", "--emit", "obj", "-o",
                          str(tmp_path / "softsign.o")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # no warning: nothing calls back into Python
    assert (tmp_path / "softsign.o").stat().st_size > 0
