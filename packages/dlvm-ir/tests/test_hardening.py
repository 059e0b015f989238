"""Bad programs and bad arguments end in clear errors: the verifier rejects infinite types,
oversized dimensions and circular derivative declarations; calls convert arguments only
without loss; a call that runs away or runs out of memory stops with an error naming where."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.runtime import ExecutionError, convert_argument
from dlvm.ir.testing import COUNTED_LOOP
from dlvm.ir.types import BOOL, F32, F64, I1, I8, I32, MAX_SIZE, TensorType
from dlvm.ir.verifier import verify_diagnostics

# the loop alone: its gradient declaration would need dlvm-ad's differentiation pass
LOOP = COUNTED_LOOP.partition("[gradient")[0]

BODY = """
func @f: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
"""


def diagnostics(text: str) -> list[str]:
    return verify_diagnostics(ir.parse(text, "t.dl"))


# ---------------------------------------------------------------- infinite and huge types


def test_an_alias_cycle_through_a_tuple_is_an_error_not_a_recursion() -> None:
    errors = diagnostics("type $A = $B\ntype $B = ($A, f32)\n" + BODY)
    assert errors == [
        "type alias '$A' refers to itself ($A → $B → $A); a recursive type needs a struct "
        "or an enum",
        "type alias '$B' refers to itself ($A → $B → $A); a recursive type needs a struct "
        "or an enum"]


@pytest.mark.parametrize("target", ["*$A", "[2 x $A]", "($A) -> f32", "box{$A}"])
def test_an_alias_may_not_appear_anywhere_in_its_own_expansion(target: str) -> None:
    assert diagnostics(f"type $A = {target}\n" + BODY) == [
        "type alias '$A' refers to itself ($A → $A); a recursive type needs a struct or an enum"]


def test_a_struct_containing_itself_by_value_is_an_error() -> None:
    text = "struct $S {\n    #x: f32\n    #s: ($S, f32)\n}\n" + BODY
    assert diagnostics(text) == [
        "struct '$S' contains itself by value ($S → $S); hold it through a pointer or a box"]


def test_structs_containing_each_other_by_value_through_an_alias_are_an_error() -> None:
    text = ("struct $S {\n    #t: $U\n}\ntype $U = [2 x $T]\n"
            "struct $T {\n    #s: $S\n}\n" + BODY)
    errors = diagnostics(text)
    assert len(errors) == 2 and all("contains itself by value ($S → $T → $S)" in e
                                    for e in errors)


def test_recursion_through_pointers_boxes_and_enums_is_fine() -> None:
    text = ("struct $List {\n    #head: f32\n    #tail: *$List\n}\n"
            "struct $Node {\n    #next: box{$Node}\n}\n"
            "enum $Tree {\n    ?leaf(f32)\n    ?node($Tree, $Tree)\n}\n"
            "struct $Holder {\n    #tree: $Tree\n}\n" + BODY)
    assert diagnostics(text) == []


def test_dimensions_beyond_int64_are_an_error_at_the_signature() -> None:
    big = MAX_SIZE + 1
    with pytest.raises(ir.DiagnosticError) as e:
        ir.verify(ir.parse(f"func @f: (<{big} x f32>) -> f32 {{\n'entry(%x: <{big} x f32>):\n"
                           "    %y = literal 1.0: f32\n    return %y: f32\n}\n", "t.dl"))
    d = e.value.diagnostics[0]
    assert "a dimension 9223372036854775808 beyond the largest size" in d.message
    assert (d.location.line, d.location.column) == (1, 1)


def test_an_element_count_beyond_int64_is_an_error_in_an_instruction() -> None:
    text = ("func @f: (f32) -> f32 {\n'entry(%x: f32):\n"
            "    %r = random 4294967296 x 4294967296 from 0.0: f32 upto 1.0: f32\n"
            "    return %x: f32\n}\n")
    errors = diagnostics(text)
    assert errors == ["the result type of 'random' contains a tensor of 18446744073709551616 "
                      "elements, beyond the largest size (9223372036854775807)"]


# ---------------------------------------------------------------- derivative declarations


def test_an_optimizable_module_cannot_hold_gradient_declarations() -> None:
    text = ("stage optimizable\n" + BODY + "[gradient @f]\nfunc @df: (f32) -> (f32)\n")
    assert diagnostics(text) == [
        "'@df' is a gradient declaration, which a module at stage 'optimizable' cannot hold "
        "(only 'raw' modules do; the differentiation pass turns them into functions)"]


def test_a_self_gradient_and_a_mutual_cycle_are_rejected() -> None:
    text = ("[gradient @g]\nfunc @g: (f32) -> (f32)\n"
            "[gradient @h]\nfunc @k: (f32) -> (f32)\n"
            "[gradient @k]\nfunc @h: (f32) -> (f32)\n")
    assert diagnostics(text) == [
        "gradient declaration '@g' depends on itself (@g → @g)",
        "gradient declaration '@k' depends on itself (@k → @h → @k)",
        "gradient declaration '@h' depends on itself (@k → @h → @k)"]


def test_a_gradient_of_a_gradient_is_not_a_cycle() -> None:
    text = ("func @f: (f64) -> f64 {\n'entry(%x: f64):\n    %y = sin %x: f64\n"
            "    return %y: f64\n}\n[gradient @f]\nfunc @df: (f64) -> (f64)\n"
            "[gradient @df from 0]\nfunc @ddf: (f64) -> (f64)\n")
    assert diagnostics(text) == []


def test_a_redefined_block_is_named_with_one_quote() -> None:
    m = ir.parse("func @f: (f32) -> f32 {\n'entry(%x: f32):\n    branch 'e()\n'e():\n"
                 "    return %x: f32\n}\n", "t.dl")
    m.functions[0].blocks[0].name = "e"
    assert "redefinition of block 'e" in verify_diagnostics(m)


# ---------------------------------------------------------------- argument conversion


def tensor(dtype: ir.DataType, *shape: int | None) -> TensorType:
    return TensorType(tuple(shape), dtype)


@pytest.mark.parametrize(("value", "dtype", "message"), [
    (1.7, I8, "converting float64 to i8 could lose values"),
    (300, I8, "the value 300 does not fit in i8"),
    (1, I1, "the value 1 does not fit in i1"),
    (1e300, F32, "the value 1e+300 overflows f32"),
    (math.nan, BOOL, "converting float64 to bool could lose values"),
    (1 + 2j, F32, "cannot pass an array of complex numbers as f32"),
    ("x", F32, "cannot pass an array of strings as f32"),
    (np.uint64(2**63), I32, "the value 9223372036854775808 does not fit in i32"),
])
def test_lossy_argument_conversions_are_refused_naming_the_argument(
        value: object, dtype: ir.DataType, message: str) -> None:
    with pytest.raises(ExecutionError, match="^argument 2: " + re.escape(message)):
        convert_argument(value, tensor(dtype), "argument 2")


@pytest.mark.parametrize(("value", "dtype", "expected"), [
    (np.array([1.5, -2.0]), F32, np.array([1.5, -2.0], np.float32)),
    (np.array([1, 2], np.int64), F64, np.array([1.0, 2.0])),
    (np.array([True, False]), I32, np.array([1, 0], np.int32)),
    (np.array([-1, 0]), I1, np.array([-1, 0], np.int8)),
    (np.array([np.inf, np.nan]), F32, np.array([np.inf, np.nan], np.float32)),
    ([1, 2], I8, np.array([1, 2], np.int8)),
])
def test_safe_argument_conversions_are_made(value: object, dtype: ir.DataType,
                                            expected: np.ndarray) -> None:
    out = convert_argument(value, tensor(dtype, None), "x")
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_the_interpreter_refuses_a_lossy_argument() -> None:
    exe = ir.compile(ir.parse(BODY), "interp")
    with pytest.raises(ExecutionError, match="argument 0: the value 1e\\+300 overflows f32"):
        exe.call("f", 1e300)


# ---------------------------------------------------------------- the Python API


def test_a_function_of_an_executable_returns_its_result_unwrapped() -> None:
    exe = ir.compile(ir.parse(BODY + """
