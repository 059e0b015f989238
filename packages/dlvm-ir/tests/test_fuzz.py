"""Robustness of the parser, verifier and printer.

(a) Random bytes and random IR-ish token soup: `parse`, then `verify`, raise nothing but
    `DiagnosticError`.
(b) Pathological inputs (empty, garbage, truncated seeds, deep nesting, huge lines): each
    gives a `DiagnosticError` or a valid module, and returns.
(c) Random well-formed modules built with `ir.Builder`: they verify, and
    print → parse → print is exact.
Plus regression tests for the problems these found.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.core import AggregateLiteral, GlobalVariable, LiteralValue, ScalarLiteral
from dlvm.ir.derivatives import gradient_type
from dlvm.ir.types import (
    INVALID,
    AliasDecl,
    EnumDecl,
    NominalType,
    StructDecl,
    TensorType,
    TupleType,
    broadcast_shapes,
)

TESTS = Path(__file__).parent
ROOT = TESTS.parents[2]
SEEDS = sorted(
    {*TESTS.glob("data/*.dl"), *ROOT.glob("examples/**/*.dl")}, key=lambda p: p.name
)
SEED_TEXTS = [p.read_text(encoding="utf-8") for p in SEEDS]

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- the property


def check_diagnostics(error: ir.DiagnosticError) -> None:
    assert error.diagnostics, "a DiagnosticError with no diagnostics"
    for d in error.diagnostics:
        assert isinstance(d.message, str) and d.message
        str(d)
        d.render()
    error.render()
    str(error)


def roundtrip(module: ir.Module) -> str:
    """print → parse → print must be exact, and the reparsed module must verify."""
    text = ir.print_module(module)
    try:
        again = ir.parse(text, filename="printed.dl")
        ir.verify(again)
    except ir.DiagnosticError as e:
        pytest.fail(f"the printed module does not parse and verify:\n{e.render()}\n---\n{text}")
    assert ir.print_module(again) == text
    return text


def parse_and_verify(text: str | bytes) -> ir.Module | None:
    """The verified module, or None after a DiagnosticError; any other exception escapes."""
    try:
        module = ir.parse(text, filename="fuzz.dl")
        ir.verify(module)
    except ir.DiagnosticError as e:
        check_diagnostics(e)
        return None
    roundtrip(module)
    return module


# ---------------------------------------------------------------- (a) random input

TOKENS = [
    # sigils and names
    "@f", "@g", "@0", "@1", "%x", "%y", "%0.0", "%0.1", "%1.0", "%0^0", "%1^0", "'entry", "'b",
    "'0", "'1", "$T", "$S", "#w", "?c", "!inline", '"s"', '"unterminated', "%", "@", "'", "$",
    # numbers
    "0", "1", "2", "3", "-1", "1.5", "-2.0e3", "1.", "2x3", "inf", "-inf", "nan",
    # keywords
    "module", "stage", "raw", "optimizable", "func", "var", "type", "struct", "enum", "opaque",
    "extern", "gradient", "adjoint", "from", "wrt", "keeping", "seedable", "void", "stack",
    "box", "x", "_", "scalar", "zero", "undefined", "null", "true", "false",
    # data types
    "f32", "f64", "f16", "i32", "i8", "i1", "bool", "f12", "i0",
    # opcodes and their keywords
    "add", "multiply", "dot", "tanh", "not", "select", "by", "literal", "return", "branch",
    "conditional", "then", "else", "branchEnum", "case", "apply", "builtin", "extract",
    "insert", "to", "at", "reduce", "init", "along", "scan", "reduceWindow", "dims", "strides",
    "padding", "none", "concatenate", "transpose", "slice", "upto", "shapeCast", "padShape",
    "squeezeShape", "dataTypeCast", "random", "convolve", "kernel", "groups", "store", "load",
    "allocateStack", "count", "rank", "of",
    # punctuation and layout
    "(", ")", "<", ">", "[", "]", "{", "}", ",", ":", "=", "->", "*", "\n", "\n", "\n", "\n\n",
    "// comment\n", "\t", "~", "\\", ";",
]
SEPARATORS = st.sampled_from([" ", " ", " ", "", "\n"])
HEADER = "module \"m\"\nstage raw\n\nfunc @f: (f32, <2 x 3 x f32>) -> f32 {\n" \
         "'entry(%x: f32, %t: <2 x 3 x f32>):\n    "


@st.composite
def token_soup(draw: Any, max_size: int = 60) -> str:
    tokens = draw(st.lists(st.sampled_from(TOKENS), max_size=max_size))
    out = []
    for t in tokens:
        out.append(t)
        out.append(draw(SEPARATORS))
    return "".join(out)


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    parse_and_verify(data)


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text: str) -> None:
    parse_and_verify(text)


@FUZZ
@given(token_soup())
def test_token_soup(text: str) -> None:
    parse_and_verify(text)


@FUZZ
@given(token_soup(), st.booleans())
def test_token_soup_in_a_function_body(text: str, close: bool) -> None:
    parse_and_verify(HEADER + text + ("\n}\n" if close else ""))


@FUZZ
@given(st.sampled_from(SEED_TEXTS), st.integers(0, 10**6), st.integers(0, 12), token_soup(6))
def test_mutated_seed_files(seed: str, where: int, cut: int, insert: str) -> None:
    i = where % (len(seed) + 1)
    parse_and_verify(seed[:i] + insert + seed[i + cut:])


# ---------------------------------------------------------------- (b) pathological input


def test_seed_files_exist() -> None:
    assert SEEDS, "no seed .dl files found"


@pytest.mark.parametrize("text", [
    "", "\n", "\n" * 10_000, "   \t  ", "// only a comment", "// one\n// two\n\n// three\n",
    "module \"m\"", "module \"m\"\nstage raw\n", "\ufeff", "\x00", "\r\n\r\n", "\r", "}", "{",
    "]", ")", ">", "'", '"', "\\", "@", "%", "$", "#", "?", "!",
], ids=lambda s: repr(s[:24]))
def test_tiny_inputs(text: str) -> None:
    parse_and_verify(text)


def test_binary_garbage() -> None:
    rng = random.Random(20171109)
    for size in (1, 10, 100, 1000, 10_000):
        for _ in range(5):
            data = bytes(rng.randrange(256) for _ in range(size))
            parse_and_verify(data)
            parse_and_verify(data.decode("latin-1"))
    parse_and_verify(b"\xff\xfe\x00m\x00o\x00d")  # UTF-16 with a byte-order mark
    parse_and_verify(b"module \"\xc3\x28\"")  # invalid UTF-8 inside a string


@pytest.mark.parametrize("index", range(len(SEEDS)), ids=[p.name for p in SEEDS])
def test_truncated_seed_files(index: int) -> None:
    text = SEED_TEXTS[index]
    for end in range(0, len(text) + 1, 7):
        parse_and_verify(text[:end])


DEEP = 20_000
BODY = "module \"m\"\nstage raw\n\nfunc @f: (f32) -> f32 {\n'entry(%x: f32):\n"


NESTING_CONTEXTS = {
    "top-level": "@@",
    "function-type": "func @f: @@",
    "variable-type": "var @v: @@f32\n",
    "alias": "type $T = @@\n",
    "operand-type": BODY + "    %y = add %x: @@\n    return %x: f32\n}\n",
    "literal": BODY + "    %y = literal @@\n    return %x: f32\n}\n",
    "branch-arguments": BODY + "    branch 'b@@\n}\n",
}


@pytest.mark.parametrize("opener", ["<", "(", "[", "{", "*"])
@pytest.mark.parametrize("context", list(NESTING_CONTEXTS.values()), ids=list(NESTING_CONTEXTS))
def test_deep_nesting(opener: str, context: str) -> None:
    parse_and_verify(context.replace("@@", opener * DEEP))


def test_deep_nesting_closed() -> None:
    parse_and_verify("func @f: (" + "(" * DEEP + "f32" + ")" * DEEP + ") -> f32\n")
    parse_and_verify("var @v: " + "[1 x " * DEEP + "f32" + "]" * DEEP + "\n")
    parse_and_verify("var @v: " + "*" * DEEP + "f32\n")


def nested_tuple_literal(depth: int) -> str:
    """`%y = literal ((1: f32): (f32)): ((f32))`… and its return."""
    use, t = "1: f32", "f32"
    for _ in range(depth):
        t = f"({t})"
        use = f"({use}): {t}"
    return (f"func @f: () -> {t} {{\n'entry():\n    %y = literal {use}\n"
            f"    return %y: {t}\n}}\n")


@pytest.mark.parametrize("depth", [1, 10, 60, 150])
def test_nested_tuple_literal(depth: int) -> None:
    # Well within any reasonable nesting limit: a valid program.
    assert parse_and_verify(nested_tuple_literal(depth)) is not None


@pytest.mark.parametrize("depth", [1_000, 20_000])
def test_deeply_nested_tuple_literal(depth: int) -> None:
    # (The fully annotated form is quadratic in size; its opening is what matters.)
    parse_and_verify(BODY + "    %y = literal " + "(" * depth + "1: f32"
                     + "): (f32)" * depth + "\n    return %x: f32\n}\n")


LONG = 100_000


LONG_LINES = {
    "comment": "// " + "c" * LONG,
    "identifier": "a" * LONG,
    "bad-characters": "~" * LONG,
    "digits": "9" * LONG,
    "global-name": "@" + "f" * LONG,
    "unterminated-string": '"' + "s" * LONG,
    "string": '"' + "s" * LONG + '"',
    "parameter-list": "func @f: (" + "f32, " * (LONG // 5) + "f32) -> f32",
    "tensor-type": "var @v: <" + "1 x " * (LONG // 4) + "f32>",
    "trailing-spaces":
        BODY + "    %y = add %x: f32, %x: f32" + " " * LONG + "\n    return %y: f32\n}",
    "tensor-literal": BODY + "    %y = literal <" + ", ".join(["1: f32"] * (LONG // 8))
    + f">: <{LONG // 8} x f32>\n    return %x: f32\n}}",
    "stray-operands": BODY + "    return %x: f32 " + "%x " * (LONG // 3) + "\n}",
}


@pytest.mark.parametrize("line", list(LONG_LINES.values()), ids=list(LONG_LINES))
def test_very_long_line(line: str) -> None:
    parse_and_verify(line)


HUGE = "9" * 5000  # more digits than int() accepts by default (4300)
HUGE_INTEGERS = {
    "literal": BODY + f"    %y = literal {HUGE}: i32\n    return %x: f32\n}}\n",
    "negative-literal": BODY + f"    %y = literal -{HUGE}: f32\n    return %x: f32\n}}\n",
    "key": BODY + f"    %y = extract {HUGE} from %x: f32\n    return %x: f32\n}}\n",
    "dimension": f"var @v: <{HUGE} x f32>\n",
    "array-size": f"var @v: [{HUGE} x f32]\n",
    "wrt": f"func @f: (f32) -> f32\n[gradient @f wrt {HUGE}]\nfunc @g: (f32) -> (f32)\n",
    "positional-name": f"var @{HUGE}: f32\n",
}


@pytest.mark.parametrize("text", list(HUGE_INTEGERS.values()), ids=list(HUGE_INTEGERS))
def test_huge_integers_are_diagnosed(text: str) -> None:
    # Python refuses int() of more than 4300 digits (ValueError): the parser must not.
    parse_and_verify(text)


# ---------------------------------------------------------------- regressions found by fuzzing


VALID_LAYOUTS = {
    "crlf": "module \"m\"\r\nstage raw\r\n\r\nfunc @f: (f32) -> f32 {\r\n'entry(%x: f32):\r\n"
            "    return %x: f32\r\n}\r\n",
    "wrapped-operands":
        BODY + "    %y = add %x: f32,\n             %x: f32\n    return %y: f32\n}\n",
    "comment-in-brackets": "func @f: (f32, // the input\n         f32) -> f32\n",
    "struct-literal-in-wrapped-tuple":
        "module \"m\"\nstage raw\n\nstruct $S {\n    #a: f32\n}\n\n"
        "func @f: (f32) -> ($S, f32) {\n'entry(%x: f32):\n"
        "    %t = literal ({#a = %x: f32}: $S,\n                  %x: f32): ($S, f32)\n"
        "    return %t: ($S, f32)\n}\n",
    "box-type-in-wrapped-signature": "func @f: (box{f32},\n         f32) -> f32\n",
}


@pytest.mark.parametrize("text", list(VALID_LAYOUTS.values()), ids=list(VALID_LAYOUTS))
def test_valid_programs_with_unusual_layout(text: str) -> None:
    # Operand lists may wrap after ',' (reference §1.1), also after a '}' that closes a
    # struct literal or a box type inside the brackets.
    module = ir.parse(text, filename="layout.dl")
    ir.verify(module)
    roundtrip(module)


def built_roundtrip(build: Callable[[ir.Builder], None]) -> None:
    """A built module is either rejected by the verifier or round-trips exactly."""
    b = ir.Builder()
    build(b)
    try:
        ir.verify(b.module)
    except ir.DiagnosticError as e:
        check_diagnostics(e)
        return
    roundtrip(b.module)


V = TensorType((2, 3), ir.F32)
S = TensorType((), ir.F32)


def _identity(b: ir.Builder, t: ir.Type = V) -> Any:
    fn = b.function("f", [t], t, ["x"])
    return fn.entry.arguments[0]


def _empty_scan(b: ir.Builder) -> None:
    b.ret(b.scan(_identity(b), "add", []))


def _empty_reverse(b: ir.Builder) -> None:
    b.ret(b.reverse(_identity(b), []))


def _empty_reduce_dims(b: ir.Builder) -> None:
    b.ret(b.reduce(_identity(b), "add", 0.0, []))


def _scalar_reduce_window(b: ir.Builder) -> None:
    x = _identity(b, S)
    b.ret(b.reduceWindow(x, "add", 0.0, [], [], "none"))


def _branch_enum_without_cases(b: ir.Builder) -> None:
    b.module.add_type(EnumDecl("E", [("a", ())]))
    fn = b.function("f", [NominalType("E")], S, ["e"])
    b.branchEnum(fn.entry.arguments[0], [])


def _invalid_argument_type(b: ir.Builder) -> None:
    b.function("f", [INVALID], S, ["x"])
    b.ret(ir.constant(1.0, S))


@pytest.mark.parametrize("build", [
    _empty_scan, _empty_reverse, _empty_reduce_dims, _scalar_reduce_window,
    _branch_enum_without_cases, _invalid_argument_type,
], ids=lambda f: f.__name__.strip("_"))
def test_built_module_verifies_only_if_it_roundtrips(build: Callable[[ir.Builder], None]
                                                      ) -> None:
    built_roundtrip(build)


# ---------------------------------------------------------------- (c) random valid modules

BY_CATEGORY: dict[str, list[str]] = defaultdict(list)
for _name, _op in ir.OPS.items():
    BY_CATEGORY[_op.category].append(_name)

DTYPES = [ir.F32, ir.F32, ir.F64, ir.I32, ir.BOOL]
SHAPES = [(), (3,), (2, 3), (1, 3), (3, 1), (2, 1, 3)]
WIDER = {ir.F16: [ir.F16, ir.F32, ir.F64], ir.F32: [ir.F32, ir.F64], ir.F64: [ir.F64],
         ir.I32: [ir.I32, ir.I64], ir.I64: [ir.I64], ir.BOOL: [ir.BOOL]}
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)
NAMES = st.sampled_from(["{}", "v{}", "t_{}.x", "_{}"])


class ModuleGenerator:
    """Draws a random valid module through `ir.Builder`, instruction by instruction."""

    def __init__(self, data: Any) -> None:
        self.data = data
        self.b = ir.Builder()
        self.m = self.b.module
        self.counter = itertools.count()
        self.functions: list[ir.Function] = []
        self.pool: list[ir.Value] = []

    def draw(self, strategy: Any) -> Any:
        return self.data.draw(strategy)

    def choice(self, xs: Any) -> Any:
        return self.draw(st.sampled_from(list(xs)))

    def maybe_name(self) -> str | None:
        pattern = self.draw(NAMES)
        return None if pattern == "{}" else pattern.format(next(self.counter))

    def create(self, opcode: str, *args: Any, **fields: Any) -> Any:
        inst = self.b.create(opcode, *args, **fields)
        if not inst.type.is_void:  # naming a void instruction is an error
            inst.name = self.maybe_name()
            self.pool.append(inst)
        return inst

    # ------------------------------------------------------------ values

    def tensor_type(self, dtypes: list[ir.DataType] | None = None,
                    shapes: list[tuple[int, ...]] | None = None) -> TensorType:
        return TensorType(self.choice(shapes or SHAPES), self.choice(dtypes or DTYPES))

    def scalar_value(self, dtype: ir.DataType) -> bool | int | float:
        if dtype.is_bool:
            return self.draw(st.booleans())
        if dtype.is_int:
            return self.draw(st.integers(-(2 ** 31), 2 ** 31 - 1))
        return self.draw(FLOATS | st.sampled_from([0.0, 1.0, -2.5, 1e30]))

    def make(self, t: ir.Type) -> ir.Value:
        """A value of type t: from the pool, a scalar literal operand, or new instructions."""
        found = [v for v in self.pool if v.type == t]
        if found and self.draw(st.booleans()):
            return self.choice(found)
        if isinstance(t, TupleType):
            return self.create("literal", LiteralValue(
                AggregateLiteral("tuple", tuple(self.make(e) for e in t.elements)), t))
        assert isinstance(t, TensorType)
        if t.is_scalar and self.draw(st.booleans()):
            return ir.constant(self.scalar_value(t.dtype), t)
        if t.rank >= 1 and t.shape[0] <= 3 and self.draw(st.integers(0, 3)) == 0:
            sub = t.with_shape(t.shape[1:])
            elements = tuple(self.literal_element(sub) for _ in range(t.shape[0]))
            return self.create("literal", LiteralValue(AggregateLiteral("tensor", elements), t))
        return self.create("literal", LiteralValue(ScalarLiteral(self.scalar_value(t.dtype)), t))

    def literal_element(self, t: TensorType) -> ir.Value:
        if t.is_scalar:
            return ir.constant(self.scalar_value(t.dtype), t)
        found = [v for v in self.pool if v.type == t]
        if found and self.draw(st.booleans()):
            return self.choice(found)
        elements = tuple(self.literal_element(t.with_shape(t.shape[1:]))
                         for _ in range(t.shape[0]))
        return LiteralValue(AggregateLiteral("tensor", elements), t)

    def tensor(self, dtypes: list[ir.DataType] | None = None, min_rank: int = 0) -> ir.Value:
        ok = [v for v in self.pool if isinstance(v.type, TensorType)
              and (dtypes is None or v.type.dtype in dtypes) and v.type.rank >= min_rank
              and all(d >= 1 for d in v.type.shape)]  # (`shape of` a scalar is <0 x i64>)
        if ok and self.draw(st.integers(0, 3)) > 0:
            return self.choice(ok)
        shapes = [s for s in SHAPES if len(s) >= min_rank]
        return self.make(self.tensor_type(dtypes, shapes))

    def broadcast_partner(self, x: ir.Value) -> ir.Value | bool | int | float:
        t = x.type
        kind = self.draw(st.integers(0, 3))
        if kind == 0:
            return self.scalar_value(t.dtype)  # a Python number: a scalar literal
        if kind == 1:
            ok = [v for v in self.pool if isinstance(v.type, TensorType)
                  and v.type.dtype == t.dtype and broadcast_shapes(t.shape, v.type.shape)
                  is not None]
            if ok:
                return self.choice(ok)
        shape = tuple(d if self.draw(st.booleans()) else 1 for d in t.shape)
        return self.make(t.with_shape(self.choice([shape, t.shape, ()])))

    def subset(self, rank: int, nonempty: bool = True) -> list[int]:
        dims = self.draw(st.lists(st.integers(0, rank - 1), unique=True,
                                  min_size=1 if nonempty else 0, max_size=rank))
        return sorted(dims) if self.draw(st.booleans()) else dims

    # ------------------------------------------------------------ instructions by category

    def unary(self, opcode: str) -> None:
        domain = ir.OPS[opcode].extra["domain"]
        dtypes = {"float": [ir.F32, ir.F64], "numeric": [ir.F32, ir.I32],
                  "bool": [ir.BOOL]}[domain]
        self.create(opcode, self.tensor(dtypes))

    def binary(self, opcode: str) -> None:
        x = self.tensor([ir.F32, ir.F64, ir.I32])
        self.create(opcode, *self.ordered(x, self.broadcast_partner(x)))

    def boolean(self, opcode: str) -> None:
        x = self.tensor([ir.BOOL])
        self.create(opcode, *self.ordered(x, self.broadcast_partner(x)))

    def compare(self, opcode: str) -> None:
        x = self.tensor()
        self.create(opcode, *self.ordered(x, self.broadcast_partner(x)))

    def ordered(self, x: Any, y: Any) -> tuple[Any, Any]:
        return (x, y) if self.draw(st.booleans()) or not isinstance(y, ir.Value) else (y, x)

    def select(self, opcode: str) -> None:
        a = self.tensor()
        b = self.broadcast_partner(a)
        shape = a.type.shape
        mask = self.make(TensorType(self.choice([shape, ()]), ir.BOOL))
        self.create(opcode, a, b, mask)

    def cast(self, opcode: str) -> None:
        x = self.tensor([ir.F32, ir.F64, ir.I32, ir.BOOL])
        self.create(opcode, x, self.choice(WIDER[x.type.dtype]))

    def reduction(self, opcode: str) -> None:
        x = self.tensor(min_rank=0 if opcode == "reduce" else 1)
        t = x.type
        if t.dtype.is_bool:
            comb = self.choice(["and", "or"])
        else:
            comb = self.choice(["add", "multiply", "min", "max", ir.BuiltinRef("max"),
                                ir.BuiltinRef("min")])
        init = ir.constant(self.scalar_value(t.dtype), TensorType((), t.dtype))
        if opcode == "reduce":
            dims = None if t.rank == 0 or self.draw(st.booleans()) else self.subset(t.rank)
            self.create(opcode, x, comb, init, dims)
        elif opcode == "scan":
            self.create(opcode, x, comb, self.subset(t.rank))
        else:
            dims = [self.draw(st.integers(1, d)) for d in t.shape]
            strides = [self.draw(st.integers(1, 3)) for _ in t.shape]
            self.create(opcode, x, comb, init, dims, strides,
                        self.choice(["none", "half", "full"]))

    def linear_algebra(self, opcode: str) -> None:
        dt = self.choice([ir.F32, ir.F64, ir.I32])
        if opcode == "convolve":
            groups = self.choice([1, 2])
            cin, cout = 2 * groups, self.choice([2, 4])
            x = self.make(TensorType((1, cin, 5, 4), dt))
            k = self.make(TensorType((cout, cin // groups, 3, 2), dt))
            extra: dict[str, Any] = {}
            if self.draw(st.booleans()):
                extra["strides"] = [self.draw(st.integers(1, 2)) for _ in range(2)]
            if self.draw(st.booleans()):
                extra["padding"] = [(self.draw(st.integers(0, 1)), 1) for _ in range(2)]
            if self.draw(st.booleans()):
                extra["groups"] = groups
            elif groups != 1:
                return
            self.create(opcode, x, k, **extra)
            return
        m, k, n = (self.draw(st.integers(1, 3)) for _ in range(3))
        if self.draw(st.booleans()):
            self.create(opcode, self.make(TensorType((k,), dt)), self.make(TensorType((k,), dt)))
        else:
            batch = self.choice([(), (2,)])
            self.create(opcode, self.make(TensorType((*batch, m, k), dt)),
                        self.make(TensorType((*batch, k, n), dt)))

    def layout(self, opcode: str) -> None:
        if opcode == "transpose":
            self.create(opcode, self.tensor())
            return
        x = self.tensor(min_rank=1)
        t = x.type
        if opcode == "concatenate":
            axis = self.draw(st.integers(0, t.rank - 1))
            others = [self.make(t.with_shape(tuple(
                self.draw(st.integers(1, 3)) if i == axis else d for i, d in enumerate(t.shape))))
                for _ in range(self.draw(st.integers(0, 2)))]
            self.create(opcode, [x, *others], axis)
        elif opcode == "reverse":
            self.create(opcode, x, self.subset(t.rank))
        else:  # slice
            lo = self.draw(st.integers(0, t.shape[0] - 1))
            self.create(opcode, x, lo, self.draw(st.integers(lo, t.shape[0] - 1)))

    def shape_cast(self, opcode: str) -> None:
        x = self.tensor()
        t = x.type
        if opcode == "padShape":
            self.create(opcode, x, self.draw(st.integers(0, t.rank)))
        elif opcode == "squeezeShape":
            ones = [i for i, d in enumerate(t.shape) if d == 1]
            if ones:
                self.create(opcode, x, self.choice(ones))
        elif opcode == "shapeCast":
            shapes = [(t.count,), tuple(reversed(t.shape)), (1, t.count)]
            if t.count == 1:
                shapes.append(())
            self.create(opcode, x, self.choice(shapes))
        else:  # bitCast: reinterpret as a type of the same size in bits
            same = {ir.F32: [ir.F32, ir.I32], ir.I32: [ir.I32, ir.F32],
                    ir.F64: [ir.F64, ir.I64]}.get(t.dtype, [t.dtype])
            self.create(opcode, x, t.with_dtype(self.choice(same)))

    def aggregate(self, opcode: str) -> None:
        pair = self.m.type_decls.get("Pair")
        if opcode == "literal":
            kind = self.draw(st.integers(0, 2))
            if kind == 2 and isinstance(pair, StructDecl):
                fields = tuple(self.make(t) for _, t in pair.fields)
                self.create(opcode, LiteralValue(AggregateLiteral(
                    "struct", fields, tuple(k for k, _ in pair.fields)), NominalType("Pair")))
            else:
                self.make(self.tensor_type() if kind == 0 else TupleType(
                    (self.tensor_type(), self.tensor_type())))
            return
        structs = [v for v in self.pool if v.type == NominalType("Pair")]
        if opcode == "extract" and structs and isinstance(pair, StructDecl):
            key = self.choice([k for k, _ in pair.fields])
            self.create(opcode, ["#" + key], self.choice(structs))
            return
        tuples = [v for v in self.pool if isinstance(v.type, TupleType) and v.type.elements]
        tup = self.choice(tuples) if tuples and self.draw(st.booleans()) else self.make(
            TupleType((self.tensor_type(), self.tensor_type())))
        i = self.draw(st.integers(0, len(tup.type.elements) - 1))
        if opcode == "extract":
            if self.draw(st.booleans()):
                self.create(opcode, [i], tup)
            else:
                x = self.tensor(min_rank=1)
                self.create(opcode, [self.draw(st.integers(0, x.type.shape[0] - 1))], x)
        else:  # insert
            self.create(opcode, self.make(tup.type.elements[i]), tup, [i])

    def call(self, opcode: str) -> None:
        if opcode == "builtin":
            if self.draw(st.booleans()):
                x = self.tensor([ir.F32, ir.F64])
                self.create(opcode, "softmax", [x], x.type)
            else:
                x = self.tensor([ir.F32, ir.I32])
                y = self.make(x.type)
                name = self.choice(["min", "max"])
                self.create(opcode, name, [x, y], x.type)
            return
        if not self.functions:
            return
        fn = self.choice(self.functions)
        self.create(opcode, fn, [self.make(t) for t in fn.type_.arguments], fn.type_.result)

    def random_(self, opcode: str) -> None:
        dt = self.choice([ir.F32, ir.I32])
        lo = ir.constant(-1.0 if dt.is_float else -5, TensorType((), dt))
        hi = ir.constant(1.0 if dt.is_float else 5, TensorType((), dt))
        self.create(opcode, self.choice(SHAPES), lo, hi)

    def metadata(self, opcode: str) -> None:
        self.create(opcode, self.tensor())

    def memory(self, opcode: str) -> None:
        t = self.tensor_type()
        if self.m.globals and self.draw(st.booleans()):
            var = self.choice(self.m.globals)
            t, pointer = var.value_type, var
        else:
            pointer = self.create("allocateStack", t, self.draw(st.integers(1, 3)))
        if isinstance(t, TensorType) and t.rank >= 1 and self.draw(st.booleans()):
            pointer = self.create("elementPointer", pointer, [self.draw(
                st.integers(0, t.shape[0] - 1))])
            t = t.with_shape(t.shape[1:])
        self.create("store", self.make(t), pointer)
        self.create("load", pointer)

    def stack(self, opcode: str) -> None:
        s = self.create("createStack")
        t = self.tensor_type()
        self.create("push", self.make(t), s)
        self.create("pop", t, s)
        self.create("destroyStack", s)

    RECIPES: ClassVar[dict[str, Callable[[ModuleGenerator, str], None]]] = {
        "unary": unary, "binary": binary, "boolean": boolean, "compare": compare,
        "select": select, "cast": cast, "reduction": reduction,
        "linear algebra": linear_algebra, "layout": layout, "shape cast": shape_cast,
        "aggregate": aggregate, "call": call, "random": random_, "metadata": metadata,
        "memory": memory, "stack": stack,
    }
    # Categories whose recipe works for any opcode with these fields (a plugin may add more).
    GENERIC: ClassVar[dict[str, tuple[tuple[str, str], ...]]] = {
        "unary": (("x", "use"),), "binary": (("lhs", "use"), ("rhs", "use")),
        "boolean": (("lhs", "use"), ("rhs", "use")), "compare": (("lhs", "use"), ("rhs", "use")),
    }
    # The opcodes the other recipes know how to build (memory and stack build a sequence).
    KNOWN: ClassVar[dict[str, list[str]]] = {
        "select": ["select"],
        "cast": ["dataTypeCast"],
        "reduction": ["reduce", "scan", "reduceWindow"],
        "linear algebra": ["dot", "convolve"],
        "layout": ["concatenate", "transpose", "reverse", "slice"],
        "shape cast": ["padShape", "squeezeShape", "shapeCast", "bitCast"],
        "aggregate": ["literal", "extract", "insert"],
        "call": ["apply", "builtin"],
        "random": ["random"],
        "metadata": ["rank", "shape", "unitCount"],
        "memory": ["allocateStack"],
        "stack": ["createStack"],
    }

    @classmethod
    def usable(cls, category: str, opcode: str) -> bool:
        op = ir.OPS[opcode]
        if category in cls.GENERIC:
            return op.fields == cls.GENERIC[category] and (
                category != "unary" or op.extra.get("domain") in ("float", "numeric", "bool"))
        return opcode in cls.KNOWN.get(category, ())

    def instruction(self) -> None:
        choices = {c: [o for o in ops if self.usable(c, o)] for c, ops in BY_CATEGORY.items()
                   if c in self.RECIPES}
        category = self.choice(sorted(c for c, ops in choices.items() if ops))
        self.RECIPES[category](self, self.choice(choices[category]))

    # ------------------------------------------------------------ structure

    def condition(self) -> ir.Value:
        kind = self.draw(st.integers(0, 2))
        if kind == 0:
            return ir.constant(self.draw(st.booleans()), TensorType((), ir.BOOL))
        if kind == 1:
            return self.make(TensorType((), ir.BOOL))
        x = self.make(TensorType((), self.choice([ir.F32, ir.I32])))
        return self.create(self.choice(BY_CATEGORY["compare"]), x,
                           self.scalar_value(x.type.dtype))

    def target(self, blocks: list[ir.Block]) -> tuple[ir.Block, list[ir.Value]]:
        block = self.choice(blocks)
        return block, [self.make(a.type) for a in block.arguments]

    def function(self, index: int) -> None:
        params = [self.tensor_type() for _ in range(self.draw(st.integers(0, 3)))]
        result = self.choice([self.tensor_type(), self.tensor_type(),
                              TupleType((self.tensor_type(), self.tensor_type())), ir.VOID])
        name = self.choice([f"f{index}", None, f"layer.{index}"])
        arg_names = [self.maybe_name() for _ in params]
        attributes = ["inline"] if self.draw(st.integers(0, 4)) == 0 else []
        fn = self.b.function(name, params, result, arg_names,
                             block_name=self.choice(["entry", None, "start"]),
                             attributes=attributes)
        blocks = [fn.entry]
        for _ in range(self.draw(st.integers(0, 3))):
            types = [self.tensor_type() for _ in range(self.draw(st.integers(0, 2)))]
            blocks.append(self.b.block_in(fn, self.choice([None, f"b{next(self.counter)}"]),
                                          types, [self.maybe_name() for _ in types]))
        self.functions.append(fn)  # calls may recurse
        entry_values: list[ir.Value] = []
        for i, block in enumerate(blocks):
            self.b.position_at_end(block)
            self.pool = list(block.arguments) + entry_values
            for _ in range(self.draw(st.integers(0, 6))):
                self.instruction()
            if i == 0:
                entry_values = list(self.pool)  # the entry block dominates every block
            self.terminator(fn, blocks)

    def terminator(self, fn: ir.Function, blocks: list[ir.Block]) -> None:
        kind = self.draw(st.integers(0, 2))
        if kind == 0 or len(blocks) == 1:
            result = fn.type_.result
            if result.is_void:
                self.create("return")
            else:
                self.create("return", self.make(result))
        elif kind == 1:
            self.create("branch", self.target(blocks))
        else:
            cond = self.condition()
            self.create("conditional", cond, self.target(blocks), self.target(blocks))

    def module(self) -> ir.Module:
        self.m.name = self.choice(["main", "fuzz", "a b", 'q"uote\\', "tab\there"])
        self.m.stage = self.choice(["raw", "optimizable"])
        if self.draw(st.booleans()):
            self.m.add_type(StructDecl("Pair", [("w", self.tensor_type()),
                                                ("b", self.tensor_type())]))
            self.m.add_type(AliasDecl("Vec", TensorType((3,), ir.F32)))
            self.m.add_type(AliasDecl("Handle", None))
        for i in range(self.draw(st.integers(0, 2))):
            self.m.add_global(GlobalVariable(self.choice([f"g{i}", None]), self.tensor_type()))
        if self.draw(st.booleans()):
            t = self.tensor_type([ir.F32])
            self.functions.append(self.b.declare("external", ir.FunctionType((t, t), t)))
        for i in range(self.draw(st.integers(1, 3))):
            self.function(i)
        self.gradients()
        return self.m

    def gradients(self) -> None:
        """Gradient declarations of the right type for some differentiable functions (only a
        `raw` module may hold them)."""
        if self.m.stage != "raw":
            return
        for fn in list(self.functions):
            ft = fn.type_
            if not fn.blocks or not isinstance(ft.result, TensorType):
                continue
            if not ft.result.dtype.is_float or not self.draw(st.booleans()):
                continue
            wrt = [i for i, t in enumerate(ft.arguments)
                   if isinstance(t, TensorType) and t.dtype.is_float]
            decl = ir.DerivativeDecl("gradient", fn, wrt=tuple(wrt) if wrt else None,
                                     keeping=self.choice([(), (0,)]),
                                     seedable=self.draw(st.booleans()))
            try:
                gt = gradient_type(decl, ft, self.m)
            except ir.TypeRuleError:
                continue
            self.b.declare(f"{fn.name or 'anon'}_grad{next(self.counter)}", gt, decl)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(st.data())
def test_random_built_modules_verify_and_roundtrip(data: Any) -> None:
    module = ModuleGenerator(data).module()  # a TypeRuleError here is a bug
    try:
        ir.verify(module)
    except ir.DiagnosticError as e:
        pytest.fail(f"a well-formed built module does not verify:\n{e}\n---\n"
                    f"{ir.print_module(module)}")
    text = roundtrip(module)
    assert "<<error>>" not in text
