"""dlvm-ir's own registrations: target `interp`, the `verify` and `strip-names` passes, the
`.dl` front end. (Its instructions are defined when `dlvm.ir` is imported.)

dlvm-ir registers through the same entry point as any third-party plugin.
"""

from __future__ import annotations

from .plugin import RegisterFrontend, RegisterPass, RegisterTarget, hookimpl


@hookimpl
def register_targets(register: RegisterTarget) -> None:
    register("interp", "dlvm.ir.interp:InterpTarget",
             "reference interpreter on numpy (the semantics every target matches)", priority=0)


@hookimpl
def register_passes(register: RegisterPass) -> None:
    register("verify", "dlvm.ir.builtin_passes:VerifyPass", "run the verifier; changes nothing")
    register("strip-names", "dlvm.ir.builtin_passes:StripNamesPass",
             "drop local value and block names, leaving positional ones")


@hookimpl
def register_frontends(register: RegisterFrontend) -> None:
    register("dl", "dlvm.ir.parser:parse_file", "DLVM textual IR", suffixes=(".dl",))
