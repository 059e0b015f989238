"""Passes and the pass manager.

A pass is a small dataclass whose fields are its options (settable from
pipeline text `name{key=value}` and from TOML). It runs on a module, or on
each function with a body (`FunctionPass`), and reports whether it
changed anything. The manager verifies after every pass by default, and
can print the IR after each pass, time passes and collect statistics.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, get_type_hints

from .core import Function, Module
from .diagnostics import DiagnosticError, DlvmError

REGISTERED_NAME = "_registered_name"  # the instance attribute `set_registered_name` sets


class PassError(DlvmError):
    """A pass failed, or left the module malformed."""


@dataclass
class PassContext:
    """What a running pass may report besides 'changed'."""

    stats: Counter[str] = field(default_factory=Counter)

    def stat(self, what: str, count: int = 1) -> None:
        """Count an event, e.g. `ctx.stat("instructions removed", 3)`."""
        if count:
            self.stats[what] += count


@dataclass
class Pass(ABC):
    """Base of module passes; subclasses are dataclasses whose fields are options."""

    name: ClassVar[str] = "pass"
    summary: ClassVar[str] = ""

    @abstractmethod
    def run(self, module: Module, ctx: PassContext) -> bool:
        """Transform `module`; returns whether anything changed."""

    @classmethod
    def option_types(cls) -> dict[str, Any]:
        hints = get_type_hints(cls)
        return {f.name: hints[f.name] for f in fields(cls)}

    @property
    def display_name(self) -> str:
        """The name statistics, timings and errors show: the registry name the pass was
        built from (`tropical:cse` for a plugin's `cse` that dlvm-opt's shadows), else its
        class's `name`."""
        registered: str | None = getattr(self, REGISTERED_NAME, None)
        return registered or self.name

    def describe(self) -> str:
        """The pass as pipeline text, with the options that differ from their defaults."""
        opts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.default is not MISSING:
                default = f.default
            elif f.default_factory is not MISSING:
                default = f.default_factory()
            else:
                default = MISSING
            if value != default:
                opts.append(f"{f.name}={format_option(value)}")
        return self.display_name + ("{" + " ".join(opts) + "}" if opts else "")


@dataclass
class FunctionPass(Pass):
    """A pass that runs on each function with a body, independently."""

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for fn in list(module.functions):
            if fn.blocks and self.run_on_function(fn, ctx):
                fn.invalidate()
                changed = True
        return changed

    @abstractmethod
    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        """Transform `fn` (a function with a body); returns whether anything changed."""


def set_registered_name(p: Pass, name: str) -> None:
    """Remember the registry name `p` was built from, for `Pass.display_name` (set
    whatever the pass's own `__setattr__`; a pass with `__slots__` keeps its class's name)."""
    with contextlib.suppress(AttributeError):
        object.__setattr__(p, REGISTERED_NAME, name)


def format_option(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(map(format_option, value))
    return str(value)


@dataclass
class PassRecord:
    """What one pass did in one pipeline run."""

    name: str
    changed: bool
    seconds: float
    stats: Counter[str]
    instructions_before: int
    instructions_after: int


def count_instructions(module: Module) -> int:
    return sum(len(b.instructions) for fn in module.functions for b in fn.blocks)


# Above this many instructions a module is verified once, after all its passes, unless
# asked for each pass: a verification costs ~10 µs an instruction, over a third of O3's
# time on a 100,000-instruction function when repeated after every pass.
VERIFY_EACH_LIMIT = 20_000


@dataclass
class PassManager:
    """Runs passes in order and verifies their output.

    `verify_each`: True verifies after each pass that changed the module (naming the pass
    that broke it); False never; None (the default) after each pass for modules up to
    `VERIFY_EACH_LIMIT` instructions and once at the end for larger ones."""

    passes: list[Pass]
    verify_each: bool | None = None
    print_after: Callable[[Pass, Module, bool], None] | None = None

    def run(self, module: Module) -> list[PassRecord]:
        """Run the passes in order, verifying as `verify_each` says (and once at the end if
        the last pass reported no change)."""
        if self.verify_each is None and count_instructions(module) > VERIFY_EACH_LIMIT:
            return self.run_verified_at_end(module)
        return self.run_each(module, self.verify_each is not False)

    def run_verified_at_end(self, module: Module) -> list[PassRecord]:
        records = self.run_each(module, False)
        if records:
            names = ", ".join(r.name for r in records)
            from .verifier import verify

            try:
                verify(module)
            except DiagnosticError as e:
                raise PassError(
                    f"the passes {names} produced malformed IR (a module of over "
                    f"{VERIFY_EACH_LIMIT:,} instructions is verified once, after its passes; "
                    f"verify after each to find the pass: `dlvm opt --verify-each`, or "
                    f"verify_each=True):\n{e.render(with_source=False)}") from None
        return records

    def run_each(self, module: Module, verify_each: bool) -> list[PassRecord]:
        records = []
        unverified = False  # a pass that reported no change left the module unverified
        for p in self.passes:
            ctx = PassContext()
            before = count_instructions(module)
            start = time.perf_counter()
            try:
                changed = bool(p.run(module, ctx))
            except DlvmError:
                raise
            except RecursionError:
                raise PassError(f"pass '{p.display_name}' exceeded the recursion limit") from None
            seconds = time.perf_counter() - start
            after = count_instructions(module)
            if changed:
                module.invalidate()
                for fn in module.functions:
                    fn.invalidate()
            records.append(PassRecord(p.describe(), changed, seconds, ctx.stats, before, after))
            if self.print_after is not None:
                self.print_after(p, module, changed)
            if verify_each and changed:
                self.verify(module, p.display_name)
            unverified = verify_each and not changed
        if unverified:  # an unchanged module needs no check, unless a pass misreported
            self.verify(module, records[-1].name)
        return records

    @staticmethod
    def verify(module: Module, after: str) -> None:
        """Verify `module`, blaming the pass `after` for any error."""
        from .verifier import verify

        try:
            verify(module)
        except DiagnosticError as e:
            raise PassError(f"pass '{after}' produced malformed IR:\n"
                            f"{e.render(with_source=False)}") from None
