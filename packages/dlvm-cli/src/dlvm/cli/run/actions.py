"""The `emit` and `call` actions of a pipeline file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import dlvm.ir as ir

from .spec import CallSpec, EmitSpec, parameter_names

if TYPE_CHECKING:
    from .progress import Reporter


def emit(module: ir.Module, spec: EmitSpec, reporter: Reporter) -> None:
    """Write the module as it stands after the passes."""
    spec.output.parent.mkdir(parents=True, exist_ok=True)
    spec.output.write_text(ir.print_module(module), encoding="utf-8")
    count = sum(1 for f in module.functions for _ in f.instructions())
    reporter.log(f"emit: wrote the optimized IR ({count} instructions) to {spec.output}")


def _read(path: Path, key: str | None) -> np.ndarray:
    try:
        if path.suffix == ".npy":
            return np.load(path)
        with np.load(path) as npz:
            if key is None:
                if len(npz.files) != 1:
                    raise ir.DlvmError(f"'{path}' holds {len(npz.files)} arrays: name one as "
                                       f"'{path.name}:ARRAY' ({', '.join(npz.files)})")
                key = npz.files[0]
            if key not in npz.files:
                raise ir.DlvmError(f"'{path}' has no array '{key}' ({', '.join(npz.files)})")
            return npz[key]
    except (OSError, ValueError) as e:
        raise ir.DlvmError(f"cannot read '{path}': {e}") from None


def call_arguments(spec: CallSpec, fn: ir.Function) -> list[np.ndarray]:
    """The arguments: named ones from `parameters`, then the rest in order from `args`."""
    n = len(fn.type_.arguments)
    values: list[np.ndarray] = []
    if spec.parameters is not None:
        names = parameter_names(fn, n)
        with np.load(spec.parameters) as npz:
            for name in names:
                if name not in npz.files:
                    break
                values.append(npz[name])
    if len(spec.args) == 1 and spec.args[0][1] is None and spec.args[0][0].suffix == ".npz":
        path = spec.args[0][0]
        with np.load(path) as npz:
            if all(k.startswith("arg") for k in npz.files):
                values += [npz[f"arg{i}"] for i in range(len(npz.files)) if f"arg{i}" in npz.files]
                return _checked(values, n, fn)
    values += [_read(path, key) for path, key in spec.args]
    return _checked(values, n, fn)


def _checked(values: list[np.ndarray], n: int, fn: ir.Function) -> list[np.ndarray]:
    if len(values) != n:
        raise ir.DlvmError(f"'@{fn.name}' takes {n} arguments, {len(values)} given")
    return values


def call(exe: Any, module: ir.Module, spec: CallSpec, reporter: Reporter) -> tuple[Any, ...]:
    fn = module.function(spec.function)
    assert fn is not None
    results = exe.call(spec.function, *call_arguments(spec, fn))
    if spec.output is not None:
        spec.output.parent.mkdir(parents=True, exist_ok=True)
        with open(spec.output, "wb") as f:
            np.savez(f, **{f"out{i}": r for i, r in enumerate(results)})
    for i, r in enumerate(results):
        arr = np.asarray(r)
        line = f"call: out{i}: {arr.dtype} {tuple(arr.shape)}"
        if arr.size and arr.dtype.kind == "f":
            line += f"  min {arr.min():.4g}  mean {arr.mean():.4g}  max {arr.max():.4g}"
        if arr.ndim == 2 and arr.dtype.kind == "f":
            line += f"  argmax {np.argmax(arr, axis=-1)[:10].tolist()}"
        reporter.log(line)
    if spec.output is not None:
        reporter.log(f"call: wrote {len(results)} results to {spec.output}")
    return tuple(results)
