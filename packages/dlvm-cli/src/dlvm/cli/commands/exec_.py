"""`dlvm exec FILE -f NAME`: compile for a target and call one function on .npz inputs.

Arguments and results travel as `.npz` archives (`arg0…`, `out0…`; 0-d arrays
for scalars), so any numpy user can produce and check them. Every option and file is
checked before the module is compiled, so a mistake never costs a long computation.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import dlvm.ir as ir
from dlvm.cli.commands import MODULE_FILE_HELP
from dlvm.cli.errors import warning, warnings_reported
from dlvm.cli.inputs import STDIO, assignment, check_output, load_module

if TYPE_CHECKING:
    import numpy as np

    from dlvm.ir import Function, Module

DTYPE_NAMES = {"float16": "f16", "float32": "f32", "float64": "f64", "bool": "bool",
               "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
               "uint16": "u16", "uint32": "u32", "uint64": "u64", "bfloat16": "bf16"}
PRINT_THRESHOLD = 1000  # elements; larger arrays are summarized with '...'
# options that only some targets have (the interpreter's): ignored with a warning elsewhere
OPTIONAL_OPTIONS = ("seed", "max_steps")


def exec_(
    file: Annotated[str, typer.Argument(metavar="FILE", help=MODULE_FILE_HELP)],
    function: Annotated[str, typer.Option(
        "--function", "-f", metavar="NAME", help="The function to call, e.g. 'f' or '@f'.")],
    target: Annotated[str | None, typer.Option(
        "--target", "-t", metavar="T", help="Target name (default: the fastest installed).")
    ] = None,
    args_file: Annotated[str | None, typer.Option(
        "--args", metavar="IN.npz", help="Arguments as arrays arg0, arg1, … in an .npz file.")
    ] = None,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="OUT.npz",
        help="Write results as out0, out1, … here ('-': the .npz to stdout).")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", metavar="N",
        help="Seed for 'random' (every built-in target; ignored, with a warning, by a "
        "target without a 'seed' option).")] = None,
    max_steps: Annotated[int | None, typer.Option(
        "--max-steps", metavar="N",
        help="Stop a call after N instructions (targets that count them: interp, and "
        "nvptx's host walk; ignored, with a warning, by the others).")] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", metavar="SECONDS", help="Stop a call after this many seconds.")] = None,
    target_option: Annotated[list[str] | None, typer.Option(
        "--target-option", metavar="KEY=VALUE",
        help="An option of the target (repeatable; the value is read as TOML).")] = None,
) -> None:
    """Compile a module for a target and call one function."""
    target_name = resolve_target(target)  # an unknown target is reported before anything else
    flags = {"seed": seed, "max_steps": max_steps, "timeout": timeout}
    options = target_options(target_name, flags, target_option or [])
    if output is not None:
        check_output(output, inputs=[file, args_file])
        if output == STDIO:
            binary_stdout()
    module = load_module(file)
    name = function.removeprefix("@")
    fn = callable_function(module, name, file)
    args = load_args(args_file, fn, module)
    with warnings_reported():
        executable = ir.compile(module, target_name, **options)
        results = executable.call(name, *args)
    if output is not None:
        save_results(output, results)
    else:
        show_results(results)


def callable_function(module: Module, name: str, file: str) -> Function:
    """The function to call; an unknown name lists the ones that can be called."""
    callable_ = [f for f in module.functions if f.name and (
        f.blocks or isinstance(f.declaration, ir.DerivativeDecl))]
    for f in callable_:
        if f.name == name:
            return f
    available = ", ".join(f"@{f.name}" for f in callable_) or "none"
    raise ir.DlvmError(f"no function '@{name}' to call in '{file}' (available: {available})")


def resolve_target(target: str | None) -> str:
    """The registered target to use (the fastest installed one by default)."""
    reg = ir.registry()
    name = target if target is not None else reg.default_target()
    reg.entry("target", name)  # raises RegistryError listing the known targets
    return name


def flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_flags(flags: dict[str, Any]) -> None:
    """The command line's own limits: a seed of 0 or more, at least one step, a timeout
    of a positive number of seconds."""
    seed, steps, timeout = flags["seed"], flags["max_steps"], flags["timeout"]
    if seed is not None and seed < 0:
        raise ir.DlvmError(f"--seed must be a non-negative integer, found {seed}")
    if steps is not None and steps < 1:
        raise ir.DlvmError(f"--max-steps must be at least 1, found {steps}")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ir.DlvmError(f"--timeout must be a positive number of seconds, found {timeout}")


def target_options(target: str, flags: dict[str, Any], assignments: list[str]
                   ) -> dict[str, Any]:
    """The options the target is created with: `--target-option`s, then the flags.

    `--seed` and `--max-steps` are ignored with a warning for a target without such an
    option; every option is checked by creating the target once, before any work.
    """
    from dlvm.cli.run.targets import check_target_options, takes_option

    check_flags(flags)
    options: dict[str, Any] = {}
    for text in assignments:
        key, value = assignment(text, "--target-option")
        if key in options:
            raise ir.DlvmError(f"--target-option {key} is given twice")
        options[key] = value
    for key, value in flags.items():
        if value is None:
            continue
        if key in options:
            raise ir.DlvmError(f"{flag(key)} and --target-option {key} are both given")
        if key in OPTIONAL_OPTIONS and not takes_option(target, key):
            warning(f"{flag(key)}: target '{target}' has no option '{key}'; ignored")
            continue
        options[key] = value
    check_target_options(target, options)
    return options


def load_args(path: str | None, fn: Function, module: Module) -> list[np.ndarray]:
    """Arrays arg0…argN-1 from an .npz file, checked against the function's arity and
    converted to its argument types by the rules every target uses."""
    arrays = read_npz(path) if path is not None else {}
    name, expected = fn.name, len(fn.type_.arguments)
    where = f" in '{path}'" if path is not None else " (pass them with --args IN.npz)"
    if len(arrays) != expected:
        raise ir.DlvmError(f"'@{name}' takes {plural(expected, 'argument')}, "
                           f"{len(arrays)} given{where}")
    wanted = [f"arg{i}" for i in range(expected)]
    missing = [k for k in wanted if k not in arrays]
    if missing:
        found = ", ".join(sorted(arrays))
        raise ir.DlvmError(f"'{path}' has no array '{missing[0]}': the arguments of "
                           f"'@{name}' must be named {', '.join(wanted)} (found {found})")
    return [convert(arrays[k], t, f"'{path}': {k} ({argument_name(fn, i)})", module)
            for i, (k, t) in enumerate(zip(wanted, fn.type_.arguments, strict=True))]


def argument_name(fn: Function, index: int) -> str:
    """`'%x' of '@f'` for argument `index` of `@f`, or `argument 1 of '@f'` when unnamed."""
    args = fn.entry.arguments if fn.blocks else []
    name = args[index].name if index < len(args) else None
    return f"'%{name}' of '@{fn.name}'" if name else f"argument {index} of '@{fn.name}'"


def convert(value: np.ndarray, t: ir.Type, what: str, module: Module) -> Any:
    """A tensor argument converted like every target does (`convert_argument`), so an
    unsafe conversion is refused with a message naming the argument."""
    from dlvm.ir.runtime import convert_argument
    from dlvm.ir.types import TensorType

    resolved = module.resolve(t)
    return convert_argument(value, resolved, what) if isinstance(resolved, TensorType) else value


def read_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, through the one loader of data files."""
    from dlvm.cli.run.files import read_npz as read

    try:
        return read(Path(path))
    except ir.DlvmError as e:
        raise ir.DlvmError(f"--args: {e}") from None


