"""Reading modules (from files, front ends or stdin), command-line values, and writing outputs.

Every failure here is a `DlvmError` with a one-line message, so commands
need no error handling of their own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import dlvm.ir as ir
from dlvm.cli.toml_text import TomlError, loads
from dlvm.ir import files

if TYPE_CHECKING:
    from dlvm.ir import Module

STDIO = "-"
STDIN_NAME = "<stdin>"


def read_stdin() -> bytes:
    """All of stdin as bytes, at most a module's cap (the parser decodes and reports bad
    UTF-8 itself)."""
    stream = sys.stdin
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        return files.read_stream(buffer, name=STDIN_NAME, what="module",
                                 limit=files.MAX_TEXT_BYTES)
    text: str = stream.read(files.MAX_TEXT_BYTES + 1)
    data = text.encode("utf-8", "surrogateescape")
    if len(data) > files.MAX_TEXT_BYTES:
        raise files.refused_read(STDIN_NAME, "module", files.too_large(files.MAX_TEXT_BYTES,
                                                                       "module"))
    return data


def load_module(path: str, *, frontend: str | None = None, verify: bool = True) -> Module:
    """The module in `path` (read as `dlvm.ir.load_module` reads it), or IR text from stdin
    for `-`; verified unless told not."""
    if path != STDIO:
        return ir.load_module(path, frontend, verify=verify)
    module = ir.parse(read_stdin(), STDIN_NAME)
    if verify:
        ir.verify(module)
    return module


def check_output(path: str, inputs: Iterable[str | None] = ()) -> None:
    """Refuse an output that cannot be written (a directory, under a file, …) or that is
    one of `inputs`, before any work is done, rather than losing the work or the input."""
    if path == STDIO:
        return
    files.check_output(path, inputs=[p for p in inputs if p is not None and p != STDIO])


def write_text(path: str, text: str) -> None:
    """Write `text` to `path` atomically, or to stdout for `-`."""
    if path == STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    files.write_atomic(path, text)


def assignment(text: str, flag: str) -> tuple[str, Any]:
    """`KEY=VALUE` of an option such as `--set`, the value read by `toml_value`."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ir.DlvmError(f"{flag} '{text}': expected KEY=VALUE")
    try:
        return key.strip(), toml_value(raw)
    except ir.DlvmError as e:
        raise ir.DlvmError(f"{flag} {key.strip()}: {e}") from None


def toml_value(raw: str) -> Any:
    """A command-line value read as TOML (`3`, `0.5`, `true`, `[1, 2]`, `"x"`), else as a
    plain string; text that starts like a TOML string, array or table must be one."""
    text = raw.strip()
    try:
        doc = loads(f"v = {text}")
    except TomlError as e:
        if text[:1] in ('"', "'", "[", "{"):
            raise ir.DlvmError(f"invalid TOML value {quoted_value(text)}: {e.message}") from None
        return text
    if list(doc) != ["v"]:
        raise ir.DlvmError(f"invalid TOML value {quoted_value(text)}: more than one value")
    return doc["v"]


def quoted_value(text: str, width: int = 60) -> str:
    """A value as a message quotes it: its repr, shortened when long."""
    quoted = repr(text)
    return quoted if len(quoted) <= width else f"{quoted[:width - 5]}...{quoted[-1]}"
