"""Staged tensor types: an element type and a rank, each dimension known or `_`.

`Float2D` is a rank-2 float32 tensor of any sizes (`<_ x _ x f32>`); `Tensor[f32, 2]` says
the same, `Tensor[f32, (None, 784)]` fixes a size. Applying a staged function to arrays
fills the sizes in (a shape-specialized build), unless it is asked to stay dynamic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dlvm.ir import BOOL, F16, F32, F64, I8, I16, I32, I64, DataType, TensorType
from dlvm.ir.runtime import numpy_dtype

from .checks import check_dtype, check_int, check_sequence, wrong
from .errors import type_error

f16, f32, f64 = F16, F32, F64
i8, i16, i32, i64 = I8, I16, I32, I64
bool_ = BOOL

_FROM_NUMPY = {np.dtype(numpy_dtype(t)): t for t in (F16, F32, F64, I8, I16, I32, I64, BOOL)}
SUPPORTED = "bool, int8…int64 or float16…float64"


def from_numpy(dtype: Any) -> DataType:
    """The element type of a numpy dtype; a `TypeError` for one NNKit has not."""
    found = _FROM_NUMPY.get(np.dtype(dtype))
    if found is None:
        raise type_error(f"arrays of {np.dtype(dtype)} cannot be passed to a staged "
                         f"function (it takes {SUPPORTED})")
    return found


@dataclass(frozen=True)
class TensorSpec:
    """The type of a staged value: element type and dimensions (None: unknown)."""

    dtype: DataType
    shape: tuple[int | None, ...]

    def __post_init__(self) -> None:
        if isinstance(self.dtype, DataType) and type(self.shape) is tuple and all(
                d is None or (type(d) is int and d >= 0) for d in self.shape):
            return  # the common case, quickly
        check_dtype(self.dtype, "the element type of a tensor type")
        if not isinstance(self.shape, tuple | list):
            raise wrong("the shape of a tensor type", "a tuple of sizes (None: unknown)",
                        self.shape)
        object.__setattr__(self, "shape", tuple(_size(d, k) for k, d in enumerate(
            self.shape)))

    def described(self) -> str:
        return f"the type {self}"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def ir(self) -> TensorType:
        return TensorType(self.shape, self.dtype)

    def erased(self) -> TensorSpec:
        """The same with every dimension unknown."""
        return TensorSpec(self.dtype, (None,) * self.rank)

    def accepts(self, other: TensorSpec) -> bool:
        """Whether a value of `other` may stand where this type is expected."""
        return self.dtype == other.dtype and self.rank == other.rank and all(
            a is None or b is None or a == b for a, b in zip(self.shape, other.shape,
                                                             strict=True))

    def refined(self, other: TensorSpec) -> TensorSpec:
        """This type with the sizes `other` knows filled in."""
        return TensorSpec(self.dtype, tuple(a if a is not None else b for a, b in zip(
            self.shape, other.shape, strict=True)))

    @staticmethod
    def of(x: Any) -> TensorSpec:
        """The type of an array (numpy or anything with `shape` and `dtype`) or a number."""
        if isinstance(x, TensorSpec):
            return x
        if isinstance(x, bool):
            return TensorSpec(BOOL, ())
        if isinstance(x, int):
            return TensorSpec(I64, ())
        if isinstance(x, float):
            return TensorSpec(F64, ())
        try:
            held = getattr(x, "dtype", None)
            dtype = np.dtype(held if held is not None else np.asarray(x).dtype)
            shape = np.shape(x)
        except (TypeError, ValueError) as e:  # a ragged list, an unknown dtype, …
            raise type_error(f"{type(x).__name__} is not an array NNKit can read ({e})"
                             ) from None
        return TensorSpec(from_numpy(dtype), tuple(int(d) for d in shape))

    def __str__(self) -> str:
        return str(self.ir())


def _size(d: Any, k: int) -> int | None:
    """A dimension of a tensor type: a size ≥ 0, or None (unknown)."""
    return None if d is None else check_int(d, f"size {k} of a tensor type", minimum=0)


class Tensor:
    """`Tensor[f32, 2]` (rank 2, sizes unknown) or `Tensor[f32, (None, 784)]`."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Tensor:
        raise type_error("nnkit.Tensor makes a type by subscription, as Tensor[f32, 2] or "
                         "Tensor[f32, (None, 784)]; it is not called")

    def __class_getitem__(cls, item: tuple[DataType, int | tuple[int | None, ...]]
                          ) -> TensorSpec:
        if not isinstance(item, tuple) or len(item) != 2:
            raise wrong("nnkit.Tensor[…]", "an element type and a rank or shape, as "
                        "Tensor[f32, 2] or Tensor[f32, (None, 784)]", item)
        dtype, shape = item
        if isinstance(shape, tuple | list):
            return TensorSpec(dtype, tuple(shape))
        return TensorSpec(dtype, (None,) * check_int(shape, "the rank of nnkit.Tensor[…]",
                                                     minimum=0))


Float = Tensor[f32, 0]
Float1D, Float2D, Float3D, Float4D = (Tensor[f32, r] for r in (1, 2, 3, 4))
Double = Tensor[f64, 0]
Double1D, Double2D, Double3D = (Tensor[f64, r] for r in (1, 2, 3))
Int1D, Int2D = Tensor[i64, 1], Tensor[i64, 2]


def check_spec(value: Any, what: str) -> Any:
    """A staged tensor type (`Float2D`, `Tensor[f32, (None, 784)]`)."""
    if not isinstance(value, TensorSpec):
        raise wrong(what, "a tensor type such as nnkit.Float2D or nnkit.Tensor[nnkit.f32, 2]",
                    value)
    return value


def check_specs(value: Any, what: str) -> tuple[Any, ...]:
    """A tuple (or list) of tensor types, one per argument."""
    if isinstance(value, TensorSpec):
        raise wrong(what, f"a tuple of types, one per argument (({value},) for one)", value)
    items = check_sequence(value, what, "a tuple of tensor types, one per argument")
    return tuple(check_spec(s, f"{what}[{k}]") for k, s in enumerate(items))
