"""Compiling TEL text and files into DLVM modules: `compile`, `compile_file`."""

from __future__ import annotations

import sys
from pathlib import Path

import dlvm.ir as ir

from .checker import check
from .codegen import generate
from .parser import parse


def compile(text: str, filename: str = "<tel>") -> ir.Module:
    """The IR module of TEL source text; errors are `FILE:LINE:COL` diagnostics."""
    limit = sys.getrecursionlimit()
    # Expressions are trees as deep as their longest chain of operators (a sum of n terms
    # is n deep) and are walked recursively; Python-to-Python calls do not use the C stack.
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return generate(check(parse(text, filename)))
    except RecursionError:
        raise ir.FrontendError(f"{filename}: error: an expression is nested too deeply to compile "
                               "(thousands of levels): split it into hidden declarations") from None
    finally:
        sys.setrecursionlimit(limit)


def compile_file(path: str | Path) -> ir.Module:
    return compile(read_source(path), str(path))


def read_source(path: str | Path) -> str:
    """A TEL file's text (a byte-order mark allowed); a clear error when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ir.FrontendError(f"cannot read '{path}': it is not UTF-8 text") from None
    except OSError as e:
        raise ir.FrontendError(f"cannot read '{path}': {e.strerror or e}") from None
