"""Running module text on the reference interpreter, for tests and quick experiments.

    run(text, "f", x, y)    # → a tuple of numpy arrays
    run1(text, "f", x)      # → the single result

`mlp_cross_entropy(...)` writes the classic training loss, a tanh MLP's mean softmax
cross-entropy with its gradient declaration, at any sizes. `COUNTED_LOOP` is the smallest
program with a back edge, a trip count given as an argument and a gradient declaration: the
loop the control-flow passes and AD are first tried on.

Each distinct text is parsed, verified and compiled once per target: the target under test,
which is the interpreter unless a test selects another (`compiling_for`, which the spec tests'
fixture uses to run them once per installed target) or `$DLVM_TEST_TARGET` names one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .api import compile
from .diagnostics import DlvmError
from .parser import parse
from .plugin import registry
from .runtime import BFLOAT16, ExecutionError, is_float_dtype, numpy_dtype
from .target import Executable
from .types import ArrayType, TensorType, TupleType, Type
from .verifier import verify

# The target the helpers compile for: the interpreter, or (to run the interpreter's tests on
# a code generator, which must compute the same) the one `DLVM_TEST_TARGET` names.
TARGET_ENV = "DLVM_TEST_TARGET"

# The targets the spec tests run on where installed (the interpreter's instruction tests and
# dlvm-ad's derivative tests state DLVM's semantics; every target must compute the same):
# the reference, native code, and the GPU target's launch plans emulated on the host.
SPEC_TARGETS = ("interp", "llvm-cpu", "nvptx{device=host}")

_selected: list[str] = []  # the targets `compiling_for` selected, innermost last


def target_under_test() -> str:
    """The target's name, with options in pipeline syntax (`llvm-cpu`,
    `nvptx{device=host}`): the one `compiling_for` selected, else `$DLVM_TEST_TARGET`, else
    `interp`."""
    return (_selected[-1] if _selected else None) or os.environ.get(TARGET_ENV) or "interp"


@contextlib.contextmanager
def compiling_for(target: str) -> Iterator[str]:
    """Within the block, the helpers compile for `target` (`name{k=v}` form) by default."""
    _selected.append(target)
    try:
        yield target
    finally:
        _selected.pop()


def spec_targets() -> list[str]:
    """The targets to run the spec tests on: the one `$DLVM_TEST_TARGET` names, else those of
    `SPEC_TARGETS` that are installed (found through the registry)."""
    chosen = os.environ.get(TARGET_ENV)
    if chosen:
        return [chosen]
    found = registry()
    return [t for t in SPEC_TARGETS if found.has("target", target_and_options(t)[0])]


def target_and_options(text: str) -> tuple[str, dict[str, Any]]:
    """`name{k=v k=v}` as the name and its options (numbers, booleans or text)."""
    name, _, rest = text.partition("{")
    options: dict[str, Any] = {}
    for item in rest.rstrip("}").replace(",", " ").split():
        key, _, value = item.partition("=")
        options[key] = _option_value(value)
    return name.strip(), options


def _option_value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def compile_for_test(module: Any, target: str | None = None) -> Executable:
    """`module` compiled for `target` (in `name{k=v}` form), by default the one under
    test."""
    name, options = target_and_options(target or target_under_test())
    return compile(module, target=name, **options)


def executable(text: str, target: str | None = None) -> Executable:
    """`text` parsed, verified and compiled for `target` (by default the target under test),
    once per text and target."""
    return _compiled(text, target or target_under_test())


@functools.cache
def _compiled(text: str, target: str) -> Executable:
    module = parse(text)
    verify(module)
    return compile_for_test(module, target)


def run(text: str, fn: str, *args: object) -> tuple[np.ndarray, ...]:
    return executable(text).call(fn, *args)


def run1(text: str, fn: str, *args: object) -> np.ndarray:
    outs = run(text, fn, *args)
    assert len(outs) == 1, f"'@{fn}' returned {len(outs)} values, expected one"
    return outs[0]


COUNTED_LOOP = """module "loop"
stage raw

