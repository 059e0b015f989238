"""What a derivative rule sees: a builder, the primal values, and shape helpers.

The driver subclasses these contexts; rules use only what is defined here.
"""

from __future__ import annotations

from dlvm.ir import Builder, Module, Value
from dlvm.ir.builder import constant
from dlvm.ir.types import TensorType, TupleType, Type, scalar


def tensor_of(t: Type) -> TensorType:
    if not isinstance(t, TensorType):
        raise TypeError(f"expected a tensor type, found '{t}'")
    return t


class RuleContext:
    """Shared helpers; `b` inserts at the current point of the generated code."""

    def __init__(self, builder: Builder, module: Module) -> None:
        self.b = builder
        self.module = module

    def primal(self, v: Value) -> Value:
        """The value of primal `v` where the generated code is being inserted."""
        raise TypeError(f"{type(self).__name__} does not define primal()")

    def type_of(self, v: Value) -> TensorType:
        return tensor_of(self.module.resolve(v.type))

    def wants(self, v: Value) -> bool:
        """Whether a derivative of operand `v` is of use (reverse mode: `v` depends on a
        `wrt` argument); rules skip the contributions nobody would read."""
        return True

    def const(self, x: float, like: Value | Type) -> Value:
        """A scalar literal of `like`'s data type (it broadcasts against anything)."""
        t = like if isinstance(like, Type) else like.type
        return constant(x, scalar(tensor_of(self.module.resolve(t)).dtype))

    def zeros(self, like: Value) -> Value:
        """Zeros of primal `like`'s type, at its run-time shape when that is dynamic."""
        if isinstance(self.module.resolve(like.type), TupleType):
            return tuple_zeros(self, like)
        t = self.type_of(like)
        if all(d is not None for d in t.shape):
            return constant(0.0 if t.dtype.is_float else 0, t)
        p = self.primal(like)
        mask = self.b.equal(p, p)
        zero = self.const(0.0, t)
        return self.b.select(zero, zero, mask)

    def broadcast_to(self, x: Value, like: Value) -> Value:
        """`x` broadcast to primal `like`'s shape (`x + 0`, exact: adding 0 changes nothing)."""
        if self.module.resolve(x.type) == self.type_of(like):
            return x
        return self.b.add(x, self.zeros(like))

    def unbroadcast(self, adj: Value, like: Value) -> Value:
        """`adj` summed over the dimensions along which primal `like` was broadcast."""
        a, t = tensor_of(self.module.resolve(adj.type)), self.type_of(like)
        if a.shape == t.shape and all(d is not None for d in t.shape):
            return adj
        if not t.shape:
            if not a.shape:
                return adj
            return self.b.reduce(adj, "add", self.const(0.0, a), None)
        if a.rank != t.rank:
            raise TypeError(f"cannot unbroadcast '{a}' to '{t}'")
        axes: list[int] = []
        for i, (da, dt) in enumerate(zip(a.shape, t.shape, strict=True)):
            if dt == 1 and da != 1:
                axes.append(i)  # broadcast for sure (a dynamic `da` of 1 sums one element)
            elif dt is None and da != 1:
                return self.b.unbroadcast(adj, self.primal(like))  # known only at run time
        if not axes:
            return adj
        out = self.b.reduce(adj, "add", self.const(0.0, a), axes)
        for axis in axes:
            out = self.b.padShape(out, axis)
        return out


class AdjointContext(RuleContext):
    """For adjoint rules: `primal(v)` is available in the reverse sweep."""

    def element_adjoint(self, aggregate: Value, keys: list[Value | int], dy: Value) -> Value:
        """The adjoint of `aggregate` that is `dy` at `keys` and zero elsewhere (the
        contribution of `extract keys from aggregate`)."""
        return self.b.create("insert", dy, self.zeros(aggregate), keys)

    def call_adjoint(self, inst: Value, dy: Value) -> list[tuple[Value, Value]]:
        """The adjoints of an `apply`'s arguments (the driver generates the callee's gradient)."""
        raise TypeError(f"{type(self).__name__} does not define call_adjoint()")


class TangentContext(RuleContext):
    """For tangent rules: `tangent(v)` is the tangent of primal `v`, None when zero."""

    def tangent(self, v: Value) -> Value | None:
        raise TypeError(f"{type(self).__name__} does not define tangent()")

    def call_tangent(self, inst: Value) -> Value | None:
        raise TypeError(f"{type(self).__name__} does not define call_tangent()")


def tuple_zeros(c: RuleContext, like: Value) -> Value:
    """Zeros of a tuple-typed primal value, element by element."""
    from dlvm.ir import AggregateLiteral, LiteralValue
    t = c.module.resolve(like.type)
    assert isinstance(t, TupleType)
    elements = [tuple_element_zeros(c, like, i) for i in range(len(t.elements))]
    return LiteralValue(AggregateLiteral("tuple", tuple(elements)), t)


def tuple_element_zeros(c: RuleContext, like: Value, i: int) -> Value:
    """Zeros of element `i` of a tuple-typed primal value."""
    t = c.module.resolve(like.type)
    assert isinstance(t, TupleType)
    e = c.module.resolve(t.elements[i])
    if isinstance(e, TupleType):
        return tuple_zeros(c, c.b.extract(c.primal(like), keys=[i]))
    return _element_zeros(c, like, i, tensor_of(e))


def _element_zeros(c: RuleContext, like: Value, i: int, t: TensorType) -> Value:
    if all(d is not None for d in t.shape):
        return constant(0.0 if t.dtype.is_float else 0, t)
    p = c.b.extract(c.primal(like), keys=[i])
    zero = c.const(0.0, t)
    return c.b.select(zero, zero, c.b.equal(p, p))
