"""Which functions (and calls) may write memory, trap or do I/O.

Dead-code elimination and code motion may drop or move a call only when the
callee has no effects, so effects flow from callees to callers over the call
graph. The propagation starts from each function's own effects and only ever
adds effects, so it reaches the least fixed point even through recursion; a
worklist makes it linear in the size of the call graph.

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
from ..opdef import OpDef

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


_CALLERS: dict[OpDef, bool] = {}  # whether an instruction of the kind may call a function


def may_call(op: OpDef) -> bool:
    """Whether instructions of `op` may call a function: `apply`, and those with a combinator
    field. The others' callees need not be looked for, which passes ask about each
    instruction."""
    known = _CALLERS.get(op)
    if known is None:
        known = _CALLERS[op] = op.name == CALL_OPCODE or any(
            kind == "combinator" for _, kind in op.fields)
    return known


def called_values(inst: Instruction) -> list[Value | None]:
    """The values `inst` calls: an `apply`'s callee (None if missing), function combinators."""
    out: list[Value | None] = []
    if not may_call(inst.op):
        return out
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
        # each function's own effects and the module functions it calls
        self._local: dict[Function, tuple[FunctionEffects, list[Function]]] = {}
        for fn in module.functions:
            self._local[fn] = self._local_effects(fn)
            self._effects[fn] = self._local[fn][0]
        self._propagate()

    def _local_effects(self, fn: Function) -> tuple[FunctionEffects, list[Function]]:
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

    def _propagate(self) -> None:
        """Add each callee's effects to its callers, from the functions with effects upwards
        (a worklist: each function's effects grow at most three times)."""
        callers: dict[Function, list[Function]] = {fn: [] for fn in self._local}
        for fn, (_, calls) in self._local.items():
            for callee in calls:
                callers.setdefault(callee, []).append(fn)
        work = [fn for fn in self._local if not self._effects[fn].is_pure]
        while work:
            callee = work.pop()
            effects = self._effects[callee]
            for fn in callers.get(callee, ()):
                new = self._effects[fn] | effects
                if new != self._effects[fn]:
                    self._effects[fn] = new
                    work.append(fn)

    def updated(self, changed: set[Function]) -> SideEffects | None:
        """The analysis after the bodies of `changed` functions changed, or None when it must
        be computed again.

        The effects are the least solution of effects(f) = own(f) ∪ ⋃ effects(callees of f).
        The old solution stays the least one when each changed function keeps its own
        effects within its old total and still has them all (more constraints cannot lower a
        least solution, and the old one still satisfies them), adds only callees whose
        effects its old total covers, and drops only callees without effects (they added
        nothing to any step of the fixed-point iteration). Removing dead pure code, the
        common edit, changes nothing; anything else starts over."""
        if any(fn.module is not self.module or fn not in self._local for fn in changed):
            return None
        fresh: dict[Function, tuple[FunctionEffects, list[Function]]] = {}
        for fn in changed:
            own, calls = self._local_effects(fn)
            old_own, old_calls = self._local[fn]
            total = self._effects[fn]
            if (own | old_own) != own or (own | total) != total:
                return None
            old, new = set(old_calls), set(calls)
            if any(c not in self._effects or (self._effects[c] | total) != total
                   for c in new - old):
                return None
            if any(not self._effects[c].is_pure for c in old - new):
                return None
            fresh[fn] = own, calls
        self._local.update(fresh)
        copy = object.__new__(SideEffects)
        copy.module, copy._effects, copy._local = self.module, self._effects, self._local
        return copy

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
        op = inst.op
        if not may_call(op):
            return "side_effects" in op.traits or "may_trap" in op.traits
        return not self.instruction_effects(inst).is_pure

    def is_pure_call(self, inst: Instruction) -> bool:
        """Whether `inst` is an `apply` that may be removed when its result is unused."""
        return inst.op.name == CALL_OPCODE and self.instruction_effects(inst).is_pure
