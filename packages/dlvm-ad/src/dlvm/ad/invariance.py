"""Shifts that nothing depends on: values whose derivative is exactly zero, found before AD.

Softmax, log-softmax and logsumexp subtract a shift m (usually the row maximum) before
`exp`, so that it cannot overflow:

    z = x − m,   S = Σₖ exp(z),   log-softmax = z − log S,   softmax = exp(z) / S,
    logsumexp = log S + m.

Each of these is *invariant* under m → m + δ for any δ constant along the summed axes k:
z becomes z − δ, exp(z) becomes exp(z)·e^−δ, S becomes S·e^−δ (δ factors out of a sum
along axes it does not vary on), log S becomes log S − δ, and so z − log S, exp(z)/S and
log S + m are unchanged, exactly (in real arithmetic). So if everything computed from m is
such an invariant — every other value on the way (z, exp z, S, log S) being used only on
the way — the loss does not depend on m at all, ∂loss/∂m = 0, and by the chain rule the
derivative with respect to x is the one computed with m held constant. AD then treats m as a
constant (`activity.varied_values`): the max's backward pass (an argmax mask, a tie count
and a correction whose sum is zero up to rounding) is never written, and the derivative
changes only by that rounding. Forward mode is just as exact: the tangents of z, exp z, S
and log S change, but only the invariants, which do not change, are used.

This is decided on the primal, where the invariance is a structural fact, rather than on
the gradient after the fact, where the zero is an identity between sums
(Σₖ (g − exp(z)·Σₖg / S) = 0 because S = Σₖ exp z) that no local rewrite can see.

The analysis follows m → m + δ symbolically through the instructions that use it, in
program order, as one of two effects on each value v (δ broadcast to v's layout):
`add a` (v + a·δ) or `mul a` (v·e^(a·δ)); a value whose coefficient is 0 is invariant and
its users are free. Any other use of a value that m changes (a return, a call, a branch, a
reduction along an axis δ varies on, another block) means the derivative may not be zero,
and m stays differentiable.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from dlvm.ir import Function, Instruction, Module, Value
from dlvm.ir.analysis import UseDefInfo
from dlvm.ir.patterns import splat_value
from dlvm.ir.types import TensorType

from .rules import NONDIFFERENTIABLE

# instructions followed from one shift before giving up (a softmax needs fewer than 10)
MAX_FOLLOWED = 256
SHAPE_CASTS = ("padShape", "squeezeShape")

# Which axis of δ each axis of a value varies along (None: δ is constant along it).
Layout = tuple[int | None, ...]


@dataclass(frozen=True)
class Effect:
    """What m → m + δ does to a value: `add` v + coef·δ, `mul` v·e^(coef·δ)."""

    kind: str
    coef: int
    layout: Layout


def invariant_shifts(fn: Function, module: Module) -> set[Value]:
    """The instructions of `fn` that nothing it returns depends on (see the module
    docstring): AD treats them as constants."""
    if not fn.blocks:
        return set()
    usedef = UseDefInfo(fn)
    order: dict[Instruction, tuple[int, int]] = {}
    for b, block in enumerate(fn.blocks):
        for i, inst in enumerate(block.instructions):
            order[inst] = (b, i)
    return {m for m in order if is_candidate(m, usedef, module)
            and ShiftAnalysis(m, usedef, order, module).invariant()}


def is_candidate(m: Instruction, usedef: UseDefInfo, module: Module) -> bool:
    """A float tensor subtracted as a shift (itself, or reshaped by unit dimensions)."""
    t = module.resolve(m.type)
    if not isinstance(t, TensorType) or not t.dtype.is_float or m.opcode in NONDIFFERENTIABLE:
        return False
    seen = [m]
    for v in seen:
        for u in usedef.users(v):
            if u.opcode == "subtract" and u.fields.get("rhs") is v:
                return True
            if u.opcode in SHAPE_CASTS and len(seen) < 8:
                seen.append(u)
    return False


class ShiftAnalysis:
    """Follows m → m + δ through the users of m (see the module docstring)."""

    def __init__(self, m: Instruction, usedef: UseDefInfo,
                 order: dict[Instruction, tuple[int, int]], module: Module) -> None:
        self.m, self.usedef, self.order, self.module = m, usedef, order, module
        self.effects: dict[Value, Effect] = {}

    def invariant(self) -> bool:
        m = self.m
        t = self.tensor(m)
        if t is None:
            return False
        self.effects[m] = Effect("add", 1, tuple(range(t.rank)))
        block = self.order[m][0]
        queue: list[tuple[tuple[int, int], int, Instruction]] = []
        queued: set[Instruction] = set()

        def follow(v: Value) -> bool:
            for u in self.usedef.users(v):
                if u in queued or self.harmless(u):
                    continue
                if u not in self.order or self.order[u][0] != block:
                    return False  # another block (or a use outside the function's body)
                queued.add(u)
                heapq.heappush(queue, (self.order[u], id(u), u))
            return len(queued) <= MAX_FOLLOWED

        if not follow(m):
            return False
        # in program order, so each instruction sees the effects on all its operands
        while queue:
            _, _, inst = heapq.heappop(queue)
            effect = self.transfer(inst)
            if effect is None:
                return False
            if effect.coef:  # changed: its users must be followed too
                self.effects[inst] = effect
                if not follow(inst):
                    return False
        return True

    # ------------------------------------------------------------ helpers

    def tensor(self, v: Value) -> TensorType | None:
        t = self.module.resolve(v.type)
        return t if isinstance(t, TensorType) else None

    def harmless(self, u: Instruction) -> bool:
        """A use through which no derivative flows: a comparison, a size, an integer."""
        if u.opcode in NONDIFFERENTIABLE:
            return True
        t = self.tensor(u)
        return t is not None and not t.dtype.is_float and not u.targets and \
            u.opcode not in ("return", "store", "push", "apply")

    def effect_of(self, v: Value, rank: int) -> tuple[bool, Effect | None]:
        """(whether it can be followed, the effect) on operand `v` broadcast to `rank` axes:
        None if m does not change it."""
        e = self.effects.get(v)
        if e is None or len(e.layout) == rank:
            return True, e
        if not e.layout:  # a scalar: δ is the same along every axis
            return True, Effect(e.kind, e.coef, (None,) * rank)
        return False, None

    # ------------------------------------------------------------ transfer functions

    def transfer(self, inst: Instruction) -> Effect | None:
        """The effect on `inst`'s result, or None where it is not one of the two kinds."""
        t = self.tensor(inst)
        if t is None or not t.dtype.is_float:
            return None
        op = inst.opcode
        if op in ("add", "subtract", "multiply", "divide"):
            return self.binary(op, inst, t.rank)
        x = self.effects.get(inst.fields.get("x"))  # type: ignore[arg-type]
        if x is None:
            return None  # m reaches it through an operand it cannot follow
        if op == "negate":
            return Effect(x.kind, -x.coef if x.kind == "add" else x.coef, x.layout)
        if op == "exp" and x.kind == "add":  # e^(v + aδ) = e^v · e^(aδ)
            return Effect("mul", x.coef, x.layout)
        if op == "log" and x.kind == "mul":  # log(v · e^(aδ)) = log v + aδ
            return Effect("add", x.coef, x.layout)
        if op == "padShape":
            axis = int(inst.fields["axis"])
            return Effect(x.kind, x.coef, (*x.layout[:axis], None, *x.layout[axis:]))
        if op == "squeezeShape":
            axis = int(inst.fields["axis"])
            if x.layout[axis] is not None:
                return None
            return Effect(x.kind, x.coef, x.layout[:axis] + x.layout[axis + 1:])
        if op == "reduce":
            return self.reduce(inst, x)
        return None

    def reduce(self, inst: Instruction, x: Effect) -> Effect | None:
        """Σₖ v·e^(aδ) = (Σₖ v)·e^(aδ) when δ does not vary along the axes k and the sum
        starts at 0."""
        dims = inst.fields.get("dims")
        axes = range(len(x.layout)) if dims is None else [int(d) for d in dims]
        if x.kind != "mul" or inst.fields.get("combinator") != "add" or \
                splat_value(inst.fields["init"], self.module) != 0 or \
                any(x.layout[a] is not None for a in axes):
            return None
        return Effect("mul", x.coef, tuple(d for a, d in enumerate(x.layout) if a not in axes))

    def binary(self, op: str, inst: Instruction, rank: int) -> Effect | None:
        ok_lhs, lhs = self.effect_of(inst.fields["lhs"], rank)
        ok_rhs, rhs = self.effect_of(inst.fields["rhs"], rank)
        if not (ok_lhs and ok_rhs):
            return None
        kind = "add" if op in ("add", "subtract") else "mul"
        sign = -1 if op in ("subtract", "divide") else 1
        if lhs is not None and rhs is not None:
            if lhs.kind != kind or rhs.kind != kind or lhs.layout != rhs.layout:
                return None
            return Effect(kind, lhs.coef + sign * rhs.coef, lhs.layout)
        one = lhs if lhs is not None else rhs
        if one is None or one.kind != kind:
            return None  # (v + aδ)·w or v·e^(aδ) + w: not one of the two kinds
        return Effect(kind, one.coef if one is lhs else sign * one.coef, one.layout)


__all__ = ["invariant_shifts"]
