"""Adjoint and tangent rules of the element-wise instructions, against finite differences."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ad import DifferentiationError
from dlvm.ad.rules import ADJOINTS, NONDIFFERENTIABLE, TANGENTS, elementwise
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.instructions.elementwise import NUMERIC_BINARY, UNARY
from dlvm.ir.testing import compile_for_test

Shape = tuple[int, ...]
Sampler = Callable[[np.random.Generator, Shape], np.ndarray]


def ty(shape: Shape, dtype: str = "f64") -> str:
    """DLVM's spelling of a tensor type: `f64`, `<3 x 4 x f64>`."""
    return f"<{' x '.join(map(str, shape))} x {dtype}>" if shape else dtype


def module(params: Sequence[tuple[str, str]], lines: Sequence[str], out: str, out_type: str,
           wrt: Sequence[int], mode: str) -> str:
    """`@f(params) { lines; return out }` and a gradient (`@df`) or tangent (`@tf`) of it."""
    types = [t for _, t in params]
    args = ", ".join(f"%{n}: {t}" for n, t in params)
    body = "\n".join(f"    {line}" for line in lines)
    indices = ", ".join(map(str, wrt))
    if mode == "gradient":
        decl = (f"[gradient @f wrt {indices} seedable]\n"
                f"func @df: ({', '.join([*types, out_type])}) -> "
                f"({', '.join(types[i] for i in wrt)})")
    else:
        decl = (f"[tangent @f wrt {indices}]\n"
                f"func @tf: ({', '.join([*types, *(types[i] for i in wrt)])}) -> ({out_type})")
    return (f"func @f: ({', '.join(types)}) -> {out_type} {{\n'entry({args}):\n{body}\n"
            f"    return %{out}: {out_type}\n}}\n\n{decl}\n")


def check(text: str, args: Sequence[np.ndarray], wrt: Sequence[int], mode: str,
          rng: np.random.Generator) -> None:
    if mode == "gradient":
        check_gradient(text, "f", "df", args)
    else:
        tangents = [rng.standard_normal(np.shape(args[i])) for i in wrt]
        check_tangent(text, "f", "tf", args, tangents)