func @pair: (f32) -> (f32, f32) {
'entry(%x: f32):
    %t = literal (%x: f32, %x: f32): (f32, f32)
    return %t: (f32, f32)
}
"""), "interp")
    assert exe["f"](np.float32(2)) == 2
    assert isinstance(exe["@f"](2), np.ndarray)
    first, second = exe.function("pair")(3)
    assert (first, second) == (3, 3)
    with pytest.raises(ExecutionError, match="no function '@g' to call \\(available: @f, "
                                             "@pair\\)"):
        exe["g"]


# ---------------------------------------------------------------- limits


def test_a_step_limit_stops_a_runaway_loop() -> None:
    m = ir.parse(LOOP, "loop.dl")
    fn = m.function("p")
    assert fn is not None
    exe = ir.compile(m, "interp", max_steps=1000)
    assert exe["p"](0.5, 10) == pytest.approx(ir.compile(m, "interp")["p"](0.5, 10))
    with pytest.raises(ExecutionError, match="'@p' exceeded the limit of 1000 steps"):
        exe["p"](0.5, 10**9)


def test_a_timeout_stops_a_runaway_loop() -> None:
    exe = ir.compile(ir.parse(LOOP, "loop.dl"), "interp", timeout=0.05)
    with pytest.raises(ExecutionError, match=re.escape("'@p' exceeded the timeout of 0.05 s")):
        exe["p"](0.5, 10**12)
    assert exe["p"](0.5, 3) == pytest.approx(ir.compile(
        ir.parse(LOOP), "interp")["p"](0.5, 3))  # the budget is per call


@pytest.mark.parametrize(("options", "message"), [
    ({"seed": -1}, "target option 'seed' must be at least 0, found -1"),
    ({"seed": "abc"}, "target option 'seed' must be an integer, found 'abc'"),
    ({"seed": True}, "target option 'seed' must be an integer, found True"),
    ({"max_steps": 0}, "target option 'max_steps' must be at least 1, found 0"),
    ({"timeout": math.nan}, "target option 'timeout' must be a number, found nan"),
    ({"timeout": -1}, "target option 'timeout' must be at least 0, found -1"),
    ({"timeout": math.inf}, "target option 'timeout' must be a finite number, found inf"),
    ({"timeout": 1e12}, "target option 'timeout' must be at most 1000000000, found "
                        "1000000000000.0"),
    ({"seed": 2**64}, f"target option 'seed' must be at most {2**63 - 1}, found {2**64}"),
])
def test_bad_interpreter_options_are_one_line_errors(options: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(ir.DlvmError, match="^" + message.replace("(", "\\(") + "$"):
        ir.compile(ir.parse(BODY), "interp", **options)


def test_running_out_of_memory_names_the_instruction_and_its_place() -> None:
    text = ("func @f: (f32) -> f32 {\n'entry(%x: f32):\n"
            "    %r = random 1000000000 x 1000000000 from 0.0: f32 upto 1.0: f32\n"
            "    return %x: f32\n}\n")
    exe = ir.compile(ir.parse(text, "oom.dl"), "interp")
    with pytest.raises(ExecutionError, match=r"^oom\.dl:3:10: 'random': out of memory \(Unable to allocate"):
        exe["f"](1.0)
