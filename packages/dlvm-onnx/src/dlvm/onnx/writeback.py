"""Trained parameters written back into an ONNX model's initializers (`dlvm onnx update`)."""

from __future__ import annotations

from pathlib import Path

import dlvm.ir as ir
import onnx
import onnx.numpy_helper
from dlvm.ir.files import write_atomic

from .importer import Importer, read_model
from .parameters import read_parameters


def update_model(file: str, params: str, output: str) -> None:
    """A copy of the model `file` at `output`, its parameters' initializers replaced by the
    arrays of the same names in the .npz `params` (same shapes, finite real values)."""
    if Path(output).suffix != ".onnx":
        raise ir.DlvmError(f"{output}: the model to write is an .onnx file")
    model = read_model(file)
    importer = Importer(model, source=file)
    named = importer.parameters()
    arrays = read_parameters(params, {name: importer.initializers[initializer]
                                      for initializer, name in named})
    by_name = {t.name: t for t in model.graph.initializer}
    for initializer, name in named:
        by_name[initializer].CopyFrom(onnx.numpy_helper.from_array(arrays[name], initializer))
    write_atomic(output, model.SerializeToString())
