"""TOML text as the command line and pipeline files give it, read with one-line errors.

tomllib reports a syntax error with its place (`(at line 3, column 5)`), which callers show
as `FILE:LINE:COL`; it recurses into nested arrays and tables, so a document nested
thousands deep is refused here in words instead of a RecursionError.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import dlvm.ir as ir

PLACE = re.compile(r"\(at line (\d+), column (\d+)\)")
TOO_DEEP = "arrays or tables are nested too deeply"


class TomlError(ir.DlvmError):
    """Invalid TOML: the message, and where tomllib found the problem when it says."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None
                 ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


def loads(text: str) -> dict[str, Any]:
    """The document in `text`; raises `TomlError`."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        at = PLACE.search(str(e))
        message = str(e).split(" (at ")[0]
        raise TomlError(message, int(at[1]) if at else None, int(at[2]) if at else None
                        ) from None
    except RecursionError:
        raise TomlError(TOO_DEEP) from None
