"""ONNX as a front end: `dlvm compile|exec|verify model.onnx`, `[module] path = "m.onnx"`."""

from __future__ import annotations

import dlvm.ir as ir

from .importer import load


def load_file(path: str) -> ir.Module:
    return load(path)
