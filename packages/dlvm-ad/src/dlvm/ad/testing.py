"""Derivative checks against central finite differences (float64), for tests and users.

    check_gradient(text, "f", "df", [x, w])   # raises AssertionError with the worst entry

`df` is a gradient declaration of `f` in the module text; the module is compiled
for `target` (by default the interpreter, or `$DLVM_TEST_TARGET`; compiling
differentiates it) and each returned derivative is compared with
(f(x + h) − f(x − h)) / 2h of ⟨seed, f(x)⟩, entry by entry.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import dlvm.ir as ir
from dlvm.ir.derivatives import differentiated_output, wrt_indices
from dlvm.ir.runtime import is_float_dtype
from dlvm.ir.testing import compile_for_test, tolerance


def _decl(module: ir.Module, name: str) -> tuple[ir.Function, ir.DerivativeDecl]:
    fn = module.function(name)
    if fn is None or not isinstance(fn.declaration, ir.DerivativeDecl):
        raise AssertionError(f"'@{name}' is not a derivative declaration")
    return fn, fn.declaration


def central_difference(fn: object, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d fn(x) / dx of a scalar function of one array, by central differences."""
    out = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        up, down = np.array(x, dtype=np.float64), np.array(x, dtype=np.float64)
        up[i] += h
        down[i] -= h
        out[i] = (fn(up) - fn(down)) / (2 * h)  # type: ignore[operator]
    return out


def numeric_gradient(call: object, args: list[np.ndarray], index: int, seed: np.ndarray,
                     output: int, h: float = 1e-6, path: tuple[int, ...] = ()) -> np.ndarray:
    """d⟨seed, f(args)[output]⟩ / d args[index] by central differences; `path` picks an
    element of a tuple argument (nested tuples: one index per level)."""
    x = np.array(_at(args[index], path), dtype=np.float64)
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        values = []
        for step in (h, -h):
            flat[k] = old + step
            shifted = list(args)
            shifted[index] = _replaced(args[index], path, x.copy())
            out = call(*shifted)[output]  # type: ignore[operator]
            values.append(float(np.sum(seed * out)))
        flat[k] = old
        grad.reshape(-1)[k] = (values[0] - values[1]) / (2 * h)
    return grad


def _at(x: object, path: tuple[int, ...]) -> object:
    for i in path:
        x = x[i]  # type: ignore[index]
    return x


def _replaced(x: object, path: tuple[int, ...], new: np.ndarray) -> object:
    if not path:
        return new
    items = list(x)  # type: ignore[call-overload]
    items[path[0]] = _replaced(items[path[0]], path[1:], new)
    return tuple(items)


def _leaves(x: object, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The paths of the arrays in a (nested) tuple argument; `[()]` for an array."""
    if isinstance(x, tuple | list):
        return [p for i, e in enumerate(x) for p in _leaves(e, (*path, i))]
    return [path]


def check_gradient(text: str | ir.Module, f: str, df: str, args: Sequence[np.ndarray], *,
                   seed: np.ndarray | None = None, target: str | None = None,
                   rtol: float = 1e-5, atol: float = 1e-7, rng: int = 0) -> tuple[np.ndarray, ...]:
    """Compare `@df`'s derivatives with finite differences of `@f`; returns `@df`'s outputs."""
    module = ir.parse(text, "check.dl") if isinstance(text, str) else text
    _fn, decl = _decl(module, df)
    of = decl.of
    assert isinstance(of, ir.Function)
    exe = compile_for_test(module, target)
    args = [a if isinstance(a, tuple | list) else np.asarray(a) for a in args]
    out_index = decl.from_index or 0
    primal = exe.call(f, *args)
    out = primal[out_index]
    if decl.seedable and seed is None:
        seed = np.random.default_rng(rng).standard_normal(np.shape(out)).astype(out.dtype)
    call_args = args + ([seed] if decl.seedable else [])
    results = exe.call(df, *call_args)
    seed_value = (np.ones_like(out, dtype=np.float64) if seed is None
                  else np.asarray(seed, np.float64))
    differentiated_output(decl, of.type_)
    wrt = wrt_indices(decl, of.type_, module)
    position = 0  # results are flat: a tuple argument's derivative is one array per element
    for index in wrt:
        for path in _leaves(args[index]):
            expected = numeric_gradient(lambda *a: exe.call(f, *a), args, index, seed_value,
                                        out_index, path=path)
            got = np.asarray(results[position], dtype=np.float64)
            position += 1
            what = f"argument {index}" + "".join(f"[{i}]" for i in path)
            if got.shape != expected.shape:
                raise AssertionError(f"d/d {what}: shape {got.shape}, expected "
                                     f"{expected.shape}")
            if not np.allclose(got, expected, rtol=rtol, atol=atol):
                worst = np.unravel_index(np.argmax(np.abs(got - expected)), got.shape) \
                    if got.ndim else ()
                raise AssertionError(f"d/d {what} differs from finite differences: at "
                                     f"{worst} got {got[worst]!r}, expected {expected[worst]!r}"
                                     f"\ngot {got}\nexpected {expected}")
    kept = results[position:]
    for k, value in zip(decl.keeping, kept, strict=True):
        # computed by `@df`, a function of its own (compiled and ordered differently): equal
        # to rounding, not bit for bit
        dtype = np.asarray(value).dtype
        rtol, atol = tolerance(dtype) if is_float_dtype(dtype) else (0.0, 0.0)
        np.testing.assert_allclose(value, primal[k], rtol=rtol, atol=atol)
    return tuple(results)


def check_tangent(text: str | ir.Module, f: str, tf: str, args: Sequence[np.ndarray],
                  tangents: Sequence[np.ndarray], *, target: str | None = None,
                  rtol: float = 1e-5, atol: float = 1e-7, h: float = 1e-6) -> np.ndarray:
    """Compare `@tf`'s output tangent with (f(x + h·t) − f(x − h·t)) / 2h."""
    module = ir.parse(text, "check.dl") if isinstance(text, str) else text
    _fn, decl = _decl(module, tf)
    of = decl.of
    assert isinstance(of, ir.Function)
    exe = compile_for_test(module, target)
    args = [np.asarray(a, dtype=np.asarray(a).dtype) for a in args]
    wrt = wrt_indices(decl, of.type_, module)
    out_index = decl.from_index or 0
    results = exe.call(tf, *args, *tangents)

    def shifted(step: float) -> np.ndarray:
        moved = list(args)
        for i, t in zip(wrt, tangents, strict=True):
            moved[i] = args[i] + step * np.asarray(t)
        return np.asarray(exe.call(f, *moved)[out_index], dtype=np.float64)

    expected = (shifted(h) - shifted(-h)) / (2 * h)
    got = np.asarray(results[0], dtype=np.float64)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    return got
