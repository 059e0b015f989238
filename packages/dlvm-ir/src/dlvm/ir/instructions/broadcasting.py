"""`unbroadcast`: the adjoint of broadcasting, for shapes known only at run time.

`%r = unbroadcast %dy: <_ x 5 x f32> like %b: <_ x 1 x f32>` sums `%dy` over
the dimensions along which `%b` was broadcast to `%dy`'s shape (all of them
when `%b` is a scalar). Differentiation emits it where static types cannot
tell whether a dimension was broadcast; with static shapes it uses `reduce`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import Instruction, Module
from ..opdef import define
from ..runtime import ExecutionError, format_np_shape, sum_dtype
from ..types import TensorType, Type, broadcast_shapes
from .common import fail, float_tensor, result_array, tensor_type


def _unbroadcast_rule(inst: Instruction, m: Module | None) -> Type:
    x = float_tensor(inst.x, m)
    like = tensor_type(inst.like, m, "shape operand")
    if like.rank and like.rank != x.rank:
        fail(f"'{like}' does not broadcast to '{x}': ranks differ")
    if like.rank and broadcast_shapes(like.shape, x.shape) is None:
        fail(f"'{like}' does not broadcast to '{x}'")
    return TensorType(like.shape, x.dtype)


def sum_to_shape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `x` over the dimensions along which `shape` broadcasts to `x.shape`."""
    if not shape:
        with np.errstate(over="ignore"):
            return np.asarray(x.sum(dtype=sum_dtype(x.dtype)), dtype=x.dtype)
    if len(shape) != x.ndim or any(s not in (1, n) for s, n in zip(shape, x.shape, strict=True)):
        raise ExecutionError(f"unbroadcast: shape {format_np_shape(shape)} does not broadcast "
                             f"to {format_np_shape(x.shape)}")
    axes = tuple(i for i, (s, n) in enumerate(zip(shape, x.shape, strict=True)) if s != n)
    if not axes:
        return x
    with np.errstate(over="ignore"):  # a float16 sum past its range is inf, as added
        return x.sum(axis=axes, keepdims=True, dtype=sum_dtype(x.dtype)).astype(x.dtype)


def _unbroadcast_eval(inst: Instruction, frame: Any) -> Any:
    x = np.asarray(frame.get(inst.x))
    return result_array(inst, sum_to_shape(x, np.shape(frame.get(inst.like))))


define("unbroadcast", "$x like $like", _unbroadcast_rule, traits=("pure", "reduction"),
       evaluate=_unbroadcast_eval, category="reduction",
       summary="sum over the dimensions along which the second operand was broadcast")
