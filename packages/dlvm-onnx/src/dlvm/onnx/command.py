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
) -> None:
    """Print a model as DLVM IR (the parameters' tuple, @forward, @init_params, @main…)."""
    from .importer import load  # onnx loads when a command runs, not when `dlvm` starts

    if output != "-":  # before any work
        check_output(output, inputs=[file])
    text = str(load(file, freeze=freeze))
    if output == "-":
        typer.echo(text, nl=False)
        return
    write_atomic(output, text)


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
