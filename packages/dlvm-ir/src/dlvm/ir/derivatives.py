"""The type rules of derivative declarations.

`[gradient @f (from S)? (wrt i…)? (keeping k…)? seedable?]` (reverse mode)
declares a function of type `(args…[, seed]) -> (d_wrt…, kept…)`: the
derivatives come first, then the kept outputs, always as a tuple.

`[tangent @f (from S)? (wrt i…)? (keeping k…)?]` (forward mode) declares
`(args…, t_wrt…) -> (t_out, kept…)`: one tangent argument per `wrt`
argument after the primal arguments; the tangent of output S first.

The verifier checks a declaration against its rule; `dlvm-ad` builds the body.
"""

from __future__ import annotations

from .core import DerivativeDecl, Module
from .opdef import TypeRuleError
from .types import FunctionType, TupleType, Type, is_differentiable


def outputs_of(ftype: FunctionType) -> tuple[Type, ...]:
    """A function's outputs: the tuple's elements, or its single result."""
    r = ftype.result
    if isinstance(r, TupleType):
        return r.elements
    return (r,)


def differentiated_output(decl: DerivativeDecl, ftype: FunctionType) -> Type:
    outputs = outputs_of(ftype)
    if isinstance(ftype.result, TupleType):
        if decl.from_index is None:
            raise TypeRuleError(
                f"'from' is required: the function returns a tuple of {len(outputs)} values")
        if not 0 <= decl.from_index < len(outputs):
            raise TypeRuleError(f"'from {decl.from_index}' is out of range: the function "
                                f"returns {len(outputs)} values")
        out = outputs[decl.from_index]
    else:
        if decl.from_index is not None:
            raise TypeRuleError("'from' needs a function that returns a tuple")
        out = outputs[0]
    if not is_differentiable(out):
        raise TypeRuleError(f"output of type '{out}' is not differentiable "
                            "(it must be a floating-point tensor)")
    return out


def wrt_indices(decl: DerivativeDecl, ftype: FunctionType, module: Module | None = None
                ) -> tuple[int, ...]:
    """The differentiated arguments; every float tensor argument when `wrt` is absent
    (a tuple of tensors is differentiated when `wrt` names it)."""
    args = ftype.arguments
    if decl.wrt is None:
        return tuple(i for i, t in enumerate(args) if is_differentiable(t))
    seen: set[int] = set()
    for i in decl.wrt:
        if not 0 <= i < len(args):
            raise TypeRuleError(f"'wrt {i}' is out of range: the function takes "
                                f"{len(args)} arguments")
        if i in seen:
            raise TypeRuleError(f"'wrt' lists argument {i} twice")
        if not differentiable_argument(args[i], module):
            raise TypeRuleError(f"argument {i} of type '{args[i]}' is not differentiable")
        seen.add(i)
    return tuple(decl.wrt)


def differentiable_argument(t: Type, module: Module | None = None) -> bool:
    """A float tensor, or a tuple of them (nested, through aliases): a model's parameters
    packed in one value, whose derivative is the tuple of its elements' derivatives."""
    if module is not None:
        t = module.resolve_deep(t)
    if isinstance(t, TupleType):
        return bool(t.elements) and all(differentiable_argument(e) for e in t.elements)
    return is_differentiable(t)


def gradient_type(decl: DerivativeDecl, ftype: FunctionType, module: Module | None = None
                  ) -> FunctionType:
    """The type a gradient (or tangent) declaration must have; raises TypeRuleError."""
    if module is not None:
        args = tuple(module.resolve(t) for t in ftype.arguments)
        ftype = FunctionType(args, module.resolve(ftype.result))
    seed = differentiated_output(decl, ftype)
    wrt = wrt_indices(decl, ftype, module)
    outputs = outputs_of(ftype)
    seen: set[int] = set()
    for k in decl.keeping:
        if not 0 <= k < len(outputs):
            raise TypeRuleError(f"'keeping {k}' is out of range: the function returns "
                                f"{len(outputs)} value{'s' if len(outputs) != 1 else ''}")
        if k in seen:
            raise TypeRuleError(f"'keeping' lists output {k} twice")
        seen.add(k)
    if decl.kind == "tangent":
        if decl.seedable:
            raise TypeRuleError("'seedable' applies to gradients, not to tangents")
        tangents = tuple(ftype.arguments[i] for i in wrt)
        kept = tuple(outputs[k] for k in decl.keeping)
        return FunctionType(ftype.arguments + tangents, TupleType((seed, *kept)))
    arguments = ftype.arguments + ((seed,) if decl.seedable else ())
    results = tuple(ftype.arguments[i] for i in wrt) + tuple(outputs[k] for k in decl.keeping)
    return FunctionType(arguments, TupleType(results))