def uniform(lo: float, hi: float) -> Sampler:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def off_grid(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Away from the integers and the halves, where the rounding functions jump."""
    frac = rng.uniform(0.1, 0.4, shape) + rng.integers(0, 2, shape) * 0.5
    return rng.integers(-3, 3, shape) + frac


def nonzero(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    return rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


MODES = ["gradient", "tangent"]

UNARY_DOMAINS: dict[str, Sampler] = {
    "negate": uniform(-2, 2), "square": uniform(-2, 2), "sqrt": uniform(0.3, 3),
    "rsqrt": uniform(0.3, 3), "exp": uniform(-2, 2), "log": uniform(0.3, 3),
    "sin": uniform(-3, 3), "cos": uniform(-3, 3), "tan": uniform(-1.2, 1.2),
    "asin": uniform(-0.9, 0.9), "acos": uniform(-0.9, 0.9), "atan": uniform(-3, 3),
    "sinh": uniform(-2, 2), "cosh": uniform(-2, 2), "tanh": uniform(-2, 2),
    "lgamma": uniform(0.3, 5), "erf": uniform(-2, 2), "erfc": uniform(-2, 2),
    "sign": nonzero, "round": off_grid, "rint": off_grid, "ceil": off_grid, "floor": off_grid,
}


def test_every_differentiable_elementwise_op_has_both_rules() -> None:
    ops = {op for op, (_, domain, _) in UNARY.items() if domain not in ("bool", "integer")}
    ops |= set(NUMERIC_BINARY) | {"select", "dataTypeCast"}
    for op in ops - NONDIFFERENTIABLE:
        assert op in ADJOINTS and op in TANGENTS, op
    assert set(UNARY_DOMAINS) == set(elementwise.UNARY_SCALES) | set(elementwise.ZERO_DERIVATIVE)


# ------------------------------------------------------------------ unary


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(), (3, 4)], ids=["scalar", "matrix"])
@pytest.mark.parametrize("op", sorted(UNARY_DOMAINS))
def test_unary(op: str, shape: Shape, mode: str) -> None:
    rng = np.random.default_rng(zlib.crc32(repr((op, shape)).encode()))
    t = ty(shape)
    text = module([("x", t)], [f"%r = {op} %x: {t}"], "r", t, [0], mode)
    check(text, [UNARY_DOMAINS[op](rng, shape)], [0], mode, rng)


@pytest.mark.parametrize("op", sorted(UNARY_DOMAINS))
def test_unary_f32_matches_f64(op: str) -> None:
    """The rules' literals take the operand's data type: f32 code agrees with f64 code."""
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    x, seed = UNARY_DOMAINS[op](rng, (6,)), rng.standard_normal(6)
    results = []
    for dtype in ("f32", "f64"):
        t = ty((6,), dtype)
        exe = compile_for_test(ir.parse(module([("x", t)], [f"%r = {op} %x: {t}"], "r", t,
                                               [0], "gradient")))
        np_dtype = np.float32 if dtype == "f32" else np.float64
        (dx,) = exe.call("df", x.astype(np_dtype), seed.astype(np_dtype))
        assert dx.dtype == np_dtype
        results.append(dx)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["sign", "floor"])
def test_zero_derivative_is_zero(op: str) -> None:
    text = module([("x", "<3 x f64>")], [f"%r = {op} %x: <3 x f64>"], "r", "<3 x f64>", [0],
                  "gradient")
    (dx,) = check_gradient(text, "f", "df", [np.array([-1.3, 0.7, 2.2])])
    np.testing.assert_array_equal(dx, 0.0)  # a zero derivative is exactly zero


@pytest.mark.parametrize("mode", MODES)
def test_digamma_is_not_differentiable(mode: str) -> None:
    text = module([("x", "f64")], ["%r = digamma %x: f64"], "r", "f64", [0], mode)
    with pytest.raises((ir.PassError, DifferentiationError), match="trigamma"):
        compile_for_test(ir.parse(text))


# ------------------------------------------------------------------ binary

BINARY_DOMAINS: dict[str, tuple[Sampler, Sampler]] = {
    "add": (uniform(-2, 2), uniform(-2, 2)),
    "subtract": (uniform(-2, 2), uniform(-2, 2)),
    "multiply": (uniform(-2, 2), uniform(-2, 2)),
    "divide": (uniform(-2, 2), nonzero),
    "power": (uniform(0.3, 2.5), uniform(-2, 2)),
    "min": (uniform(-2, 2), uniform(-2, 2)),
    "max": (uniform(-2, 2), uniform(-2, 2)),
    "modulo": (uniform(-3, 3), nonzero),
}
SHAPES: list[tuple[Shape, Shape]] = [((3, 4), (3, 4)), ((), (3, 4)), ((3, 4), ()),
                                      ((4, 1), (1, 5)), ((), ())]


def separated(x: np.ndarray, y: np.ndarray) -> bool:
    """No element within finite-difference reach of a kink: of min/max where x = y, of
    modulo where x/y is an integer."""
    q = np.divide(x, y)
    return bool(np.all(np.abs(np.subtract(x, y)) > 1e-3)
                and np.all(np.abs(q - np.round(q)) > 1e-3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("op", sorted(BINARY_DOMAINS))
def test_binary(op: str, shapes: tuple[Shape, Shape], mode: str) -> None:
    rng = np.random.default_rng(zlib.crc32(repr((op, shapes)).encode()))
    (sx, sy), (gx, gy) = shapes, BINARY_DOMAINS[op]
    x, y = gx(rng, sx), gy(rng, sy)
    while not separated(x, y):
        x, y = gx(rng, sx), gy(rng, sy)
    tx, t_y, tr = ty(sx), ty(sy), ty(np.broadcast_shapes(sx, sy))
    text = module([("x", tx), ("y", t_y)], [f"%r = {op} %x: {tx}, %y: {t_y}"], "r", tr, [0, 1],
                  mode)
    check(text, [x, y], [0, 1], mode, rng)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", sorted(BINARY_DOMAINS))
def test_binary_dynamic_shapes(op: str, mode: str) -> None:
    """`<_ x 1>` with `<1 x _>`: the broadcast is known only at run time."""
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    (gx, gy) = BINARY_DOMAINS[op]
    x, y = gx(rng, (4, 1)), gy(rng, (1, 5))
    while not separated(x, y):
        x, y = gx(rng, (4, 1)), gy(rng, (1, 5))
    tx, t_y, tr = "<_ x 1 x f64>", "<1 x _ x f64>", "<_ x _ x f64>"
    text = module([("x", tx), ("y", t_y)], [f"%r = {op} %x: {tx}, %y: {t_y}"], "r", tr, [0, 1],
                  mode)
    check(text, [x, y], [0, 1], mode, rng)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("op", "lhs", "rhs"), [
    ("power", "%x", "3.0"), ("power", "%x", "2"), ("power", "2.0", "%x"),
    ("divide", "1.0", "%x"), ("divide", "%x", "4.0"), ("subtract", "1.5", "%x"),
    ("multiply", "%x", "-3.0"), ("max", "%x", "0.0"), ("min", "0.5", "%x"),
])
def test_binary_with_literal(op: str, lhs: str, rhs: str, mode: str) -> None:
    """A literal operand gets no adjoint (no NaN from `log` of a negative base, either)."""
    rng = np.random.default_rng(7)
    t = "<5 x f64>"
    line = (f"%r = {op} {lhs}: {t}, {rhs}: f64" if lhs == "%x"
            else f"%r = {op} {lhs}: f64, {rhs}: {t}")
    text = module([("x", t)], [line], "r", t, [0], mode)
    x = np.array([-1.7, -0.6, 0.3, 0.9, 1.4])
    check(text, [x], [0], mode, rng)


@pytest.mark.parametrize(("op", "expected"), [("max", (1.0, 0.0)), ("min", (1.0, 0.0))])
def test_min_max_ties_go_to_the_left_operand(op: str, expected: tuple[float, float]) -> None:
    text = module([("x", "f64"), ("y", "f64")], [f"%r = {op} %x: f64, %y: f64"], "r", "f64",
                  [0, 1], "gradient")
    exe = compile_for_test(ir.parse(text))
    dx, dy = exe.call("df", np.float64(1.5), np.float64(1.5), np.float64(1.0))
    assert (float(dx), float(dy)) == expected  # the seed routed to one side, not computed


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["max", "min", "multiply", "divide", "power", "subtract"])
def test_binary_same_operand_twice(op: str, mode: str) -> None:
    rng = np.random.default_rng(3)
    t = "<4 x f64>"
    text = module([("x", t)], [f"%r = {op} %x: {t}, %x: {t}"], "r", t, [0], mode)
    check(text, [rng.uniform(0.5, 2.0, 4)], [0], mode, rng)


# ------------------------------------------------------------------ select and casts


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sx", "sy", "sm"), [
    ((4, 5), (4, 5), (4, 5)), ((4, 1), (), (4, 5)), ((), (1, 5), (4, 1)), ((), (), ()),
])
def test_select(sx: Shape, sy: Shape, sm: Shape, mode: str) -> None:
    rng = np.random.default_rng(11)
    tr = ty(np.broadcast_shapes(sx, sy, sm))
    params = [("x", ty(sx)), ("y", ty(sy)), ("m", ty(sm, "bool"))]
    text = module(params, [f"%r = select %x: {ty(sx)}, %y: {ty(sy)} by %m: {ty(sm, 'bool')}"],
                  "r", tr, [0, 1], mode)
    args = [rng.standard_normal(sx), rng.standard_normal(sy), rng.random(sm) < 0.5]
    check(text, args, [0, 1], mode, rng)


@pytest.mark.parametrize("mode", MODES)
def test_select_relu(mode: str) -> None:
    """The mask computed from the operand itself is a constant of the derivative."""
    rng = np.random.default_rng(5)
    t = "<2 x 3 x f64>"
    lines = [f"%p = greaterThan %x: {t}, 0.0: f64",
             f"%r = select %x: {t}, 0.0: f64 by %p: <2 x 3 x bool>"]
    text = module([("x", t)], lines, "r", t, [0], mode)
    check(text, [nonzero(rng, (2, 3))], [0], mode, rng)


@pytest.mark.parametrize("mode", MODES)
def test_cast_float_to_float(mode: str) -> None:
    """f(x) = f64(f32(x)²): the f32 adjoint is cast back to f64."""
    t32, t64 = "<3 x f32>", "<3 x f64>"
    lines = [f"%a = dataTypeCast %x: {t64} to f32", f"%s = square %a: {t32}",
             f"%r = dataTypeCast %s: {t32} to f64"]
    text = module([("x", t64)], lines, "r", t64, [0], mode)
    exe = compile_for_test(ir.parse(text))
    x, v = np.array([0.5, -1.25, 2.0]), np.array([1.0, -2.0, 0.5])
    fn = "df" if mode == "gradient" else "tf"
    (out,) = exe.call(fn, x, v)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, 2 * x * v, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_cast_from_integer_is_constant(mode: str) -> None:
    """f(x, n) = x · f64(n) + f64(i32(x)): no derivative flows through an integer."""
    rng = np.random.default_rng(2)
    t = "<3 x f64>"
    lines = ["%c = dataTypeCast %n: <3 x i32> to f64", f"%p = multiply %x: {t}, %c: {t}",
             f"%i = dataTypeCast %x: {t} to i32", "%j = dataTypeCast %i: <3 x i32> to f64",
             f"%r = add %p: {t}, %j: {t}"]
    text = module([("x", t), ("n", "<3 x i32>")], lines, "r", t, [0], mode)
    x = np.array([0.3, 1.4, -2.6])
    check(text, [x, np.array([2, -1, 3], dtype=np.int32)], [0], mode, rng)


# ------------------------------------------------------------------ random compositions

SAFE_UNARY = ["negate", "square", "sin", "cos", "tanh", "atan", "erf", "sinh", "exp"]
SAFE_BINARY = ["add", "subtract", "multiply", "min", "max", "safe_divide", "safe_power"]


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> tuple:  # type: ignore[type-arg]
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("leaf", draw(st.sampled_from(["x", "y"])))
    if draw(st.booleans()):
        return (draw(st.sampled_from(SAFE_UNARY)), draw(expressions(depth - 1)))
    return (draw(st.sampled_from(SAFE_BINARY)), draw(expressions(depth - 1)),
            draw(expressions(depth - 1)))


def lower(expr: tuple, shapes: dict[str, Shape], lines: list[str]) -> tuple[str, Shape]:  # type: ignore[type-arg]
    """Append the instructions of `expr`; returns its value's name and shape."""
    if expr[0] == "leaf":
        return expr[1], shapes[expr[1]]
    names = [lower(e, shapes, lines) for e in expr[1:]]
    r = f"v{len(lines)}"
    if len(names) == 1:
        (a, sa), = names
        lines.append(f"%{r} = {expr[0]} %{a}: {ty(sa)}")
        return r, sa
    (a, sa), (b, sb) = names
    s = tuple(np.broadcast_shapes(sa, sb))
    if expr[0] == "safe_divide":  # a / (1 + b²)
        lines.append(f"%{r}s = square %{b}: {ty(sb)}")
        lines.append(f"%{r}d = add %{r}s: {ty(sb)}, 1.0: f64")
        lines.append(f"%{r} = divide %{a}: {ty(sa)}, %{r}d: {ty(sb)}")
    elif expr[0] == "safe_power":  # sqrt(1 + a²) ^ tanh(b)
        lines.append(f"%{r}s = square %{a}: {ty(sa)}")
        lines.append(f"%{r}d = add %{r}s: {ty(sa)}, 1.0: f64")
        lines.append(f"%{r}q = sqrt %{r}d: {ty(sa)}")
        lines.append(f"%{r}t = tanh %{b}: {ty(sb)}")
        lines.append(f"%{r} = power %{r}q: {ty(sa)}, %{r}t: {ty(sb)}")
    else:
        lines.append(f"%{r} = {expr[0]} %{a}: {ty(sa)}, %{b}: {ty(sb)}")
    return r, s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=expressions(), seed=st.integers(0, 2**16), mode=st.sampled_from(MODES))
def test_random_compositions(expr: tuple, seed: int, mode: str) -> None:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    shapes: dict[str, Shape] = {"x": (3,), "y": ()}
    lines: list[str] = []
    out, shape = lower(expr, shapes, lines)
    if not lines:  # a bare argument: make it an instruction
        lines.append(f"%v = negate %{out}: {ty(shape)}")
        out = "v"
    text = module([("x", ty((3,))), ("y", "f64")], lines, out, ty(shape), [0, 1], mode)
    args = [rng.uniform(-1.2, 1.2, 3), rng.uniform(-1.2, 1.2, ())]
    # Finite differences of ⟨seed, f⟩ lose all precision next to huge outputs (exp of exp …).
    primal = compile_for_test(ir.parse(text)).call("f", *args)
    assume(bool(np.all(np.abs(primal) < 1e3)))
    if mode == "gradient":
        check_gradient(text, "f", "df", args, rtol=1e-4, atol=1e-6)
    else:
        tangents = [rng.standard_normal(3), rng.standard_normal(())]
        check_tangent(text, "f", "tf", args, tangents, rtol=1e-4, atol=1e-6)
