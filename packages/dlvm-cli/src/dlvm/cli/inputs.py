"""Reading modules (from files, front ends or stdin) and writing outputs.

Every failure here is a `DlvmError` with a one-line message, so commands
need no error handling of their own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

import dlvm.ir as ir

if TYPE_CHECKING:
    from dlvm.ir import Module

STDIO = "-"
STDIN_NAME = "<stdin>"


def read_stdin() -> bytes:
    """All of stdin as bytes (the parser decodes and reports bad UTF-8 itself)."""
    stream = sys.stdin
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        return bytes(buffer.read())
    return stream.read().encode("utf-8", "surrogateescape")


def frontend_for(path: str) -> Callable[[str], Module]:
    """The registered front end whose suffixes match `path`; DLVM text by default."""
    suffix = PurePath(path).suffix
    for entry in ir.registry().entries["frontend"].values():
        if entry.alias_of is None and suffix and suffix in entry.options.get("suffixes", ()):
            loaded: Callable[[str], Module] = entry.load()
            return loaded
    return ir.parse_file


def load_module(path: str, *, verify: bool = True) -> Module:
    """Parse (and by default verify) `path`, or stdin for `-`."""
    module = ir.parse(read_stdin(), STDIN_NAME) if path == STDIO else frontend_for(path)(path)
    if verify:
        ir.verify(module)
    return module


def write_text(path: str, text: str) -> None:
    """Write `text` to `path`, or to stdout for `-`."""
    if path == STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise ir.DlvmError(f"cannot write '{path}': {e.strerror or e}") from None
