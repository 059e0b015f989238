"""The command `dlvm sample trace`: run a function on the interpreter, showing every step.

It reads its file with `dlvm.ir.load_module` (so `.dl`, `.tel`, `.chain`, … all work, with
DLVM's own messages for a bad or unreadable file) and watches the interpreter through its
`observe` hook. Errors are `dlvm.ir.DlvmError`s, which the `dlvm` command prints as
`dlvm: error: …`.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import typer

import dlvm.ir as ir


def trace(
    file: Annotated[str, typer.Argument(help="The module: IR text or any front end's file.")],
    function: Annotated[str, typer.Option("--function", "-f", help="The function to run.")
                        ] = "f",
    args: Annotated[str | None, typer.Option(
        "--args", metavar="IN.npz", help="Its arguments, arg0…argN-1.")] = None,
) -> None:
    """Run FUNCTION of FILE on the interpreter, printing each instruction and its value."""
    module = ir.load_module(file)
    arrays = read_arguments(args)

    def show(inst: ir.Instruction, frame: Any, value: Any) -> None:
        typer.echo(ir.print_instruction(inst).strip())
        if value is not None:
            typer.echo(f"    = {np.array2string(np.asarray(value), precision=4)}")

    ir.compile(module, target="interp", observe=show)[function](*arrays)


def read_arguments(path: str | None) -> list[np.ndarray]:
    """arg0, arg1, … of an .npz file, in order."""
    if path is None:
        return []
    try:
        with np.load(path) as archive:
            return [archive[f"arg{i}"] for i in range(len(archive.files))]
    except (OSError, ValueError, KeyError) as e:
        raise ir.DlvmError(f"cannot read the arguments '{path}': {e}") from None
