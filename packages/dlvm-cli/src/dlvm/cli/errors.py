"""How the CLI turns exceptions into messages and exit codes.

Users see compiler-style lines, never a traceback: `FILE:LINE:COL: error: …`
for diagnostics, `dlvm: error: …` for other DLVM errors, and
`dlvm: internal error: …` for bugs. `--debug` or `DLVM_DEBUG=1` re-raises instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

DEBUG_ENV = "DLVM_DEBUG"


def debug_from_env() -> bool:
    """True when `DLVM_DEBUG` asks for tracebacks (any value but empty, 0, false, no, off)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def emit(line: str) -> None:
    """Write one message to stderr, looked up at call time so test runners capture it."""
    stream = sys.stderr
    stream.write(line + "\n")
    stream.flush()


def error(message: str) -> None:
    emit(f"dlvm: error: {message}")


def warning(message: str) -> None:
    emit(f"dlvm: warning: {message}")


def note(message: str) -> None:
    emit(f"dlvm: note: {message}")


def print_diagnostics(exc: Any) -> None:
    """Every diagnostic of a `DiagnosticError`, with source line and caret when located."""
    diagnostics = list(getattr(exc, "diagnostics", ()))
    if not diagnostics:
        error(str(exc) or type(exc).__name__)
        return
    for d in diagnostics:
        if d.location is None:
            emit(f"dlvm: {d.severity}: {d.message}")
        else:
            emit(d.render())


def report(exc: BaseException) -> int:
    """Print `exc` for a user and return the exit code; never raises."""
    try:
        from dlvm.ir import DiagnosticError, DlvmError, NotedError
    except Exception:  # dlvm.ir itself is broken: all we can say is what went wrong
        return internal_error(exc)
    if isinstance(exc, DiagnosticError):
        print_diagnostics(exc)
    elif isinstance(exc, DlvmError):
        message = exc.message if isinstance(exc, NotedError) else str(exc)
        error(message or type(exc).__name__)
        note_failed_plugins(exc)
    elif isinstance(exc, MemoryError):
        out_of_memory(exc)
    else:
        return internal_error(exc)
    return EXIT_FAILURE


def out_of_memory(exc: MemoryError) -> None:
    """A huge tensor or file is the input's fault, not a bug: one line, like any error."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    error(f"out of memory: {detail}" if detail else "out of memory")


def interrupted() -> int:
    """Ctrl-C: one line saying so (the shell's `^C` says nothing of what stopped), and the
    exit status of a process ended by SIGINT."""
    note("interrupted")
    return EXIT_INTERRUPTED


def internal_error(exc: BaseException) -> int:
    message = str(exc).strip()
    detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    emit(f"dlvm: internal error: {detail} (re-run with --debug for a traceback)")
    return EXIT_FAILURE


@contextlib.contextmanager
def warnings_reported() -> Iterator[None]:
    """Show warnings raised while a command works (numpy's overflow in `exp`, …) as one
    `dlvm: warning:` line each, once, never with a file and line of DLVM's own code."""
    seen: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = str(message).strip().splitlines()[0] if str(message).strip() else category.__name__
        if text not in seen:
            seen.add(text)
            warning(text)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def note_failed_plugins(exc: BaseException | None = None) -> None:
    """An unknown name may come from a plugin that failed to load: say so, in a
    `dlvm: note: …` line per plugin. With `exc`, its notes (a `dlvm.ir.plugin.NotedError`'s,
    which dlvm-ir builds for every failed lookup); without, the registry's failed plugins."""
    if exc is not None:
        for line in getattr(exc, "notes", ()):
            note(line)
        return
    try:
        from dlvm.ir.plugin import failed_plugin_notes, registry

        lines = failed_plugin_notes(registry())
    except Exception:
        return
    for line in lines:
        note(line)
