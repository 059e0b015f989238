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

f16, f32, f64 = F16, F32, F64
i8, i16, i32, i64 = I8, I16, I32, I64
bool_ = BOOL

_FROM_NUMPY = {np.dtype(numpy_dtype(t)): t for t in (F16, F32, F64, I8, I16, I32, I64, BOOL)}


@dataclass(frozen=True)
class TensorSpec:
    """The type of a staged value: element type and dimensions (None: unknown)."""

    dtype: DataType
    shape: tuple[int | None, ...]

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
        dtype = np.dtype(getattr(x, "dtype", np.asarray(x).dtype))
        found = _FROM_NUMPY.get(dtype)
        if found is None:
            raise TypeError(f"arrays of {dtype} cannot be passed to a staged function")
        return TensorSpec(found, tuple(int(d) for d in np.shape(x)))

    def __str__(self) -> str:
        return str(self.ir())


class Tensor:
    """`Tensor[f32, 2]` (rank 2, sizes unknown) or `Tensor[f32, (None, 784)]`."""

    def __class_getitem__(cls, item: tuple[DataType, int | tuple[int | None, ...]]
                          ) -> TensorSpec:
        dtype, shape = item
        if isinstance(shape, int):
            return TensorSpec(dtype, (None,) * shape)
        return TensorSpec(dtype, tuple(shape))


Float = Tensor[f32, 0]
Float1D, Float2D, Float3D, Float4D = (Tensor[f32, r] for r in (1, 2, 3, 4))
Double = Tensor[f64, 0]
Double1D, Double2D, Double3D = (Tensor[f64, r] for r in (1, 2, 3))
Int1D, Int2D = Tensor[i64, 1], Tensor[i64, 2]
