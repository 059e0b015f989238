"""Compiling TEL text and files into DLVM modules: `compile`, `compile_file`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dlvm.ir as ir
from dlvm.ir import files

from .checker import check
from .codegen import generate
from .parser import parse


def compile(text: str, filename: str = "<tel>") -> ir.Module:
    """The IR module of TEL source text; errors are `FILE:LINE:COL` diagnostics."""
    with deep_expressions(filename):
        return generate(check(parse(text, filename)))


@contextmanager
def deep_expressions(filename: str) -> Iterator[None]:
    """Room for deep expressions while TEL is checked and generated, and a clear error
    when one is deeper still."""
    limit = sys.getrecursionlimit()
    # Expressions are trees as deep as their longest chain of operators (a sum of n terms
    # is n deep) and are walked recursively; Python-to-Python calls do not use the C stack.
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        yield
    except RecursionError:
        raise ir.FrontendError(f"{filename}: error: an expression is nested too deeply to compile "
                               "(thousands of levels): split it into hidden declarations") from None
    finally:
        sys.setrecursionlimit(limit)


def compile_file(path: str | Path) -> ir.Module:
    return compile(read_source(path), str(path))


def read_source(path: str | Path) -> str:
    """A TEL file's text (a byte-order mark allowed, at most `MAX_TEXT_BYTES`, as any
    module's text); a clear error when it cannot be read."""
    try:
        return files.read_text(path, what="TEL source")
    except ir.DlvmError as e:
        raise ir.FrontendError(str(e)) from None
