"""`dlvm onnx import` (the IR of a model, optionally frozen) and `dlvm onnx update` (trained
parameters written back into the model's initializers).

Every `dlvm` command builds this app, so it imports nothing heavy: the work, and the `onnx`
package with it, is loaded when one of these commands runs (`importer.py`, `writeback.py`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dlvm.ir.files import check_output, write_atomic

app = typer.Typer(help="ONNX models: import them, write trained parameters back.",
                  no_args_is_help=True)


@app.command("import")
def import_command(
    file: Annotated[str, typer.Argument(metavar="MODEL", help="The .onnx model.")],
    freeze: Annotated[bool, typer.Option(
        "--freeze", help="Initializers as constants: @main only, nothing to train.")] = False,
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="OUT", help="Write the IR here ('-': stdout).")] = "-",
    dim: Annotated[list[str] | None, typer.Option(
        "--dim", metavar="NAME=SIZE", help="Give a named dynamic dimension a size (repeat "
        "for several), e.g. --dim seq=128.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Say on stderr what was done to the model (an older opset "
        "converted).")] = False,
) -> None:
    """Print a model as DLVM IR (the parameters' tuple, @forward, @init_params, @main…)."""
    from .importer import load  # onnx loads when a command runs, not when `dlvm` starts

    if output != "-":  # before any work
        check_output(output, inputs=[file])
    notes: list[str] = []
    text = str(load(file, freeze=freeze, notes=notes, dims=parse_dims(dim or [])))
    if verbose:
        for line in notes:
            typer.echo(line, err=True)
    if output == "-":
        typer.echo(text, nl=False)
        return
    write_atomic(output, text)


def parse_dims(items: list[str]) -> dict[str, int]:
    """`NAME=SIZE` options as a dictionary; a malformed one is a usage error."""
    dims = {}
    for item in items:
        name, eq, size = item.partition("=")
        if not eq or not name or not size.strip().isdigit():
            raise typer.BadParameter(f"expected NAME=SIZE, found '{item}'",
                                     param_hint="--dim")
        dims[name.strip()] = int(size)
    return dims


@app.command("update")
def update_command(
    file: Annotated[str, typer.Argument(metavar="MODEL", help="The .onnx model trained.")],
    params: Annotated[str, typer.Option(
        "--params", metavar="NPZ",
        help="Parameters by name, e.g. the checkpoint `dlvm run` wrote.")],
    output: Annotated[str, typer.Option("--output", "-o", metavar="OUT",
                                        help="The .onnx file to write.")],
) -> None:
    """Write trained parameters into a copy of the model, in place of its initializers."""
    from .writeback import update_model  # onnx loads when the command runs

    check_output(output, inputs=[file, params])  # before any work
    update_model(file, params, output)
