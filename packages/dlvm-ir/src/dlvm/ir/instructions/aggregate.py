"""Literals, aggregates (`extract`/`insert`), calls (`apply`) and builtin intrinsics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import (
    AggregateLiteral,
    DenseLiteral,
    FieldKey,
    Instruction,
    KeywordLiteral,
    Literal,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from ..opdef import define
from ..runtime import (
    ExecutionError,
    Pointer,
    format_np_shape,
    get_element,
    int_range,
    set_element,
)
from ..types import (
    INVALID,
    ArrayType,
    BoxType,
    EnumDecl,
    FunctionType,
    NominalType,
    PointerType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
    broadcast_shapes,
    scalar,
    types_compatible,
)
from .common import fail, float_tensor, numeric_tensor, resolved, result_array

# ---------------------------------------------------------------- literal conformance


def check_literal(lit: Literal, t: Type, m: Module | None) -> None:
    """Raise TypeRuleError unless literal `lit` can have type `t`."""
    rt = resolved(t, m)
    if isinstance(lit, ScalarLiteral):
        if not isinstance(rt, TensorType):
            fail(f"scalar literal cannot have type '{t}'")
        v = lit.value
        if isinstance(v, bool):
            if not rt.dtype.is_bool:
                fail(f"boolean literal cannot have type '{t}'")
        elif isinstance(v, int):
            if not rt.dtype.is_numeric:
                fail(f"integer literal cannot have type '{t}'")
            if rt.dtype.is_int and not int_range(rt.dtype)[0] <= v <= int_range(rt.dtype)[1]:
                fail(f"integer literal {v} does not fit in '{rt.dtype}'")
        elif not rt.dtype.is_float:
            fail(f"floating-point literal cannot have type '{t}'")
        return
    if isinstance(lit, KeywordLiteral):
        if lit.keyword == "null" and not isinstance(rt, PointerType | BoxType | FunctionType):
            fail(f"'null' needs a pointer, box or function type, found '{t}'")
        if lit.keyword == "zero" and not (
            isinstance(rt, TensorType | TupleType | ArrayType | NominalType) and has_zero(rt, m)
        ):
            fail(f"'zero' cannot have type '{t}' (it has no zero value)")
        return
    if isinstance(lit, DenseLiteral):
        if not isinstance(rt, TensorType) or not rt.is_static:
            fail(f"a dense literal needs a tensor type of static shape, found '{t}'")
        size = max(rt.dtype.bits // 8, 1) * (rt.count or 0)
        if len(lit.data) != size:
            fail(f"a dense literal of '{t}' holds {size} bytes, found {len(lit.data)}")
        return
    assert isinstance(lit, AggregateLiteral)
    elements = lit.elements
    if lit.kind == "tensor":
        if not isinstance(rt, TensorType) or rt.rank == 0:
            fail(f"tensor literal needs a tensor type of rank ≥ 1, found '{t}'")
        if rt.shape[0] is not None and len(elements) != rt.shape[0]:
            fail(f"tensor literal has {len(elements)} elements, but '{t}' needs {rt.shape[0]}")
        _check_elements(elements, [rt.with_shape(rt.shape[1:])] * len(elements), m)
    elif lit.kind == "tuple":
        if not isinstance(rt, TupleType) or len(rt.elements) != len(elements):
            fail(f"tuple literal of {len(elements)} elements cannot have type '{t}'")
        _check_elements(elements, rt.elements, m)
    elif lit.kind == "array":
        if not isinstance(rt, ArrayType) or rt.count != len(elements):
            fail(f"array literal of {len(elements)} elements cannot have type '{t}'")
        _check_elements(elements, [rt.element] * len(elements), m)
    elif lit.kind == "struct":
        decl = _decl(rt, m)
        if not isinstance(decl, StructDecl):
            fail(f"struct literal cannot have type '{t}'")
        if list(lit.keys) != [k for k, _ in decl.fields]:
            fail(f"struct literal must list the fields of '{t}' in order: "
                 + ", ".join(f"#{k}" for k, _ in decl.fields))
        _check_elements(elements, [ft for _, ft in decl.fields], m)
    else:  # enum
        decl = _decl(rt, m)
        if not isinstance(decl, EnumDecl):
            fail(f"enum literal cannot have type '{t}'")
        types = decl.case_types(lit.keys[0])
        if types is None:
            fail(f"'{t}' has no case '?{lit.keys[0]}'")
        if len(types) != len(elements):
            fail(f"case '?{lit.keys[0]}' takes {len(types)} values, found {len(elements)}")
        _check_elements(elements, types, m)


def has_zero(t: Type, m: Module | None, seen: frozenset[str] = frozenset()) -> bool:
    """Tensors, pointers, boxes and functions have a zero (or null) value, and so do
    tuples, arrays and structs of them; enums, opaque types and `stack` do not."""
    t = resolved(t, m)
    if isinstance(t, TensorType | PointerType | BoxType | FunctionType):
        return True
    if isinstance(t, TupleType):
        return all(has_zero(e, m, seen) for e in t.elements)
    if isinstance(t, ArrayType):
        return has_zero(t.element, m, seen)
    if isinstance(t, NominalType) and m is None:
        return True  # undecidable without the module's declarations
    decl = _decl(t, m)
    if isinstance(decl, StructDecl) and decl.name not in seen:
        return all(has_zero(ft, m, seen | {decl.name}) for _, ft in decl.fields)
    return False


def _decl(t: Type, m: Module | None) -> Any:
    if isinstance(t, NominalType) and m is not None:
        return m.type_decls.get(t.name)
    return None


def _check_elements(elements: Sequence[Value], types: Sequence[Type], m: Module | None) -> None:
    for e, et in zip(elements, types, strict=True):
        if not _same(e.type, et, m):
            fail(f"literal element has type '{e.type}', expected '{et}'")
        if isinstance(e, LiteralValue):
            check_literal(e.literal, e.type, m)


def _same(a: Type, b: Type, m: Module | None) -> bool:
    return a == b or resolved(a, m) == resolved(b, m)


def _literal_rule(inst: Instruction, m: Module | None) -> Type:
    v = inst.value
    if isinstance(v, LiteralValue):
        check_literal(v.literal, v.type, m)
    return v.type


def _literal_eval(inst: Instruction, frame: Any) -> Any:
    return frame.get(inst.value)


define("literal", "$value:literal_use", _literal_rule, traits=("pure",), evaluate=_literal_eval,
       category="aggregate", summary="materialize a literal (splat, tensor, tuple, struct, …)")

# ---------------------------------------------------------------- key paths


def element_type(t: Type, keys: Sequence[Any], m: Module | None, what: str = "value") -> Type:
    """The type reached from `t` by a key path (as in `extract` and `elementPointer`)."""
    if not keys:
        fail("at least one key is required")
    for key in keys:
        rt = resolved(t, m)
        if isinstance(key, FieldKey):
            decl = _decl(rt, m)
            ft = decl.field_type(key.name) if isinstance(decl, StructDecl) else None
            if ft is None:
                fail(f"'{t}' has no field '#{key.name}'")
            t = ft
        elif isinstance(key, int):
            if isinstance(rt, TupleType):
                if not 0 <= key < len(rt.elements):
                    fail(f"index {key} is out of range for '{t}'")
                t = rt.elements[key]
            elif isinstance(rt, ArrayType):
                if not 0 <= key < rt.count:
                    fail(f"index {key} is out of range for '{t}'")
                t = rt.element
            elif isinstance(rt, TensorType) and rt.rank > 0:
                if key < 0 or (rt.shape[0] is not None and key >= rt.shape[0]):
                    fail(f"index {key} is out of range for '{t}'")
                t = rt.with_shape(rt.shape[1:])
            else:
                fail(f"cannot index into '{t}'")
        else:  # a dynamic index
            kt = resolved(key.type, m)
            if not (isinstance(kt, TensorType) and kt.is_scalar and kt.dtype.is_signed_int):
                fail(f"a dynamic index must be a signed integer scalar (iN), found "
                     f"'{key.type}'")
            if isinstance(rt, TensorType) and rt.rank > 0:
                t = rt.with_shape(rt.shape[1:])
            elif isinstance(rt, ArrayType):
                t = rt.element
            else:
                fail(f"cannot index '{t}' with a dynamic index")
    return t


def runtime_keys(keys: Sequence[Any], frame: Any) -> tuple[Any, ...]:
    out: list[Any] = []
    for k in keys:
        if isinstance(k, FieldKey):
            out.append(k.name)
        elif isinstance(k, int):
            out.append(k)
        else:
            out.append(int(frame.get(k)))
    return tuple(out)


def _extract_rule(inst: Instruction, m: Module | None) -> Type:
    return element_type(inst.value.type, inst.keys, m)


def _extract_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.value)
    for k in runtime_keys(inst.keys, frame):
        x = get_element(x, k)
    return x


define("extract", "$keys:keys from $value", _extract_rule, traits=("pure",),
       evaluate=_extract_eval, category="aggregate",
       summary="the element at a key path (tuple/array index, struct field, tensor row)")


def _insert_rule(inst: Instruction, m: Module | None) -> Type:
    et = element_type(inst.destination.type, inst.keys, m)
    if not _same(et, inst.element.type, m):
        fail(f"cannot insert '{inst.element.type}' where '{et}' is expected")
    return inst.destination.type


def _insert_eval(inst: Instruction, frame: Any) -> Any:
    return set_element(frame.get(inst.destination), runtime_keys(inst.keys, frame),
                       frame.get(inst.element))


define("insert", "$element to $destination at $keys:keys", _insert_rule, traits=("pure",),
       evaluate=_insert_eval, category="aggregate",
       summary="a copy of the aggregate with the element at a key path replaced")

# ---------------------------------------------------------------- calls


def callee_type(callee: Value, m: Module | None) -> FunctionType:
    t = resolved(callee.type, m)
    if isinstance(t, PointerType):
        t = resolved(t.pointee, m)
    if not isinstance(t, FunctionType):
        fail(f"callee has type '{callee.type}', which is not a function")
    return t


def _apply_rule(inst: Instruction, m: Module | None) -> Type:
    result: Type = inst.result
    callee = inst.callee
    if callee.type == INVALID:  # unresolved while parsing
        return result
    ft = callee_type(callee, m)
    args = inst.args
    if len(args) != len(ft.arguments):
        fail(f"call passes {len(args)} arguments, but the callee takes {len(ft.arguments)}")
    for i, (a, pt) in enumerate(zip(args, ft.arguments, strict=True)):
        if not types_compatible(resolved(a.type, m), resolved(pt, m)):
            fail(f"argument {i} has type '{a.type}', but the callee expects '{pt}'")
    if not types_compatible(resolved(result, m), resolved(ft.result, m)):
        fail(f"call result is written '{result}', but the callee returns '{ft.result}'")
    return result


def _apply_eval(inst: Instruction, frame: Any) -> Any:
    callee = frame.get(inst.callee)
    if isinstance(callee, Pointer):  # a pointer callee is loaded first
        callee = callee.load()
    return frame.call_function(callee, [frame.get(a) for a in inst.args])


define("apply", "$callee:callee $args:call_args $result:signature", _apply_rule,
       traits=("call",), evaluate=_apply_eval, category="call",
       summary="call a function (direct or through a function value)")

# ---------------------------------------------------------------- builtins


@dataclass(frozen=True)
class Builtin:
    """An intrinsic: its type rule over argument types and its numpy semantics."""

    name: str
    rule: Callable[[list[Value], Module | None], Type]
    impl: Callable[..., Any]
    summary: str


BUILTINS: dict[str, Builtin] = {}


def define_builtin(name: str, rule: Callable[[list[Value], Module | None], Type],
                   impl: Callable[..., Any], summary: str) -> Builtin:
    if name in BUILTINS:
        raise ValueError(f"builtin {name!r} is already defined")
    b = BUILTINS[name] = Builtin(name, rule, impl, summary)
    return b


def _arity(args: list[Value], n: int, name: str) -> None:
    if len(args) != n:
        fail(f"builtin \"{name}\" takes {n} argument{'s' if n != 1 else ''}, found {len(args)}")


def _softmax_rule(args: list[Value], m: Module | None) -> Type:
    _arity(args, 1, "softmax")
    return float_tensor(args[0], m)


def _softmax(x: np.ndarray) -> np.ndarray:
    if x.ndim == 0:
        return np.ones_like(x)
    if x.shape[-1] == 0:  # rows of no element: nothing to normalize
        return x.copy()
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _minmax_rule(name: str) -> Callable[[list[Value], Module | None], Type]:
    def rule(args: list[Value], m: Module | None) -> Type:
        _arity(args, 2, name)
        a, b = numeric_tensor(args[0], m), numeric_tensor(args[1], m)
        shape = broadcast_shapes(a.shape, b.shape)
        if a.dtype != b.dtype or shape is None:
            fail(f"builtin \"{name}\" cannot combine '{a}' and '{b}'")
        return TensorType(shape, a.dtype)

    return rule


def _mean_rule(args: list[Value], m: Module | None) -> Type:
    _arity(args, 1, "mean")
    return scalar(float_tensor(args[0], m).dtype)


define_builtin("softmax", _softmax_rule, _softmax, "softmax along the last dimension")
def _broadcasting(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`f` of two arrays whose shapes must broadcast at run time (`_` sizes)."""
    def checked(a: Any, b: Any) -> Any:
        try:
            np.broadcast_shapes(np.shape(a), np.shape(b))
        except ValueError:
            raise ExecutionError(f"shapes {format_np_shape(np.shape(a))} and "
                                 f"{format_np_shape(np.shape(b))} cannot be broadcast "
                                 "together") from None
        return f(a, b)

    return checked


define_builtin("min", _minmax_rule("min"), _broadcasting(np.minimum),
               "element-wise minimum, broadcasting")
define_builtin("max", _minmax_rule("max"), _broadcasting(np.maximum),
               "element-wise maximum, broadcasting")
define_builtin("mean", _mean_rule, np.mean, "the mean of all elements")


def _builtin_rule(inst: Instruction, m: Module | None) -> Type:
    b = BUILTINS.get(inst.builtin)
    if b is None:
        fail(f"unknown builtin \"{inst.builtin}\" (known: {', '.join(sorted(BUILTINS))})")
    t = b.rule(inst.args, m)
    if not _same(t, inst.result, m):
        fail(f"builtin \"{inst.builtin}\" returns '{t}', but the result is written '{inst.result}'")
    return inst.result


def _builtin_eval(inst: Instruction, frame: Any) -> Any:
    with np.errstate(all="ignore"):
        out = BUILTINS[inst.builtin].impl(*[frame.get(a) for a in inst.args])
    return result_array(inst, out)


define("builtin", "$builtin:string $args:call_args $result:signature", _builtin_rule,
       traits=("pure",), evaluate=_builtin_eval, category="call",
       summary="call a registered intrinsic (softmax, min, max, mean, …)")
