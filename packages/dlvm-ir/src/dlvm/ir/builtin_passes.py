"""Passes that belong to the IR itself rather than to an optimizer."""

from __future__ import annotations

from dataclasses import dataclass

from .core import Function, Module
from .passes import FunctionPass, Pass, PassContext


@dataclass
class VerifyPass(Pass):
    """Run the verifier as a pipeline step (useful between passes under `verify_each=false`)."""

    name = "verify"
    summary = "run the verifier"

    def run(self, module: Module, ctx: PassContext) -> bool:
        from .verifier import verify

        verify(module)
        return False


@dataclass
class StripNamesPass(FunctionPass):
    """Drop local names so the printer uses positional ones (`%0.1`, `%1^0`, `'2`)."""

    name = "strip-names"
    summary = "drop local value and block names"
    keep_arguments: bool = False

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        changed = False
        for b in fn.blocks:
            if b.name is not None:
                b.name = None
                changed = True
            values = list(b.instructions) + ([] if self.keep_arguments else list(b.arguments))
            for v in values:
                if v.name is not None:
                    v.name = None
                    ctx.stat("names removed")
                    changed = True
        return changed
