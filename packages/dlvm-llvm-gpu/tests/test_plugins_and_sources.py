"""What the GPU target shares with `llvm-cpu` beyond its kernels: a plugin's scalar rule puts
its instruction in the kernels, errors name the user's file, and a missing dlvm-opt is said
once. All on the host emulation, which runs the GPU's launch plans and kernels on any
machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir as ll

import dlvm.ir as ir
import dlvm.llvm.plugin
import dlvm.llvm_gpu.plugin
from dlvm.ir.instructions.common import float_tensor, result_array
from dlvm.ir.plugin import PluginInfo, PluginWarning, make_registry, set_registry
from dlvm.llvm import LOWER, SCALAR, ScalarEmitter, scalar_rule
from dlvm.llvm.codegen import optimize
from dlvm.llvm_gpu.target import NVPTXExecutable

CUBE = """
func @f: (<5 x f32>) -> <5 x f32> {
'entry(%x: <5 x f32>):
    %y = cube %x: <5 x f32>
    %z = multiply %y: <5 x f32>, 2: f32
    return %z: <5 x f32>
}
"""
ROW = """\
module "memory"
stage raw

func @row: (<3 x 2 x f32>, i64) -> <2 x f32> {
'entry(%m: <3 x 2 x f32>, %i: i64):
    %r = extract %i: i64 from %m: <3 x 2 x f32>
    return %r: <2 x f32>
}
"""
X = np.array([-1.5, -0.25, 0.0, 0.5, 2.0], np.float32)


def emulated(module: ir.Module, **options: object) -> NVPTXExecutable:
    exe = ir.compile(module, "nvptx", device="host", **options)
    assert isinstance(exe, NVPTXExecutable)
    return exe


@pytest.fixture
def cube() -> Iterator[None]:
    """`cube`, x³ element-wise, defined for one test without a lowering rule."""
    ir.define("cube", "$x", lambda inst, m: float_tensor(inst.x, m),
              traits=("pure", "elementwise"),
              evaluate=lambda inst, f: result_array(inst, f.get(inst.x) * f.get(inst.x)
                                                    * f.get(inst.x)),
              summary="x³ (a test instruction)")
    try:
        yield
    finally:
        ir.OPS.pop("cube", None)
        SCALAR.pop("cube", None)
        LOWER.pop("cube", None)


def cube_element(e: ScalarEmitter, inst: ir.Instruction, args: list[ll.Value]) -> ll.Value:
    """x·x·x, multiplied in the interpreter's order"""
    (x,) = args
    return e.b.fmul(e.b.fmul(x, x), x)


@pytest.mark.usefixtures("cube")
def test_an_instruction_without_a_scalar_rule_runs_on_the_host() -> None:
    exe = emulated(ir.parse(CUBE))
    np.testing.assert_array_equal(exe["f"](X), 2 * (X * X * X))  # the same roundings
    assert exe.plan.host_opcodes == {"cube": 1}


@pytest.mark.usefixtures("cube")
def test_a_scalar_rule_puts_the_instruction_in_the_kernels() -> None:
    scalar_rule("cube")(cube_element)
    for passes in ("O3", ""):  # fused with the multiply, and a kernel of its own
        exe = emulated(ir.parse(CUBE), passes=passes)
        np.testing.assert_array_equal(exe["f"](X), 2 * (X * X * X))  # the same roundings
        assert exe.plan.host_opcodes == {}


def test_a_run_time_error_names_the_users_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.dl"
    path.write_text(ROW)
    exe = emulated(ir.parse_file(str(path)))
    with pytest.raises(ir.ExecutionError) as caught:
        exe["row"](np.zeros((3, 2), np.float32), np.int64(5))
    assert str(caught.value) == f"{path}:6:10: 'extract': index 5 out of bounds for size 3"


def test_without_dlvm_opt_the_default_pipeline_is_skipped_with_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(dlvm.llvm.plugin, PluginInfo("llvm", "dlvm-llvm", "0.1.0"))
    reg.add_plugin(dlvm.llvm_gpu.plugin, PluginInfo("llvm-gpu", "dlvm-llvm-gpu", "0.1.0"))
    set_registry(reg)
    monkeypatch.setattr(optimize, "_warned", set())
    try:
        with pytest.warns(PluginWarning, match=r"^target 'nvptx' runs unoptimized code "
                          r"\(element-wise code is not fused into kernels\): its passes 'O3' "
                          "come from dlvm-opt, which is not installed; pip install dlvm-opt$"):
            exe = emulated(ir.parse(ROW))
        np.testing.assert_array_equal(exe["row"](np.eye(3, 2, dtype=np.float32), np.int64(1)),
                                      [0, 1])
    finally:
        set_registry(None)