func @p: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %s = sin %x: f64
    branch 'loop(0: i64, %s: f64)
'loop(%i: i64, %y: f64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'exit()
'body():
    %t = tanh %y: f64
    %y2 = multiply %t: f64, %x: f64
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %y2: f64)
'exit():
    return %y: f64
}

[gradient @p wrt 0]
func @dp: (f64, i64) -> (f64)
"""


def mlp_cross_entropy(batch: str = "_", inputs: int = 4, hidden: int = 5, outputs: int = 3,
                      dtype: str = "f64", header: bool = True) -> str:
    """`@loss(x, y, w1, b1, w2, b2)`: the mean softmax cross-entropy of tanh(x·w1 + b1)·w2 + b2
    against one-hot `y` (row maximum subtracted before `exp`), and `@dloss`, its gradient in
    the four parameters keeping the loss. `batch` is a size or `_`."""
    n, i, h, o, t = batch, inputs, hidden, outputs, dtype
    args = (f"<{n} x {i} x {t}>, <{n} x {o} x {t}>, <{i} x {h} x {t}>, <{h} x {t}>, "
            f"<{h} x {o} x {t}>, <{o} x {t}>")
    grads = f"<{i} x {h} x {t}>, <{h} x {t}>, <{h} x {o} x {t}>, <{o} x {t}>"
    params = (f"%x: <{n} x {i} x {t}>, %y: <{n} x {o} x {t}>, %w1: <{i} x {h} x {t}>, "
              f"%b1: <{h} x {t}>, %w2: <{h} x {o} x {t}>, %b2: <{o} x {t}>")
    text = f"""
// mean softmax cross-entropy of a tanh MLP: the classic training loss
func @loss: ({args}) -> {t} {{
'entry({params}):
    %z1 = dot %x: <{n} x {i} x {t}>, %w1: <{i} x {h} x {t}>
    %bb1 = padShape %b1: <{h} x {t}> at 0
    %a1 = add %z1: <{n} x {h} x {t}>, %bb1: <1 x {h} x {t}>
    %h = tanh %a1: <{n} x {h} x {t}>
    %z2 = dot %h: <{n} x {h} x {t}>, %w2: <{h} x {o} x {t}>
    %bb2 = padShape %b2: <{o} x {t}> at 0
    %logits = add %z2: <{n} x {o} x {t}>, %bb2: <1 x {o} x {t}>
    %m = reduce %logits: <{n} x {o} x {t}> by max init -inf: {t} along 1
    %mp = padShape %m: <{n} x {t}> at 1
    %zc = subtract %logits: <{n} x {o} x {t}>, %mp: <{n} x 1 x {t}>
    %e = exp %zc: <{n} x {o} x {t}>
    %s = reduce %e: <{n} x {o} x {t}> by add init 0.0: {t} along 1
    %ls = log %s: <{n} x {t}>
    %lsp = padShape %ls: <{n} x {t}> at 1
    %logp = subtract %zc: <{n} x {o} x {t}>, %lsp: <{n} x 1 x {t}>
    %py = multiply %logp: <{n} x {o} x {t}>, %y: <{n} x {o} x {t}>
    %total = reduce %py: <{n} x {o} x {t}> by add init 0.0: {t}
    %rows = unitCount of %m: <{n} x {t}>
    %n = dataTypeCast %rows: i64 to {t}
    %mean = divide %total: {t}, %n: {t}
    %loss = negate %mean: {t}
    return %loss: {t}
}}

