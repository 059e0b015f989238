"""TEL as a front end: `dlvm verify|opt|compile|exec model.tel`, `[module] path = "model.tel"`."""

from __future__ import annotations

import dlvm.ir as ir

from . import compile_file


def load_file(path: str) -> ir.Module:
    return compile_file(path)
