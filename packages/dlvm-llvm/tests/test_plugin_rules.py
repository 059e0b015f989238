"""A plugin's instruction runs as native code once it brings a lowering rule
(`dlvm.llvm.scalar_rule`, `dlvm.llvm.lowering_rule`); without one, native code calls back
into Python for it, and emitted assembly or object files say so."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llvmlite import ir as ll
from typer.testing import CliRunner

import dlvm.ir as ir
from dlvm.cli.main import make_app
from dlvm.ir.instructions.common import float_tensor, result_array
from dlvm.ir.plugin import PluginWarning
from dlvm.llvm import LOWER, SCALAR, FunctionLowering, ScalarEmitter, lowering_rule, scalar_rule
from dlvm.llvm.codegen.emit import alloca, for_range, gep, i64
from dlvm.llvm.codegen.layout import I64, element_type
from dlvm.llvm.runtime.executable import LLVMExecutable

CUBE = """
func @f: (<5 x f32>) -> <5 x f32> {
'entry(%x: <5 x f32>):
    %y = cube %x: <5 x f32>
    %z = tanh %y: <5 x f32>
    %w = add %z: <5 x f32>, %x: <5 x f32>
    return %w: <5 x f32>
}
"""
COUNT = """
func @count: (<2 x 3 x f64>) -> i64 {
'entry(%x: <2 x 3 x f64>):
    %n = countNonzero %x: <2 x 3 x f64>
    return %n: i64
}
"""
X = np.array([-1.5, -0.25, 0.0, 0.5, 2.0], np.float32)


def cube_element(e: ScalarEmitter, inst: ir.Instruction, args: list[ll.Value]) -> ll.Value:
    """x·x·x, multiplied in the interpreter's order"""
    (x,) = args
    return e.b.fmul(e.b.fmul(x, x), x)


def count_type(inst: ir.Instruction, module: ir.Module | None) -> ir.Type:
    float_tensor(inst.x, module)
    return ir.TensorType((), ir.I64)


def lower_count_nonzero(fl: FunctionLowering, inst: ir.Instruction) -> ll.Value:
    """n = Σᵢ [xᵢ ≠ 0] (NaN is not zero)"""
    b = fl.b
    x = fl.tensor(inst.x)
    element = element_type(x.type.dtype)
    n = alloca(b, I64)
    b.store(i64(0), n)
    with for_range(b, i64(0), x.count()) as i:
        xi = b.load(gep(b, element, x.data, i), typ=element)
        nonzero = b.zext(b.fcmp_unordered("!=", xi, ll.Constant(element, 0.0)), I64)
        b.store(b.add(b.load(n, typ=I64), nonzero), n)
    return b.load(n, typ=I64)


@pytest.fixture
def instructions() -> Iterator[None]:
    """`cube` (element-wise) and `countNonzero` (not), defined for one test, without
    lowering rules."""
    ir.define("cube", "$x", lambda inst, m: float_tensor(inst.x, m),
              traits=("pure", "elementwise"),
              evaluate=lambda inst, f: result_array(inst, f.get(inst.x) * f.get(inst.x)
                                                    * f.get(inst.x)),
              summary="x³ (a test instruction)")
    ir.define("countNonzero", "$x", count_type, traits=("pure",),
              evaluate=lambda inst, f: np.int64(np.count_nonzero(f.get(inst.x))),
              summary="how many elements are not zero (a test instruction)")
    try:
        yield
    finally:
        for op in ("cube", "countNonzero"):
            ir.OPS.pop(op, None)
            SCALAR.pop(op, None)
            LOWER.pop(op, None)


@contextlib.contextmanager
def warnings_recorded() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def reference(text: str, name: str, *args: np.ndarray) -> Any:
    return ir.compile(ir.parse(text), target="interp")[name](*args)


def native(text: str, **options: Any) -> LLVMExecutable:
    exe = ir.compile(ir.parse(text), target="llvm-cpu", **options)
    assert isinstance(exe, LLVMExecutable)
    return exe


@pytest.mark.usefixtures("instructions")
def test_without_a_rule_native_code_calls_back_and_still_agrees() -> None:
    exe = native(CUBE)
    got = exe["f"](X)
    assert [inst.opcode for inst in exe.fallbacks] == ["cube"]
    np.testing.assert_allclose(got, reference(CUBE, "f", X), rtol=1e-6)  # tanh: 2 ulp


@pytest.mark.usefixtures("instructions")
def test_a_scalar_rule_fuses_the_instruction_into_a_native_kernel() -> None:
    scalar_rule("cube")(cube_element)
    for passes in ("O3", ""):  # fused with its neighbours, and as a kernel of its own
        exe = native(CUBE, passes=passes)
        got = exe["f"](X)
        assert exe.fallbacks == []
        np.testing.assert_allclose(got, reference(CUBE, "f", X), rtol=1e-6)  # tanh: 2 ulp
    fused = native(CUBE).module
    kernels = [fn for fn in fused.functions if "kernel" in fn.attributes]
    assert [inst.opcode for fn in kernels for inst in fn.blocks[0].instructions] == [
        "cube", "tanh", "add", "return"]


