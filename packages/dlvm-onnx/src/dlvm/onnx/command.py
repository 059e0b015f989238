"""`dlvm onnx import` (the IR of a model, optionally frozen) and `dlvm onnx update` (trained
parameters written back into the model's initializers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

import dlvm.ir as ir
import onnx
import onnx.numpy_helper

from .importer import Importer, load

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
    text = str(load(file, freeze=freeze))
    if output == "-":
        typer.echo(text, nl=False)
        return
    write(Path(output), text.encode(), file)


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
    if Path(output).suffix != ".onnx":
        raise ir.DlvmError(f"{output}: the model to write is an .onnx file")
    try:
        model = onnx.load(file)
    except FileNotFoundError:
        raise ir.DlvmError(f"cannot read '{file}': no such file") from None
    except Exception as e:
        raise ir.DlvmError(f"{file}: error: not an ONNX model ({type(e).__name__})") from None
    named = Importer(model, source=file).parameters()
    try:
        archive = np.load(params, allow_pickle=False)
    except FileNotFoundError:
        raise ir.DlvmError(f"cannot read '{params}': no such file") from None
    except Exception as e:
        raise ir.DlvmError(f"{params}: error: not an .npz archive ({type(e).__name__})"
                           ) from None
    with archive:
        missing = [n for _, n in named if n not in archive.files]
        if missing:
            raise ir.DlvmError(f"{params}: no parameter '{missing[0]}' (the model's parameters "
                               f"are {', '.join(n for _, n in named)})")
        by_name = {t.name: t for t in model.graph.initializer}
        for initializer, name in named:
            old = onnx.numpy_helper.to_array(by_name[initializer])
            new = archive[name]
            if new.shape != old.shape:
                raise ir.DlvmError(f"{params}: '{name}' has shape {new.shape}, the model's "
                                   f"'{initializer}' {old.shape}")
            if not np.isfinite(new).all():
                raise ir.DlvmError(f"{params}: '{name}' holds NaN or infinite values")
            by_name[initializer].CopyFrom(onnx.numpy_helper.from_array(
                new.astype(old.dtype), initializer))
    write(Path(output), model.SerializeToString(), file)


def write(path: Path, data: bytes, source: str) -> None:
    if path.resolve() == Path(source).resolve():
        raise ir.DlvmError(f"{path}: the output would replace the model it is made from")
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ir.DlvmError(f"{path}: cannot write it: {e.strerror or e}") from None
