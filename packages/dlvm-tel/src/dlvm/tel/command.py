"""`dlvm tel generate MODEL.tel -o MODEL_api.py`: the typed Python interface of a model.

Every `dlvm` command builds this app, so it imports nothing heavy: the compiler loads when
the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import dlvm.ir as ir
from dlvm.ir import files

app = typer.Typer(help="TEL, the Tensor Expression Language.", no_args_is_help=True)


@app.command("generate")
def generate_command(
    file: Annotated[str, typer.Argument(metavar="FILE", help="The TEL model (.tel).")],
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="OUT", help="The Python module to write ('-': stdout).")
    ] = "-",
) -> None:
    """Write a typed Python module for a TEL model: its parameters, inference, loss,
    gradient, an SGD step, save and load."""
    from .api import render_file  # the TEL compiler loads when the command runs

    path = Path(file)
    if output != "-":  # before the model is compiled
        files.check_output(output, inputs=[path])
        if Path(output).suffix != ".py":
            raise ir.DlvmError(f"{output}: the interface is a Python module: name it NAME.py")
    code = render_file(path)
    if output == "-":
        typer.echo(code, nl=False)
        return
    files.write_atomic(output, code)
