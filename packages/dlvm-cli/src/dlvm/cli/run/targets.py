"""Target options, from a pipeline file or the command line, checked before any work.

A target checks its own options when it is created, so creating it once up front turns a
wrong option (`seed = -1`, `timeout = "abc"`, an unknown name) into an error that names
the target and the option, instead of a failure after the module is read and optimized.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import dlvm.ir as ir


class TargetOptionError(ir.DlvmError):
    """A target refused its options; `option` is the one it named, when it named one."""

    def __init__(self, message: str, option: str | None) -> None:
        super().__init__(message)
        self.option = option


def check_target_options(target: str, options: Mapping[str, Any]) -> None:
    """Create `target` with `options` once; raises TargetOptionError if it refuses them."""
    try:
        ir.registry().make_target(target, **options)
    except ir.DlvmError as e:
        message = str(e)
        if f"'{target}'" not in message:
            message = f"target '{target}': {message.replace('target option', 'option', 1)}"
        raise TargetOptionError(message, option_named(message, options)) from None


def option_named(message: str, options: Mapping[str, Any]) -> str | None:
    """The first option of `options` that `message` quotes."""
    for quoted in re.findall(r"'([^']+)'", message):
        if quoted in options:
            return str(quoted)
    return None


def takes_option(target: str, option: str) -> bool:
    """Whether target `target` is created with an `option` parameter (or any keyword)."""
    factory = ir.registry().entry("target", target).load()
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to read: let the target decide
        return True
    return option in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
