"""`dlvm exec FILE -f NAME`: compile for a target and call one function on .npz inputs.

Arguments and results travel as `.npz` archives (`arg0…`, `out0…`; 0-d arrays
for scalars), so any numpy user can produce and check them.
"""

from __future__ import annotations

import zipfile
from typing import TYPE_CHECKING, Annotated, Any

import typer

import dlvm.ir as ir
from dlvm.cli.errors import warning
from dlvm.cli.inputs import load_module

if TYPE_CHECKING:
    import numpy as np

    from dlvm.ir import Function, Module

DTYPE_NAMES = {"float16": "f16", "float32": "f32", "float64": "f64", "bool": "bool",
               "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64"}
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
PRINT_THRESHOLD = 1000  # elements; larger arrays are summarized with '...'


def exec_(
    file: Annotated[str, typer.Argument(metavar="FILE", help="IR file ('-' reads stdin).")],
    function: Annotated[str, typer.Option(
        "--function", "-f", metavar="NAME", help="The function to call, e.g. 'f' or '@f'.")],
    target: Annotated[str | None, typer.Option(
        "--target", "-t", metavar="T", help="Target name (default: the fastest installed).")
    ] = None,
    args_file: Annotated[str | None, typer.Option(
        "--args", metavar="IN.npz", help="Arguments as arrays arg0, arg1, … in an .npz file.")
    ] = None,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="OUT.npz", help="Write results as out0, out1, … here.")
    ] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", metavar="N", help="Seed for 'random' (target interp only).")] = None,
) -> None:
    """Compile an IR file for a target and call one function."""
    target_name = resolve_target(target)  # an unknown target is reported before anything else
    module = load_module(file)
    name = function.removeprefix("@")
    fn = callable_function(module, name, file)
    args = load_args(args_file, len(fn.type_.arguments), name)
    executable = ir.compile(module, target_name, **target_options(target_name, seed))
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


def target_options(target: str, seed: int | None) -> dict[str, Any]:
    """`seed` is an option of the interpreter only; other targets ignore it with a warning."""
    if seed is None:
        return {}
    entry = ir.registry().entry("target", target)
    if (entry.alias_of or entry.name) == "interp":
        return {"seed": seed}
    warning(f"--seed applies to target 'interp' only; ignored for '{target}'")
    return {}


def load_args(path: str | None, expected: int, name: str) -> list[np.ndarray]:
    """Arrays arg0…argN-1 from an .npz file, checked against the function's arity."""
    arrays = read_npz(path) if path is not None else {}
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
    return [arrays[k] for k in wanted]


def read_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of an .npz archive; every failure is a one-line DlvmError."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
        if magic == NPY_MAGIC:
            raise ir.DlvmError(f"'{path}' holds a single array (.npy), not an .npz archive")
        if not magic.startswith(ZIP_MAGIC):
            raise ir.DlvmError(f"'{path}' is not an .npz archive")
        with np.load(path, allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    except FileNotFoundError:
        raise ir.DlvmError(f"cannot read arguments file '{path}': no such file") from None
    except (ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ir.DlvmError(f"'{path}' is not a valid .npz archive: {e}") from None
    except OSError as e:
        raise ir.DlvmError(f"cannot read arguments file '{path}': {e.strerror or e}") from None


def save_results(path: str, results: tuple[np.ndarray, ...]) -> None:
    """Write out0…outM-1 to exactly `path` (np.savez would append '.npz' to a bare name)."""
    import numpy as np

    try:
        with open(path, "wb") as f:
            arrays: dict[str, Any] = {f"out{i}": r for i, r in enumerate(results)}
            np.savez(f, **arrays)
    except OSError as e:
        raise ir.DlvmError(f"cannot write '{path}': {e.strerror or e}") from None


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