@pytest.mark.usefixtures("instructions")
def test_code_cached_before_a_rule_existed_is_not_served_after() -> None:
    first = native(CUBE)
    first["f"](X)
    assert first.fallbacks
    scalar_rule("cube")(cube_element)
    second = native(CUBE)
    second["f"](X)
    assert second.fallbacks == []


@pytest.mark.usefixtures("instructions")
def test_a_lowering_rule_makes_any_instruction_native() -> None:
    lowering_rule("countNonzero")(lower_count_nonzero)
    x = np.array([[0, 1, -2], [0, np.nan, 3]], np.float64)
    exe = native(COUNT)
    assert exe["count"](x) == reference(COUNT, "count", x) == 4
    assert exe.fallbacks == []


@pytest.mark.usefixtures("instructions")
@pytest.mark.parametrize("what, kind", [("obj", "object file"), ("asm", "assembly")])
def test_emitting_code_that_calls_back_warns_naming_the_instruction(what: str,
                                                                    kind: str) -> None:
    target = ir.registry().make_target("llvm-cpu")
    with warnings_recorded() as caught:
        target.emit(ir.parse(CUBE), what)
    assert [(w.category, str(w.message)) for w in caught] == [(PluginWarning, (
        f"target 'llvm-cpu': the {kind} calls back into Python for 'cube', which has no "
        "lowering rule, through the symbol 'dlvm_evaluate', undefined outside a DLVM process "
        "(a plugin gives its instruction native code with dlvm.llvm.scalar_rule or "
        "lowering_rule)"))]


@pytest.mark.usefixtures("instructions")
def test_emitted_code_of_instructions_with_rules_needs_no_callback() -> None:
    scalar_rule("cube")(cube_element)
    lowering_rule("countNonzero")(lower_count_nonzero)
    target = ir.registry().make_target("llvm-cpu")
    with warnings_recorded() as caught:
        for text in (CUBE, COUNT):
            assert "dlvm_evaluate" not in target.emit(ir.parse(text), "llvm")
            target.emit(ir.parse(text), "obj")
    assert caught == []


@pytest.mark.usefixtures("instructions")
def test_llvm_ir_that_calls_back_is_written_without_a_warning() -> None:
    """LLVM IR is for reading (and declares `dlvm_evaluate` for whoever compiles it on)."""
    target = ir.registry().make_target("llvm-cpu")
    with warnings_recorded() as caught:
        text = target.emit(ir.parse(CUBE), "llvm")
    assert "dlvm_evaluate" in text
    assert caught == []


@pytest.mark.usefixtures("instructions")
def test_rules_that_cannot_be_registered_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="a scalar rule for 'tanh': DLVM's own rule cannot be "
                       "replaced"):
        scalar_rule("tanh")
    with pytest.raises(ValueError, match="a lowering rule for 'dot': DLVM's own rule cannot be "
                       "replaced"):
        lowering_rule("dot")
    with pytest.raises(ValueError, match="a scalar rule for 'countNonzero': the instruction is "
                       r"not element-wise \(give it a lowering_rule instead\)"):
        scalar_rule("countNonzero")
    with pytest.raises(ValueError, match="a scalar rule needs the opcodes it lowers"):
        scalar_rule()


@pytest.mark.usefixtures("instructions")
def test_a_plugin_rule_may_be_registered_again() -> None:
    scalar_rule("cube")(cube_element)
    scalar_rule("cube")(cube_element)  # a module imported twice
    assert SCALAR["cube"] is cube_element


@pytest.mark.usefixtures("instructions")
def test_dlvm_compile_shows_the_callback_warning(tmp_path: Path) -> None:
    source = tmp_path / "cube.dl"
    source.write_text(CUBE)
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:  # newer click keeps stderr apart by itself
        runner = CliRunner()
    result = runner.invoke(make_app(), ["compile", str(source), "--target", "llvm-cpu",
                                        "--emit", "asm"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("dlvm: warning: target 'llvm-cpu': the assembly calls back "
                                    "into Python for 'cube', which has no lowering rule")
    assert "dlvm_evaluate" in result.stdout


def test_emitting_code_that_draws_random_numbers_needs_no_callback() -> None:
    """`random` is native code (the counter-based stream every target shares): an object
    file that draws random numbers calls nothing that exists only inside a DLVM process."""
    text = """
func @noise: () -> <3 x f32> {
'entry():
    %r = random 3 from 0.0: f32 upto 1.0: f32
    return %r: <3 x f32>
}
"""
    with warnings_recorded() as caught:
        llvm_text = ir.registry().make_target("llvm-cpu").emit(ir.parse(text), "llvm")
        ir.registry().make_target("llvm-cpu").emit(ir.parse(text), "obj")
    assert caught == []
    assert isinstance(llvm_text, str)
    assert "dlvm_evaluate" not in llvm_text and "atomicrmw add" in llvm_text