[gradient @loss wrt 2, 3, 4, 5 keeping 0]
func @dloss: ({args}) -> ({grads}, {t})
"""
    return ('module "mlp"\nstage raw\n' + text) if header else text


def linear_regression(inputs: int = 4, outputs: int = 3) -> str:
    """`@train_step(w, b, x, y, lr) -> (w', b', loss)`: one step of gradient descent on the
    mean squared error of x·w + b against y, its gradient written by hand (so that running
    it needs no other package), and `@predict(w, b, x) -> x·w + b`. float32, any batch."""
    i, o = inputs, outputs
    w, b, x, y = (f"<{i} x {o} x f32>", f"<{o} x f32>", f"<_ x {i} x f32>", f"<_ x {o} x f32>")
    result = f"({w}, {b}, f32)"
    return f"""
// one step of gradient descent on the mean squared error of x·w + b against y
func @train_step: ({w}, {b}, {x}, {y}, f32) -> {result} {{
'entry(%w: {w}, %b: {b}, %x: {x}, %y: {y}, %lr: f32):
    %d = dot %x: {x}, %w: {w}
    %bp = padShape %b: {b} at 0
    %p = add %d: {y}, %bp: <1 x {o} x f32>
    %e = subtract %p: {y}, %y: {y}
    %sq = multiply %e: {y}, %e: {y}
    %total = reduce %sq: {y} by add init 0.0: f32
    %count = unitCount of %e: {y}
    %n = dataTypeCast %count: i64 to f32
    %loss = divide %total: f32, %n: f32
    %k = divide 2.0: f32, %n: f32
    %s = multiply %k: f32, %lr: f32
    %xt = transpose %x: {x}
    %gw = dot %xt: <{i} x _ x f32>, %e: {y}
    %gb = reduce %e: {y} by add init 0.0: f32 along 0
    %dw = multiply %gw: {w}, %s: f32
    %db = multiply %gb: {b}, %s: f32
    %w2 = subtract %w: {w}, %dw: {w}
    %b2 = subtract %b: {b}, %db: {b}
    %r = literal (%w2: {w}, %b2: {b}, %loss: f32): {result}
    return %r: {result}
}}

func @predict: ({w}, {b}, {x}) -> {y} {{
'entry(%w: {w}, %b: {b}, %x: {x}):
    %d = dot %x: {x}, %w: {w}
    %bp = padShape %b: {b} at 0
    %p = add %d: {y}, %bp: <1 x {o} x f32>
    return %p: {y}
}}
"""


# ---------------------------------------------------------------- differential testing

# float tolerance by bits: (relative, absolute)
TOLERANCE = {16: (1e-2, 1e-3), 32: (1e-5, 1e-6), 64: (1e-12, 1e-14)}
BFLOAT16_TOLERANCE = (4e-2, 1e-2)  # 8 significant bits: one rounding is 2^-9 relative


def tolerance(dtype: np.dtype[Any]) -> tuple[float, float]:
    """(rtol, atol) for comparing two computations of a float dtype's values."""
    return BFLOAT16_TOLERANCE if dtype == BFLOAT16 else TOLERANCE[dtype.itemsize * 8]
DYNAMIC = 3  # the size a `_` dimension gets in random arguments


def corpus(root: Path) -> list[Path]:
    """The programs of a checkout that verify and stand alone: the lit suite's and the
    examples' `.dl` files (malformed-input files, and files made to be linked into another
    module — they declare functions `extern` —, are left out)."""
    from .core import DerivativeDecl
    from .parser import parse_file

    out = []
    for path in sorted([*root.glob("integration-tests/lit/**/*.dl"),
                        *root.glob("examples/**/*.dl")]):
        if "Output" in path.parts:
            continue
        try:
            module = parse_file(str(path))
            verify(module)
        except DlvmError:
            continue
        if any(not f.blocks and not isinstance(f.declaration, DerivativeDecl)
               for f in module.functions):
            continue
        out.append(path)
    return out


