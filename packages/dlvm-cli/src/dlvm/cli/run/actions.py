"""The `emit` and `call` actions of a pipeline file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir.runtime import convert_argument
from dlvm.ir.types import TensorType

from .files import file_kind, open_npz, read_array, save_npz, save_text
from .spec import CallSpec, EmitSpec, KeyedError, KeyPath, argument_name, parameter_names

if TYPE_CHECKING:
    from .progress import Reporter


def emit(module: ir.Module, spec: EmitSpec, reporter: Reporter) -> None:
    """Write the module as it stands after the passes."""
    save_text(spec.output, ir.print_module(module))
    count = sum(1 for f in module.functions for _ in f.instructions())
    reporter.log(f"emit: wrote the optimized IR ({count} instructions) to {spec.output}")


# an argument: its value, where it came from (for messages), and the key to blame
Source = tuple[np.ndarray, str, KeyPath]


def _named(spec: CallSpec, fn: ir.Function) -> list[Source]:
    """The leading arguments that `parameters` holds by name (`%w1` from array 'w1')."""
    if spec.parameters is None:
        return []
    out: list[Source] = []
    where: KeyPath = ("call", "parameters")
    try:
        with open_npz(spec.parameters) as npz:
            for name in parameter_names(fn, len(fn.type_.arguments)):
                if not npz.has(name):
                    break
                out.append((npz.array(name), f"'{spec.parameters.name}' array '{name}'", where))
    except ir.DlvmError as e:
        raise KeyedError(where, str(e)) from None
    return out


def _positional(spec: CallSpec) -> list[Source]:
    """The rest, in order: one .npz of arg0, arg1, …, or one array per `args` item."""
    where: KeyPath = ("call", "args")
    try:
        if len(spec.args) == 1 and spec.args[0][1] is None:
            path = spec.args[0][0]
            if file_kind(path) == "npz":
                with open_npz(path) as npz:
                    if npz.names and all(k.startswith("arg") for k in npz.names):
                        keys = [f"arg{i}" for i in range(len(npz.names))
                                if npz.has(f"arg{i}")]
                        return [(npz.array(k), f"'{path.name}' array '{k}'", where)
                                for k in keys]
        return [(read_array(path, key), f"'{path.name}" + (f":{key}'" if key else "'"), where)
                for path, key in spec.args]
    except ir.DlvmError as e:
        raise KeyedError(where, str(e)) from None


def call_arguments(spec: CallSpec, fn: ir.Function, module: ir.Module) -> list[Any]:
    """The arguments: named ones from `parameters`, then the rest in order from `args`,
    each converted to its type by the rules every target uses."""
    sources = _named(spec, fn) + _positional(spec)
    n = len(fn.type_.arguments)
    if len(sources) != n:
        raise KeyedError(("call", "args"), f"'@{fn.name}' takes {n} arguments, "
                                           f"{len(sources)} given")
    values = []
    for i, ((value, origin, where), t) in enumerate(zip(sources, fn.type_.arguments,
                                                         strict=True)):
        resolved = module.resolve(t)
        if not isinstance(resolved, TensorType):
            values.append(value)
            continue
        try:
            values.append(convert_argument(value, resolved,
                                           f"{origin} ({argument_name(fn, i)})"))
        except ir.DlvmError as e:
            raise KeyedError(where, str(e)) from None
    return values


def call(exe: Any, module: ir.Module, spec: CallSpec, reporter: Reporter) -> tuple[Any, ...]:
    fn = module.function(spec.function)
    assert fn is not None
    results = exe.call(spec.function, *call_arguments(spec, fn, module))
    if spec.output is not None:
        save_npz(spec.output, {f"out{i}": r for i, r in enumerate(results)})
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
