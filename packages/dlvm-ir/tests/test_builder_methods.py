"""`Builder`'s typed instruction methods are generated from the `OpDef` table and kept
current: editors and type checkers see every built-in instruction's operands."""

from __future__ import annotations

import inspect

import pytest

import dlvm.ir as ir
from dlvm.ir import builder_gen, builder_methods
from dlvm.ir.opdef import OPS
from dlvm.ir.types import F32, TensorType


def builtin_ops() -> dict[str, ir.OpDef]:
    return {name: op for name, op in OPS.items()
            if op.evaluate is not None and op.evaluate.__module__.startswith("dlvm.ir.")}


def test_the_generated_methods_are_current() -> None:
    saved, builtins = dict(OPS), builtin_ops()
    try:  # render from the built-in table only, whatever plugins defined meanwhile
        OPS.clear()
        OPS.update(builtins)
        expected = builder_gen.render()
    finally:
        OPS.clear()
        OPS.update(saved)
    actual = inspect.getsource(builder_methods)
    assert actual == expected, "run `python -m dlvm.ir.builder_gen` to regenerate it"


def test_every_builtin_instruction_has_a_typed_method() -> None:
    for op in builtin_ops().values():
        method = getattr(builder_methods.InstructionMethods, builder_gen.method_name(op))
        assert f"`{op.syntax.strip()}`" in (method.__doc__ or "")


def test_the_typed_methods_build_what_create_builds() -> None:
    b = ir.Builder()
    f32 = TensorType((2,), F32)
    fn = b.function("f", [f32, f32], TensorType((), F32), ["x", "y"])
    x, y = fn.entry.arguments
    s = b.add(x, y, name="s")
    t = b.literal_(ir.constant(1.0, TensorType((), F32)))
    pair = b.tuple([s, t])
    first = b.extract(pair, [0])
    total = b.reduce(first, "add", 0.0, name="total")
    b.ret(total)
    ir.verify(b.module)
    assert ir.print_function(fn).splitlines()[2:] == [
        "    %s = add %x: <2 x f32>, %y: <2 x f32>",
        "    %0.1 = literal 1.0: f32",
        "    %0.2 = literal (%s: <2 x f32>, %0.1: f32): (<2 x f32>, f32)",
        "    %0.3 = extract 0 from %0.2: (<2 x f32>, f32)",
        "    %total = reduce %0.3: <2 x f32> by add init 0.0: f32",
        "    return %total: f32",
        "}"]


def test_the_package_docstring_starts_with_an_example_that_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    example = ir.__doc__.split("\n\n")[1]
    assert len(example.splitlines()) <= 12
    exec(inspect.cleandoc(example), {})
    assert capsys.readouterr().out == "3.0\n"


def test_the_curated_names_exist() -> None:
    assert all(hasattr(ir, name) for name in ir.__all__)
    assert len(ir.__all__) < 50
