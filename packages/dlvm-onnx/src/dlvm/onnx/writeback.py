"""Trained parameters written back into an ONNX model's initializers (`dlvm onnx update`),
and the atomic write of a command's output file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import dlvm.ir as ir
import onnx
import onnx.numpy_helper

from .importer import Importer


def update_model(file: str, params: str, output: str) -> None:
    """A copy of the model `file` at `output`, its parameters' initializers replaced by the
    arrays of the same names in the .npz `params` (same shapes, finite values)."""
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