def save_results(path: str, results: tuple[np.ndarray, ...]) -> None:
    """Write out0…outM-1 to exactly `path` (np.savez would append '.npz' to a bare name),
    or for `-` the archive's bytes to stdout, as `opt -o -` writes its text there."""
    import io

    from dlvm.cli.run.files import save_npz, write_npz

    arrays: dict[str, Any] = {f"out{i}": r for i, r in enumerate(results)}
    if path != STDIO:
        save_npz(Path(path), arrays)
        return
    stream = binary_stdout()
    data = io.BytesIO()
    write_npz(data, arrays)
    sys.stdout.flush()
    stream.write(data.getvalue())
    stream.flush()


def binary_stdout() -> Any:
    """Standard output's byte stream, refused when it is a terminal (an archive would
    garble it)."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None or sys.stdout.isatty():
        raise ir.DlvmError("-o -: the results are a binary .npz archive; redirect standard "
                           "output to a file or a pipe")
    return stream


def show_results(results: tuple[np.ndarray, ...]) -> None:
    """Each result as `outI: <shape x dtype>` and then numpy's printing of it."""
    import numpy as np

    for i, r in enumerate(results):
        arr = np.asarray(r)
        typer.echo(f"out{i}: {type_text(arr)}")
        typer.echo(array_text(arr))


def array_text(arr: np.ndarray) -> str:
    """numpy's printing, summarized past PRINT_THRESHOLD elements; scalars as `9.0`."""
    import numpy as np

    if arr.ndim == 0:
        return str(arr[()])
    return np.array2string(arr, threshold=PRINT_THRESHOLD, max_line_width=100)


def type_text(arr: np.ndarray) -> str:
    """The DLVM spelling of an array's type: `<2 x 3 x f32>`, or `f32` for a scalar."""
    dtype = DTYPE_NAMES.get(arr.dtype.name, arr.dtype.name)
    return f"<{' x '.join(map(str, arr.shape))} x {dtype}>" if arr.shape else dtype


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
