"""Without dlvm-opt, `llvm-cpu` cannot run its default pipeline `O3`: the code runs
unoptimized, and one warning per process says so and how to fix it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.llvm.plugin
from dlvm.ir.plugin import PluginInfo, PluginWarning, make_registry, set_registry
from dlvm.llvm.codegen import optimize

SOURCE = """\
func @f: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %a = tanh %x: <4 x f32>
    %b = multiply %a: <4 x f32>, 2: f32
    return %b: <4 x f32>
}
"""
WARNING = ("target 'llvm-cpu' runs unoptimized code (element-wise code is not fused into "
           "kernels): its passes 'O3' come from dlvm-opt, which is not installed; "
           "pip install dlvm-opt")


@pytest.fixture
def without_dlvm_opt(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A registry with dlvm-ir's and dlvm-llvm's plugins only, in a process that has not
    warned yet."""
    reg = make_registry(autoload=False)
    reg.add_plugin(dlvm.llvm.plugin, PluginInfo("llvm", "dlvm-llvm", "0.1.0"))
    set_registry(reg)
    monkeypatch.setattr(optimize, "_warned", set())
    try:
        yield
    finally:
        set_registry(None)


@pytest.mark.usefixtures("without_dlvm_opt")
def test_the_default_pipeline_is_skipped_with_one_warning_per_process() -> None:
    module = ir.parse(SOURCE)
    with pytest.warns(PluginWarning) as caught:
        exe = ir.compile(module, target="llvm-cpu")
    assert [str(w.message) for w in caught] == [WARNING]
    assert not any("kernel" in fn.attributes for fn in exe.module.functions)  # not fused
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    np.testing.assert_allclose(exe["f"](x), 2 * np.tanh(x), rtol=1e-6)  # tanh: 2 ulp
    with warnings_recorded() as again:
        ir.compile(module, target="llvm-cpu")
        ir.registry().make_target("llvm-cpu").emit(module, "llvm")
    assert again == []


@pytest.mark.usefixtures("without_dlvm_opt")
def test_no_pipeline_asks_for_nothing_and_warns_of_nothing() -> None:
    with warnings_recorded() as caught:
        ir.compile(ir.parse(SOURCE), target="llvm-cpu", passes="")
    assert caught == []


@pytest.mark.usefixtures("without_dlvm_opt")
def test_a_pass_nobody_provides_is_an_error_not_a_warning() -> None:
    with pytest.raises(ir.DlvmError, match="unknown pass 'frobnicate'"):
        ir.compile(ir.parse(SOURCE), target="llvm-cpu", passes="frobnicate")


@pytest.mark.usefixtures("without_dlvm_opt")
def test_an_unknown_pass_beside_a_missing_package_is_an_error() -> None:
    with pytest.raises(ir.DlvmError, match="unknown pass 'frobnicate'"):
        ir.compile(ir.parse(SOURCE), target="llvm-cpu", passes="O3,frobnicate")


@pytest.mark.parametrize("target", ["llvm-cpu", "nvptx{device=host}"])
@pytest.mark.parametrize("passes", ["O3,frobnicate", "frobnicate,O3", "cse,frobnicate"])
def test_an_unknown_pass_in_a_pipeline_is_an_error_naming_it(target: str, passes: str) -> None:
    """Never the pipeline skipped without a word: every LLVM target refuses it."""
    from dlvm.ir.testing import target_and_options

    name, options = target_and_options(target)
    if not ir.registry().has("target", name):
        pytest.skip(f"target '{name}' is not installed")
    with pytest.raises(ir.DlvmError, match="unknown pass 'frobnicate'"):
        ir.compile(ir.parse(SOURCE), target=name, passes=passes, **options)


def test_the_cli_shows_the_warning_once(tmp_path: Path) -> None:
    source = tmp_path / "f.dl"
    source.write_text(SOURCE)
    args = tmp_path / "args.npz"
    np.savez(args, arg0=np.zeros(4, np.float32))
    env = {**os.environ, "DLVM_DISABLE_PLUGINS": "opt"}
    for command in (["exec", str(source), "-f", "f", "--args", str(args)],
                    ["compile", str(source), "--emit", "asm"]):
        out = subprocess.run([sys.executable, "-m", "dlvm.cli", *command, "--target",
                              "llvm-cpu"], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stderr == f"dlvm: warning: {WARNING}\n"


@contextlib.contextmanager
def warnings_recorded() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised inside, shown or not."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
