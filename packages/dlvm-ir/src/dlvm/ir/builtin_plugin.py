"""dlvm-ir's own registrations: target `interp`, the `verify` pass, the `.dl` front end.

dlvm-ir registers through the same entry point as any third-party plugin.
"""

from __future__ import annotations

from collections.abc import Callable

from .plugin import hookimpl


@hookimpl
def register_targets(register: Callable[..., None]) -> None:
    register("interp", "dlvm.ir.interp:InterpTarget",
             "reference interpreter on numpy (the semantics every target matches)", priority=0)


@hookimpl
def register_passes(register: Callable[..., None]) -> None:
    register("verify", "dlvm.ir.builtin_passes:VerifyPass", "run the verifier; changes nothing")
    register("strip-names", "dlvm.ir.builtin_passes:StripNamesPass",
             "drop local value and block names, leaving positional ones")


@hookimpl
def register_frontends(register: Callable[..., None]) -> None:
    register("dl", "dlvm.ir.parser:parse_file", "DLVM textual IR", suffixes=(".dl",))
