"""Which functions (and calls) may write memory, trap or do I/O.

Dead-code elimination and code motion may drop or move a call only when the
callee has no effects, so effects flow from callees to callers over the call
graph. The propagation starts from "no effects" and only ever adds effects,
so it reaches a fixed point even through recursion; unlike the original
DLVM's version, the `changed` flag is reset on every round, so it stops.

What is assumed about callees:
  - a function of the module: its own effects, computed here;
  - a gradient declaration (`DerivativeDecl`), to be generated later: pure;
  - an `extern` declaration, a function of another module, a bodiless
    definition, or an indirect callee (a value, not a function): everything.
A function used as a reduction combinator (`reduce %x by @f …`) is called too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import DerivativeDecl, Function, Instruction, LiteralValue, Module, Value

CALL_OPCODE = "apply"


@dataclass(frozen=True, slots=True)
class FunctionEffects:
    """What executing a function (or one instruction) may do besides computing values."""

    may_write_memory: bool = False
    may_trap: bool = False
    has_io: bool = False

    def __or__(self, other: FunctionEffects) -> FunctionEffects:
        return FunctionEffects(
            self.may_write_memory or other.may_write_memory,
            self.may_trap or other.may_trap,
            self.has_io or other.has_io,
        )

    @property
    def is_pure(self) -> bool:
        return not (self.may_write_memory or self.may_trap or self.has_io)


NO_EFFECTS = FunctionEffects()
ALL_EFFECTS = FunctionEffects(may_write_memory=True, may_trap=True, has_io=True)


def trait_effects(inst: Instruction) -> FunctionEffects:
    """The effects an instruction's own traits declare."""
    return FunctionEffects(
        may_write_memory=inst.has_trait("side_effects"), may_trap=inst.has_trait("may_trap")
    )


def called_values(inst: Instruction) -> list[Value | None]:
    """The values `inst` calls: an `apply`'s callee (None if missing), function combinators."""
    out: list[Value | None] = []
    if inst.op.name == CALL_OPCODE:
        callee = inst.fields.get("callee")
        out.append(callee if isinstance(callee, Value) else None)
    for name, kind in inst.op.fields:
        x = inst.fields.get(name)
        if kind == "combinator" and isinstance(x, Value) and not isinstance(x, LiteralValue):
            out.append(x)
    return out


class SideEffects:
    """Effects of every function of a module: `module.analysis(SideEffects)`."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self._effects: dict[Function, FunctionEffects] = {}
        callees: dict[Function, list[Function]] = {}
        for fn in module.functions:
            self._effects[fn], callees[fn] = self._local(fn)
        self._propagate(callees)

    def _local(self, fn: Function) -> tuple[FunctionEffects, list[Function]]:
        """Effects of `fn` itself, and the module functions it calls."""
        if isinstance(fn.declaration, DerivativeDecl):
            return NO_EFFECTS, []
        if fn.declaration is not None or not fn.blocks:
            return ALL_EFFECTS, []
        effects, calls = NO_EFFECTS, []
        for inst in fn.instructions():
            own, known = self._direct(inst)
            effects |= own
            calls.extend(known)
        return effects, list(dict.fromkeys(calls))

    def _direct(self, inst: Instruction) -> tuple[FunctionEffects, list[Function]]:
        """Effects of `inst` apart from its calls to module functions, and those functions."""
        effects, known = trait_effects(inst), []
        for callee in called_values(inst):
            if isinstance(callee, Function) and callee.module is self.module:
                known.append(callee)
            elif isinstance(callee, Function) and isinstance(callee.declaration, DerivativeDecl):
                continue
            else:
                effects = ALL_EFFECTS
        return effects, known

    def _propagate(self, callees: dict[Function, list[Function]]) -> None:
        """Add each callee's effects to its callers until nothing changes."""
        changed = True
        while changed:
            changed = False
            for fn, calls in callees.items():
                new = self._effects[fn]
                for callee in calls:
                    new |= self._effects[callee]
                if new != self._effects[fn]:
                    self._effects[fn] = new
                    changed = True

    def of(self, fn: Function) -> FunctionEffects:
        """The effects of calling `fn` (everything, for a function not in the module)."""
        effects = self._effects.get(fn)
        if effects is not None:
            return effects
        return NO_EFFECTS if isinstance(fn.declaration, DerivativeDecl) else ALL_EFFECTS

    def instruction_effects(self, inst: Instruction) -> FunctionEffects:
        """The effects of executing `inst`, its calls included."""
        effects, known = self._direct(inst)
        for callee in known:
            effects |= self.of(callee)
        return effects

    def instruction_has_effects(self, inst: Instruction) -> bool:
        """Whether `inst` may do anything besides computing its result.

        Terminators have no effects by this measure; passes keep them anyway.
        """
        return not self.instruction_effects(inst).is_pure

    def is_pure_call(self, inst: Instruction) -> bool:
        """Whether `inst` is an `apply` that may be removed when its result is unused."""
        return inst.op.name == CALL_OPCODE and self.instruction_effects(inst).is_pure