def random_argument(t: Type, module: Any, rng: np.random.Generator) -> Any:
    """A random value of type `t`, in ranges every instruction of the corpus accepts."""
    t = module.resolve(t)
    if isinstance(t, TupleType):
        return tuple(random_argument(e, module, rng) for e in t.elements)
    if isinstance(t, ArrayType):
        return tuple(random_argument(t.element, module, rng) for _ in range(t.count))
    assert isinstance(t, TensorType)
    shape = tuple(DYNAMIC if d is None else d for d in t.shape)
    dtype = numpy_dtype(t.dtype)
    if t.dtype.is_float:
        return rng.uniform(0.2, 1.5, shape).astype(dtype)
    if t.dtype.is_bool:
        return rng.random(shape) < 0.5
    return rng.integers(1, 4, shape).astype(dtype)


def crosses_to_python(t: Type, module: Any) -> bool:
    """Whether values of `t` can be passed from and to Python (tensors and tuples of them)."""
    t = module.resolve(t)
    if isinstance(t, TensorType):
        return True
    if isinstance(t, TupleType):
        return all(crosses_to_python(e, module) for e in t.elements)
    if isinstance(t, ArrayType):
        return crosses_to_python(t.element, module)
    return False


def callable_functions(module: Any) -> list[Any]:
    """The functions a test can call from Python (not kernels, not declarations)."""
    return [f for f in module.functions
            if f.blocks and f.name and "kernel" not in f.attributes
            and all(crosses_to_python(t, module) for t in (*f.type_.arguments,
                                                            f.type_.result))]


def assert_agree(got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...], what: str) -> None:
    """Same dtypes and shapes; floats within `TOLERANCE`, everything else equal."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, k, g, w)
        if is_float_dtype(g.dtype):
            rtol, atol = tolerance(g.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what}[{k}]")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}[{k}]")


def check_random_program(text: str, x: float, y: float, n: int, k: int, target: str,
                         **options: Any) -> None:
    """A program of `strategies.loop_programs` (`@f(x, y, n, k)`), its gradient and its
    tangent compute the same on `target` (made with `options`) as on the interpreter."""
    text += ("\n[gradient @f wrt 0, 1]\nfunc @df: (f64, f64, i64, i64) -> (f64, f64)\n"
             "[tangent @f wrt 0]\nfunc @tf: (f64, f64, i64, i64, f64) -> (f64)\n")
    module = parse(text, "random.dl")
    oracle = compile(module, "interp", max_steps=100_000)
    native = compile(module, target=target, **options)
    for fn_name, args in (("f", [x, y, n, k]), ("df", [x, y, n, k]),
                          ("tf", [x, y, n, k, 1.0])):
        fn = oracle.module.function(fn_name)
        assert fn is not None
        check_same(fn, args, native, oracle, same_place=True)


def module_from_path(path: Path, name: str) -> Any:
    """A Python file that is not on the import path (a benchmark, another package's test
    tables) imported as module `name`, for tests that share its definitions."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def check_same(fn: Any, args: list[Any], target: Executable, oracle: Executable, *,
               errors: bool = True, same_place: bool = False) -> None:
    """`target` computes what `oracle` does, and fails where it fails (unless `errors` is
    False: optimizations may remove an unused instruction that would have failed); with
    `same_place`, at the instruction the oracle's error names, if it names one."""
    what = f"@{fn.name}"
    try:
        want = oracle.call(fn.name or "", *args)
    except ExecutionError as e:
        if errors:
            try:
                target.call(fn.name or "", *args)
            except ExecutionError as got:
                if same_place:
                    here, there = error_place(str(e)), error_place(str(got))
                    assert here is None or here == there, (
                        f"{what}: the oracle fails at {here} ({e}), the target at {there} "
                        f"({got})")
                return
            raise AssertionError(f"{what}: the oracle fails ({e}), the target does "
                                 "not") from None
        return
    assert_agree(target.call(fn.name or "", *args), want, what)


def error_place(message: str) -> str | None:
    """The instruction a run-time error names (`file:line:col: 'opcode'`), if it does."""
    found = _PLACE.match(message)
    return found.group(1) if found else None


_PLACE = re.compile(r"(\S+:\d+:\d+: '[^']+'): ")
