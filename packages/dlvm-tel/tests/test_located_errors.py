"""Errors the IR verifier or the run time found after code generation are located at the
TEL source: constants beyond their type, sizes beyond the IR's largest, a sequence shorter
than the first are checker diagnostics; what only the run time can know (a dynamic size)
fails at the instruction that came from the TEL expression, whose location it names."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.ir import Diagnostic, DiagnosticError

MAX = 2**63 - 1


def tel_text(*lines: str, dtype: str = "float32") -> str:
    """`module m` on line 1, `type …` on line 2, then `lines` from line 3."""
    return "\n".join(["module m", f"type {dtype}", *lines]) + "\n"


def errors(text: str) -> list[Diagnostic]:
    with pytest.raises(DiagnosticError) as e:
        tel.compile(text, "m.tel")
    return e.value.diagnostics


def where(d: Diagnostic) -> tuple[int, int]:
    assert d.location is not None and d.location.source is not None
    assert d.location.source.name == "m.tel"
    return d.location.line, d.location.column


@pytest.mark.parametrize(("dtype", "expression", "column", "problem"), [
    ("int8", "x + 128", 17, "the constant 128 is out of range: it does not fit in int8"),
    ("int8", "x - -129", 18, "the constant -129 is out of range"),
    ("int32", "x * 3000000000", 17, "it does not fit in int32 (-2147483648 … 2147483647)"),
    ("int64", f"x + {MAX + 1}", 17, "it does not fit in int64"),
    ("float16", "x * 65520.0", 17, "the constant 65520.0 is out of range: it is beyond the "
                                   "range of float16 (±65504)"),
    ("float32", "x + 1e39", 17, "beyond the range of float32"),
    ("float64", "x + 1e400", 17, "beyond the range of float64"),
    ("float32", f"x + {10**400}", 17, "beyond the range of float32"),
])
def test_a_constant_beyond_its_type_is_an_error_at_the_constant(
        dtype: str, expression: str, column: int, problem: str) -> None:
    [d] = errors(tel_text("x: in[3]", f"y: out[3] = {expression}", dtype=dtype))
    assert where(d) == (4, column) and problem in d.message


@pytest.mark.parametrize(("dtype", "declaration"), [
    ("int8", "k: param[3] = -128"),
    ("int32", "k: param[3] = random(-2147483648, 2147483647)"),
    ("float16", "k: param[3] = normal(65504.0)"),
    ("float16", "k: param[3] = 65519.0"),  # rounds to 65504, the largest half
])
def test_constants_at_the_edge_of_their_type_are_accepted(dtype: str, declaration: str
                                                          ) -> None:
    module = tel.compile(tel_text("x: in[3]", declaration, "y: out[3] = x * k - -1",
                                  dtype=dtype), "m.tel")
    ir.verify(module)


def test_an_initializer_beyond_its_type_is_an_error() -> None:
    found = errors(tel_text("x: in[3]", "k: param[3] = -200", "j: param[3] = random(0, 300)",
                            "y: out[3] = x * k * j", dtype="int8"))
    assert [(where(d), d.message.split(":")[0]) for d in found] == [
        ((4, 16), "the constant -200 is out of range"),
        ((5, 25), "the constant 300 is out of range")]


def test_the_most_negative_integer_is_generated_as_one_constant() -> None:
    module = tel.compile(tel_text("x: in[3]", "y: out[3] = x + -128", dtype="int8"), "m.tel")
    y = ir.compile(module, "interp")["inference"](np.array([0, 1, 127], np.int8))
    assert list(y) == [-128, -127, -1]


@pytest.mark.parametrize(("lines", "at", "problem"), [
    (["x: in[_ x 99999999999999999999]", "y: out[_ x 2] = x as [_ x 2]"], (3, 6),
     f"'x' cannot have the shape [_ x 99999999999999999999]: the dimension "
     f"99999999999999999999 is beyond the largest size ({MAX})"),
    (["x: in[2]", f"w: param[4 x {MAX}] = 0.0", "y: out[2] = x"], (4, 9),
     "'w' cannot have the shape [4 x 9223372036854775807]: a tensor of 36893488147419103228 "
     "elements is beyond the largest size"),
    (["x: in[4000000000 x 1]", "z: in[1 x 4000000000]", "y: out[_ x _] = x . z"], (5, 19),
     "the result has shape [4000000000 x 4000000000]: a tensor of 16000000000000000000 "
     "elements"),
    (["x: in[4000000000 x 1]", "z: in[4000000000]", "y: out[_ x _] = x + z"], (5, 19),
     "the result has shape [4000000000 x 4000000000]"),
    ([f"x: in[{MAX}]", "y: out[_] = [x, x] @0"], (4, 13),
     f"the result has shape [{2 * MAX}]: the dimension {2 * MAX} is beyond"),
    (["x: in[4]", "y: out[_ x _] = x as [4000000000 x 4000000000]"], (4, 19),
     "'as [4000000000 x 4000000000]': a tensor of 16000000000000000000 elements is beyond"),
])
def test_a_size_beyond_the_largest_is_an_error_where_it_is_written_or_computed(
        lines: list[str], at: tuple[int, int], problem: str) -> None:
    found = errors(tel_text(*lines))
    assert (at, problem) in [(where(d), d.message[:len(problem)]) for d in found], \
        [str(d) for d in found]


SEQUENCES = ("a: in[_ x {a} x 2]", "b: in[_ x {b} x 2]", "recurrent t {",
             "    h: hidden[_ x 2] = tanh(a[t] + b[t] + h[t-1])", "}", "y: out[_ x 2] = h")


def sequences(a: str, b: str) -> str:
    return tel_text(*(line.replace("{a}", a).replace("{b}", b) for line in SEQUENCES))


def test_a_sequence_shorter_than_the_first_is_an_error_at_its_read() -> None:
    [d] = errors(sequences("5", "3"))
    assert where(d) == (6, 36)
    assert d.message == ("'b' has 3 steps, but the block runs 5 (the length of 'a', the first "
                         "sequence it reads): every sequence it reads must be at least that "
                         "long")


@pytest.mark.parametrize(("a", "b"), [("3", "5"), ("4", "4"), ("_", "3"), ("5", "_")])
def test_longer_sequences_and_unknown_lengths_check(a: str, b: str) -> None:
    tel.compile(sequences(a, b), "m.tel")


@pytest.mark.parametrize("target", ["interp", "llvm-cpu"])
def test_a_run_time_error_names_the_tel_expression(target: str) -> None:
    """A short sequence of unknown length, a reshape the batch does not divide: the error
    of each names the line and column of the TEL read or expression."""
    module = tel.compile(sequences("_", "_"), "m.tel")
    exe = ir.compile(module, target)
    with pytest.raises(ir.ExecutionError, match=r"^m\.tel:6:36: 'extract': index 3"):
        exe["inference"](np.zeros((2, 5, 2), np.float32), np.zeros((2, 3, 2), np.float32))
    pairs = tel.compile(tel_text("x: in[_ x 2]", "y: out[_ x 4] = x as [_ x 4]"), "m.tel")
    with pytest.raises(ir.ExecutionError, match=r"^m\.tel:4:19: 'shapeCast'"):
        ir.compile(pairs, target)["inference"](np.zeros((3, 2), np.float32))


def test_every_instruction_of_a_model_has_a_tel_location() -> None:
    """Of the functions TEL writes from the model: inference, loss, the initializers."""
    text = tel_text("xs: in[_ x _ x 2]", "target: in[_ x 2]", "w: param[2 x 2] = normal(0.1)",
                    "recurrent t {", "    h: hidden[_ x 2] = tanh(xs[t] . w + h[t-1])", "}",
                    "y: out[_ x 2] = softmax(h)", "z: out[_ x 2] = h * 2",
                    "loss l = cross_entropy(y, target)")
    module = tel.compile(text, "m.tel")
    for name in ("inference", "loss", "init_params"):
        fn = module.function(name)
        assert fn is not None
        unlocated = [i.opcode for b in fn.blocks for i in b.instructions
                     if i.location is None]
        assert unlocated == [], (name, unlocated)
