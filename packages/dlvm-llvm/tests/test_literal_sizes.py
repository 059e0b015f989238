"""A tensor literal has the sizes of what it holds, whatever `_` its type leaves.

A tensor literal's type may leave sizes to its elements (`docs/ir-reference.md`: "any
number if it is `_`"): constant folding leaves `<1: <1 x f32>, 2: <1 x f32>>: <_ x 1 x f32>`
of a `shapeCast` of a constant to `_ x 1`, since a folded literal keeps the type of the
value it replaces. An element-wise loop nest that reads such a literal must take its sizes
from the element count and the elements (from the tensor built at run time where they are
values), never from the `_`s of its type: on `llvm-cpu`, with and without the pipeline and
at any LLVM `opt_level`, each function computes what the interpreter computes, and fails
where it fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import check_same

F32, I32 = np.float32, np.int32


def ones(*shape: int, dtype: Any = F32) -> np.ndarray:
    return np.arange(1, 1 + int(np.prod(shape)), dtype=dtype).reshape(shape)


@dataclass(frozen=True)
class Case:
    name: str
    signature: str  # "(<2 x 1 x f32>) -> <2 x 1 x f32>": arguments are %a0, %a1, …
    body: str  # lines; `;` separates them; the last value is %r
    args: tuple[Any, ...]


ROW = "<1.0: f32, 2.0: f32>: <2 x f32>"
MATRIX = ("<<1.0: f32, 2.0: f32, 3.0: f32>: <3 x f32>, "
          "<4.0: f32, 5.0: f32, 6.0: f32>: <3 x f32>>: <2 x 3 x f32>")

CASES = [
    # ---- a shapeCast of a constant to a shape with `_`: a literal of that type after folding
    Case("column", "(<2 x 1 x f32>) -> <2 x 1 x f32>",
         f"%c = literal {ROW}; %s = shapeCast %c: <2 x f32> to _ x 1; "
         "%r = add %a0: <2 x 1 x f32>, %s: <_ x 1 x f32>", (ones(2, 1),)),
    Case("column_of_ints", "(<2 x 4 x i32>) -> <2 x 4 x i32>",
         "%c = literal <1: i32, 2: i32>: <2 x i32>; %s = shapeCast %c: <2 x i32> to _ x 1; "
         "%r = add %a0: <2 x 4 x i32>, %s: <_ x 1 x i32>", (ones(2, 4, dtype=I32),)),
    Case("matrix_last_unknown", "(<3 x 2 x f32>) -> <3 x 2 x f32>",
         f"%c = literal {MATRIX}; %s = shapeCast %c: <2 x 3 x f32> to 3 x _; "
         "%r = multiply %a0: <3 x 2 x f32>, %s: <3 x _ x f32>", (ones(3, 2),)),
    Case("matrix_unknown_one_broadcast", "(<4 x 3 x 2 x f32>) -> <4 x 3 x 2 x f32>",
         f"%c = literal {MATRIX}; %s = shapeCast %c: <2 x 3 x f32> to _ x 3 x 2; "
         "%r = subtract %a0: <4 x 3 x 2 x f32>, %s: <_ x 3 x 2 x f32>", (ones(4, 3, 2),)),
    Case("matrix_middle_unknown", "(<3 x 2 x 5 x f32>) -> <3 x 2 x 5 x f32>",
         f"%c = literal {MATRIX}; %s = shapeCast %c: <2 x 3 x f32> to 3 x _ x 1; "
         "%r = multiply %a0: <3 x 2 x 5 x f32>, %s: <3 x _ x 1 x f32>", (ones(3, 2, 5),)),
    Case("flattened_then_reduced", "(<3 x 2 x f32>) -> <2 x f32>",
         f"%c = literal {MATRIX}; %s = shapeCast %c: <2 x 3 x f32> to _ x 2; "
         "%m = multiply %s: <_ x 2 x f32>, %a0: <3 x 2 x f32>; "
         "%r = reduce %m: <3 x 2 x f32> by add init 0.0: f32 along 0", (ones(3, 2),)),
    Case("summed_whole", "(<3 x 2 x f32>) -> f32",
         f"%c = literal {MATRIX}; %s = shapeCast %c: <2 x 3 x f32> to _ x 2; "
         "%m = multiply %s: <_ x 2 x f32>, %a0: <3 x 2 x f32>; "
         "%r = reduce %m: <3 x 2 x f32> by max init -inf: f32", (ones(3, 2),)),
    # ---- literals written with such types
    Case("folded_form", "(<2 x 1 x f32>) -> <2 x 1 x f32>",
         "%r = add %a0: <2 x 1 x f32>, <1.0: <1 x f32>, 2.0: <1 x f32>>: <_ x 1 x f32>",
         (ones(2, 1),)),
    Case("unary_of_literal", "() -> <_ x f32>",
         "%r = negate <1.0: f32, 2.0: f32, 3.0: f32>: <_ x f32>", ()),
    Case("reduce_of_literal", "() -> f32",
         "%r = reduce <1.0: f32, 2.0: f32, 3.0: f32>: <_ x f32> by add init 0.0: f32", ()),
    Case("rows_left_unknown", "(<2 x 2 x f32>) -> <2 x 2 x f32>",
         "%r = multiply %a0: <2 x 2 x f32>, <<1.0: f32, 2.0: f32>: <_ x f32>, "
         "<3.0: f32, 4.0: f32>: <_ x f32>>: <_ x _ x f32>", (ones(2, 2),)),
    Case("rows_of_values", "(<2 x 1 x f32>, <_ x f32>, <_ x f32>) -> <2 x _ x f32>",
         "%r = add %a0: <2 x 1 x f32>, <%a1: <_ x f32>, %a2: <_ x f32>>: <2 x _ x f32>",
         (ones(2, 1), ones(3), ones(3))),
    # ---- and where the interpreter stops
    Case("rows_of_values_differ", "(<2 x 1 x f32>, <_ x f32>, <_ x f32>) -> <2 x _ x f32>",
         "%r = add %a0: <2 x 1 x f32>, <%a1: <_ x f32>, %a2: <_ x f32>>: <2 x _ x f32>",
         (ones(2, 1), ones(3), ones(4))),
    Case("column_does_not_broadcast", "(<3 x 1 x f32>) -> <3 x 1 x f32>",
         f"%c = literal {ROW}; %s = shapeCast %c: <2 x f32> to _ x 1; "
         "%r = add %a0: <3 x 1 x f32>, %s: <_ x 1 x f32>", (ones(3, 1),)),
    Case("splat_of_dynamic_type", "(<2 x 1 x f32>) -> <2 x 1 x f32>",
         "%r = add %a0: <2 x 1 x f32>, 1.0: <_ x 1 x f32>", (ones(2, 1),)),
    Case("zero_of_dynamic_type", "(<2 x 1 x f32>) -> <2 x 1 x f32>",
         "%r = add %a0: <2 x 1 x f32>, zero: <_ x 1 x f32>", (ones(2, 1),)),
]


def function(case: Case) -> str:
    """`case` as a function: arguments %a0, %a1, … (tensor types: no commas inside)."""
    inside, result = case.signature[1:].split(") -> ")
    params = ", ".join(f"%a{k}: {t}" for k, t in enumerate(inside.split(", ")) if t)
    lines = "\n".join(f"    {line.strip()}" for line in case.body.split(";"))
    return (f"func @{case.name}: {case.signature} {{\n'entry({params}):\n{lines}\n"
            f"    return %r: {result}\n}}\n")


SOURCE = "\n".join(function(c) for c in CASES)


@pytest.fixture(scope="module")
def module() -> ir.Module:
    m = ir.parse(SOURCE, "literals.dl")
    ir.verify(m)
    return m


@pytest.fixture(scope="module")
def oracle(module: ir.Module) -> ir.Executable:
    return ir.compile(module, "interp")


@pytest.fixture(scope="module", params=[("", 0), ("", 3), ("O3", 0), ("O3", 3)],
                ids=lambda p: f"passes={p[0] or 'none'}-O{p[1]}")
def native(request: pytest.FixtureRequest, module: ir.Module) -> ir.Executable:
    passes, opt_level = request.param
    return ir.compile(module, "llvm-cpu", passes=passes, opt_level=opt_level, cache=False)


def test_every_case_has_its_own_name() -> None:
    assert len({c.name for c in CASES}) == len(CASES)


def test_the_pipeline_folds_each_shape_cast_of_a_constant(module: ir.Module) -> None:
    """What the cases stand on: after `O3` no `shapeCast` is left, so the functions read
    folded literals whose types have the `_` of the cast."""
    prepared = ir.registry().make_target("llvm-cpu").prepare(module)  # type: ignore[attr-defined]
    assert "shapeCast" not in ir.print_module(prepared)
    assert "<1.0: <1 x f32>, 2.0: <1 x f32>>: <_ x 1 x f32>" in ir.print_module(prepared)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_llvm_cpu_agrees_with_the_interpreter(case: Case, native: ir.Executable,
                                              oracle: ir.Executable) -> None:
    fn = oracle.module.function(case.name)
    assert fn is not None
    check_same(fn, list(case.args), native, oracle, same_place=True)
