"""Reading modules (from files, front ends or stdin), command-line values, and writing outputs.

Every failure here is a `DlvmError` with a one-line message, so commands
need no error handling of their own.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def load_module(path: str, *, frontend: str | None = None, verify: bool = True) -> Module:
    """The module in `path` (read as `dlvm.ir.load_module` reads it), or IR text from stdin
    for `-`; verified unless told not."""
    if path != STDIO:
        return ir.load_module(path, frontend, verify=verify)
    module = ir.parse(read_stdin(), STDIN_NAME)
    if verify:
        ir.verify(module)
    return module


def check_output(path: str) -> None:
    """Refuse an output that cannot be written (a directory, under a file, …) before any
    work is done, rather than losing the work when writing it fails."""
    if path == STDIO:
        return
    from dlvm.cli.run.files import output_problem

    problem = output_problem(Path(path))
    if problem is not None:
        raise ir.DlvmError(f"cannot write '{path}': {problem}")


def write_text(path: str, text: str) -> None:
    """Write `text` to `path` atomically, or to stdout for `-`."""
    if path == STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from dlvm.cli.run.files import save_text

    save_text(Path(path), text)


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
        doc = tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError as e:
        if text[:1] in ('"', "'", "[", "{"):
            reason = str(e).split(" (at ")[0]
            raise ir.DlvmError(f"invalid TOML value {text!r}: {reason}") from None
        return text
    if list(doc) != ["v"]:
        raise ir.DlvmError(f"invalid TOML value {text!r}: more than one value")
    return doc["v"]
