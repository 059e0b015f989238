"""NNKit's errors: one line each, located at the line of the user's code that caused it.

`StagingError` is the base: a staged program that does not type-check. A public function
or class given a wrong argument raises `NNKitTypeError` (a value of the wrong kind) or
`NNKitValueError` (the right kind, a bad value); they are `StagingError`s, so DLVM's
commands print them as one-line errors, and also `TypeError`/`ValueError`, as Python code
expects of a wrong argument.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dlvm.ir as ir
from dlvm.ir import DlvmError

# frames in these folders (or modules) are NNKit's and DLVM's own, never the place of a
# user's mistake; the module names cover code they generate (a dataclass's `__init__`)
_PACKAGE_DIRS = (str(Path(__file__).resolve().parent), str(Path(ir.__file__).resolve().parent))
_PACKAGE_MODULES = ("dlvm.nnkit.", "dlvm.ir.")


class StagingError(DlvmError):
    """A staged program that does not type-check, located in the user's code."""


class NNKitTypeError(StagingError, TypeError):
    """An argument of the wrong kind: a string where a number is expected, …"""


class NNKitValueError(StagingError, ValueError):
    """An argument of the right kind with a bad value: a negative size, an axis out of
    range, …"""


class NNKitAttributeError(StagingError, AttributeError):
    """An attribute a staged tensor does not have (an `AttributeError`, so `hasattr` and
    `getattr(x, name, default)` keep working)."""


def user_location() -> str:
    """`file:line` of the innermost frame outside NNKit and dlvm-ir (the user's code)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        path = filename if filename.startswith("<") else str(Path(filename).resolve())
        module = str(frame.f_globals.get("__name__", ""))
        if not path.startswith(_PACKAGE_DIRS) and not module.startswith(_PACKAGE_MODULES):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


def type_error(message: str) -> NNKitTypeError:
    return NNKitTypeError(f"{user_location()}: error: {message}")


def value_error(message: str) -> NNKitValueError:
    return NNKitValueError(f"{user_location()}: error: {message}")
