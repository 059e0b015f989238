"""Checks for passes: results identical before and after on random inputs, idempotence.

    check_preserves(text, "cse,dce")   # every function, random arguments, interp vs interp
    check_idempotent(text, "cse")      # a second run changes nothing
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import dlvm.ir as ir
from dlvm.ir.types import TensorType

NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
      "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def random_argument(t: ir.Type, module: ir.Module, rng: np.random.Generator,
                    dynamic: int = 3) -> np.ndarray | None:
    """A random array of type `t` (dynamic dimensions become `dynamic`); None if not a tensor."""
    t = module.resolve(t)
    if not isinstance(t, TensorType):
        return None
    shape = tuple(dynamic if d is None else d for d in t.shape)
    name = str(t.dtype)
    if t.dtype.is_float:
        return rng.uniform(0.5, 1.5, shape).astype(NP[name])
    if name == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(1, 4, shape).astype(NP.get(name, np.int64))


def callable_functions(module: ir.Module) -> list[ir.Function]:
    """Functions whose arguments are all tensors (the ones random inputs can call)."""
    out = []
    for fn in module.functions:
        if fn.is_declaration and not isinstance(fn.declaration, ir.DerivativeDecl):
            continue
        if all(isinstance(module.resolve(t), TensorType) for t in fn.type_.arguments):
            out.append(fn)
    return out


def check_preserves(text: str, pipeline: str, *, functions: Sequence[str] | None = None,
                    trials: int = 3, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-6,
                    dynamic: int = 3) -> tuple[ir.Module, ir.Module]:
    """Run `pipeline` on a copy; every function gives the same results before and after."""
    before = ir.parse(text, "before.dl")
    after = ir.parse(text, "after.dl")
    ir.run_passes(after, pipeline)
    ir.verify(after)
    exe_before = ir.compile(before, "interp")
    exe_after = ir.compile(after, "interp")
    names = functions or [f.name for f in callable_functions(before) if f.name]
    rng = np.random.default_rng(seed)
    for name in names:
        fn = before.function(name)
        assert fn is not None, name
        if after.function(name) is None:
            raise AssertionError(f"'{pipeline}' removed '@{name}', which a user may call")
        for _ in range(trials):
            args = [random_argument(t, before, rng, dynamic) for t in fn.type_.arguments]
            expected = exe_before.call(name, *args)
            got = exe_after.call(name, *args)
            assert len(got) == len(expected), name
            for g, e in zip(got, expected, strict=True):
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol,
                                           err_msg=f"@{name} after '{pipeline}'")
    return before, after


def check_idempotent(text: str, pipeline: str) -> str:
    """Running `pipeline` twice prints the same module as running it once."""
    module = ir.parse(text, "once.dl")
    ir.run_passes(module, pipeline)
    once = ir.print_module(module)
    records = ir.run_passes(module, pipeline)
    twice = ir.print_module(module)
    assert twice == once, f"'{pipeline}' is not idempotent:\n--- once\n{once}\n--- twice\n{twice}"
    assert not any(r.changed for r in records), f"'{pipeline}' reported a change on its output"
    return once
