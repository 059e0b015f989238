"""Every program of the repository computes on llvm-cpu what the interpreter computes.

The lit corpus, the examples, and random programs with loops, branches and gradients are
run on both targets with the same random arguments: results must agree (float32 within
1e-5 relative, float64 within 1e-12), and where the interpreter stops with an error, native
code stops with an error too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.strategies import loop_programs
from dlvm.ir.types import ArrayType, TensorType, TupleType, Type

ROOT = Path(__file__).resolve().parents[3]
CORPUS = sorted([*ROOT.glob("integration-tests/lit/**/*.dl"), *ROOT.glob("examples/**/*.dl")])
TOLERANCE = {16: (1e-2, 1e-3), 32: (1e-5, 1e-6), 64: (1e-12, 1e-14)}
DYNAMIC = 3  # the size a `_` dimension gets


def programs() -> list[Path]:
    out = []
    for path in CORPUS:
        if "Output" in path.parts:
            continue
        try:
            ir.verify(ir.parse_file(str(path)))
        except ir.DlvmError:
            continue  # a file of the corpus of errors
        out.append(path)
    return out


def argument(t: Type, module: ir.Module, rng: np.random.Generator) -> Any:
    """A random value of type `t`, in ranges every instruction of the corpus accepts."""
    t = module.resolve(t)
    if isinstance(t, TupleType):
        return tuple(argument(e, module, rng) for e in t.elements)
    if isinstance(t, ArrayType):
        return tuple(argument(t.element, module, rng) for _ in range(t.count))
    assert isinstance(t, TensorType)
    shape = tuple(DYNAMIC if d is None else d for d in t.shape)
    dtype = numpy_dtype(t.dtype)
    if t.dtype.is_float:
        return rng.uniform(0.2, 1.5, shape).astype(dtype)
    if t.dtype.is_bool:
        return rng.random(shape) < 0.5
    return rng.integers(1, 4, shape).astype(dtype)


def crosses_to_python(t: Type, module: ir.Module) -> bool:
    t = module.resolve(t)
    if isinstance(t, TensorType):
        return True
    if isinstance(t, TupleType):
        return all(crosses_to_python(e, module) for e in t.elements)
    if isinstance(t, ArrayType):
        return crosses_to_python(t.element, module)
    return False


def callable_functions(module: ir.Module) -> list[ir.Function]:
    return [f for f in module.functions
            if f.blocks and f.name and "kernel" not in f.attributes
            and all(crosses_to_python(t, module) for t in (*f.type_.arguments,
                                                            f.type_.result))]


def agree(native: tuple[np.ndarray, ...], oracle: tuple[np.ndarray, ...], what: str) -> None:
    assert len(native) == len(oracle), what
    for k, (got, want) in enumerate(zip(native, oracle, strict=True)):
        assert got.dtype == want.dtype and got.shape == want.shape, (what, k, got, want)
        if got.dtype.kind == "f":
            rtol, atol = TOLERANCE[got.dtype.itemsize * 8]
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{what}[{k}]")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{what}[{k}]")


def compare(fn: ir.Function, args: list[Any], native: ir.Executable, oracle: ir.Executable,
            *, errors: bool = True) -> None:
    """The same results; and an error where the interpreter has one (unless `errors` is
    False: optimizations may remove an unused instruction that would have failed)."""
    what = f"@{fn.name}"
    try:
        want = oracle.call(fn.name or "", *args)
    except ir.ExecutionError:
        if errors:
            with pytest.raises(ir.ExecutionError):
                native.call(fn.name or "", *args)
        return
    agree(native.call(fn.name or "", *args), want, what)


@pytest.mark.parametrize("path", programs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_corpus_computes_the_same(path: Path) -> None:
    module = ir.parse_file(str(path))
    ir.verify(module)
    # one oracle per native executable: each draws `random` from its own generator
    oracle = ir.compile(module, "interp", max_steps=200_000)
    oracle2 = ir.compile(module, "interp", max_steps=200_000)
    native = ir.compile(module, "llvm-cpu", passes="")
    optimized = ir.compile(module, "llvm-cpu")  # after O3: fused kernels
    rng = np.random.default_rng(0)
    for fn in callable_functions(oracle.module):
        args = [argument(t, oracle.module, rng) for t in fn.type_.arguments]
        compare(fn, args, native, oracle)
        compare(fn, args, optimized, oracle2, errors=False)


def test_the_examples_arguments_give_the_same_results() -> None:
    """The website demo with its own inputs, and the digits MLP's training step."""
    demo = ROOT / "examples" / "website-demo"
    module = ir.parse_file(str(demo / "website-demo.dl"))
    with np.load(demo / "inputs.npz") as npz:
        args = [npz[f"arg{i}"] for i in range(len(npz.files))]
    agree(ir.compile(module, "llvm-cpu").call("f", *args),
          ir.compile(module, "interp").call("f", *args), "website demo")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=loop_programs(), x=st.floats(0.2, 1.5), y=st.floats(0.2, 1.5),
       n=st.integers(0, 4), k=st.integers(-2, 3))
def test_random_programs_with_loops_and_gradients(text: str, x: float, y: float, n: int,
                                                  k: int) -> None:
    text += ("\n[gradient @f wrt 0, 1]\nfunc @df: (f64, f64, i64, i64) -> (f64, f64)\n"
             "[tangent @f wrt 0]\nfunc @tf: (f64, f64, i64, i64, f64) -> (f64)\n")
    module = ir.parse(text, "random.dl")
    oracle = ir.compile(module, "interp", max_steps=100_000)
    native = ir.compile(module, "llvm-cpu", passes="")
    for name, args in (("f", [x, y, n, k]), ("df", [x, y, n, k]), ("tf", [x, y, n, k, 1.0])):
        fn = oracle.module.function(name)
        assert fn is not None
        compare(fn, args, native, oracle)
