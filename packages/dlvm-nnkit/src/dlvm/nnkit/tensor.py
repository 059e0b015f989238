"""Staged tensors: the values a staged function computes with while it is staged.

A staged tensor is an IR value of a known element type and rank, with numpy's operators
(`+ - * / ** @`, comparisons, `x[i]`) and numpy's functions where NNKit has them
(`np.tanh(x)` is `nnkit.tanh(x)`). What needs a value it does not have yet — `if x:`,
`float(x)`, `len(x)` of an unknown size, a numpy function NNKit lacks — is an error that
says so and names the staged tensor's type, never Python's words about an internal class.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

import dlvm.ir as ir
from dlvm.ir import Value

from .errors import NNKitAttributeError, type_error, user_location
from .types import TensorSpec

if TYPE_CHECKING:
    from .staging import Stage

# Python's operators NNKit does not stage, and what the message suggests instead
UNSUPPORTED_OPERATORS: dict[str, tuple[str, str]] = {
    "__floordiv__": ("//", "nnkit.divide and a cast"),
    "__rfloordiv__": ("//", "nnkit.divide and a cast"),
    "__mod__": ("%", "nnkit's arithmetic"),
    "__rmod__": ("%", "nnkit's arithmetic"),
    "__divmod__": ("divmod()", "nnkit's arithmetic"),
    "__rdivmod__": ("divmod()", "nnkit's arithmetic"),
    "__and__": ("&", "nnkit.select"),
    "__rand__": ("&", "nnkit.select"),
    "__or__": ("|", "nnkit.select"),
    "__ror__": ("|", "nnkit.select"),
    "__xor__": ("^", "nnkit.not_equal"),
    "__rxor__": ("^", "nnkit.not_equal"),
    "__invert__": ("~", "nnkit.select"),
    "__lshift__": ("<<", "nnkit.multiply"),
    "__rlshift__": ("<<", "nnkit.multiply"),
    "__rshift__": (">>", "nnkit.divide"),
    "__rrshift__": (">>", "nnkit.divide"),
    "__abs__": ("abs()", "nnkit.maximum(x, -x)"),
    "__round__": ("round()", "a cast with .astype"),
}
# Python's conversions that need the value, which a staged tensor does not have yet
NEEDS_A_VALUE: dict[str, str] = {
    "__float__": "float()",
    "__int__": "int()",
    "__index__": "an index",
    "__complex__": "complex()",
    "__array__": "a numpy array",
    "__iter__": "iteration (use nnkit.fori_loop, or take rows with x[i])",
    "__setitem__": "assignment to an element",
    "__contains__": "'in'",
}


def _no_value(what: str) -> Callable[..., NoReturn]:
    def method(self: StagedTensor, *args: Any, **kwargs: Any) -> NoReturn:
        raise type_error(f"{what} needs the value of {self.described()}, which is not known "
                         "while staging")

    return method


def _unsupported(symbol: str, instead: str) -> Callable[..., NoReturn]:
    def method(self: StagedTensor, *args: Any) -> NoReturn:
        raise type_error(f"NNKit does not stage {symbol} on {self.described()}: use {instead}")

    return method


class StagedTensor:
    """A staged tensor: an IR value of a known element type and rank."""

    __slots__ = ("spec", "stage", "value")
    is_staged_tensor = True  # callable (numpy's protocol), but never a function to stage

    def __init__(self, value: Value, spec: TensorSpec, stage: Stage) -> None:
        if not isinstance(value, Value) or type(spec) is not TensorSpec or not hasattr(
                stage, "program"):
            raise type_error("a staged tensor is made by staging (the arguments of a staged "
                             "function, and NNKit's operations on them), not directly")
        self.value = value
        self.spec = spec
        self.stage = stage

    def described(self) -> str:
        return f"a staged tensor of type {self.spec}"

    @property
    def shape(self) -> tuple[int | None, ...]:
        return self.spec.shape

    @property
    def dtype(self) -> ir.DataType:
        return self.spec.dtype

    @property
    def rank(self) -> int:
        return self.spec.rank

    @property
    def ndim(self) -> int:
        return self.spec.rank

    def __repr__(self) -> str:
        return f"<staged tensor of type {self.spec}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # Python's and numpy's protocols: plainly absent
            raise AttributeError(name)
        raise NNKitAttributeError(f"{_location()}: error: {self.described()} has no attribute "
                                  f"'{name}'")

    def __bool__(self) -> bool:
        raise type_error(f"{self.described()} has no truth value while staging: use "
                         "nnkit.cond (or select) for a branch on it")

    def __len__(self) -> int:
        if self.rank and self.shape[0] is not None:
            return self.shape[0]
        raise type_error(f"len() of {self.described()}: "
                         f"{'its first size is not known' if self.rank else 'a scalar has none'}"
                         " while staging")

    def __format__(self, spec: str) -> str:
        if spec:
            raise type_error(f"formatting {self.described()} as '{spec}' needs its value, "
                             "which is not known while staging")
        return repr(self)

    __hash__ = object.__hash__

    # arithmetic and comparisons: the functions of `ops`
    def __add__(self, other: Any) -> StagedTensor:
        return _ops().add(self, other)

    def __radd__(self, other: Any) -> StagedTensor:
        return _ops().add(other, self)

    def __sub__(self, other: Any) -> StagedTensor:
        return _ops().subtract(self, other)

    def __rsub__(self, other: Any) -> StagedTensor:
        return _ops().subtract(other, self)

    def __mul__(self, other: Any) -> StagedTensor:
        return _ops().multiply(self, other)

    def __rmul__(self, other: Any) -> StagedTensor:
        return _ops().multiply(other, self)

    def __truediv__(self, other: Any) -> StagedTensor:
        return _ops().divide(self, other)

    def __rtruediv__(self, other: Any) -> StagedTensor:
        return _ops().divide(other, self)

    def __pow__(self, other: Any) -> StagedTensor:
        return _ops().power(self, other)

    def __rpow__(self, other: Any) -> StagedTensor:
        return _ops().power(other, self)

    def __matmul__(self, other: Any) -> StagedTensor:
        return _ops().dot(self, other)

    def __rmatmul__(self, other: Any) -> StagedTensor:
        return _ops().dot(other, self)

    def __neg__(self) -> StagedTensor:
        return _ops().negate(self)

    def __pos__(self) -> StagedTensor:
        return self

    def __lt__(self, other: Any) -> StagedTensor:
        return _ops().less(self, other)

    def __le__(self, other: Any) -> StagedTensor:
        return _ops().less_equal(self, other)

    def __gt__(self, other: Any) -> StagedTensor:
        return _ops().greater(self, other)

    def __ge__(self, other: Any) -> StagedTensor:
        return _ops().greater_equal(self, other)

    def __eq__(self, other: Any) -> StagedTensor:  # type: ignore[override]
        return _ops().equal(self, other)

    def __ne__(self, other: Any) -> StagedTensor:  # type: ignore[override]
        return _ops().not_equal(self, other)

    def __getitem__(self, index: Any) -> StagedTensor:
        """`x[i]`: the row `i` (a Python int or a staged i64 scalar), as `nnkit.take`."""
        return _ops().take(self, index)

    # shape helpers, as methods (the seed's `b.rankLifted()`)
    def rank_lifted(self) -> StagedTensor:
        return _ops().pad_shape(self, 0)

    def squeeze(self, axis: int = 0) -> StagedTensor:
        return _ops().squeeze(self, axis)

    def reshape(self, *shape: Any) -> StagedTensor:
        return _ops().reshape(self, shape[0] if len(shape) == 1 and isinstance(
            shape[0], tuple | list) else shape)

    @property
    def T(self) -> StagedTensor:
        return _ops().transpose(self)

    def sum(self, axis: int | Sequence[int] | None = None) -> StagedTensor:
        return _ops().sum(self, axis)

    def max(self, axis: int | Sequence[int] | None = None) -> StagedTensor:
        return _ops().max(self, axis)

    def mean(self, axis: int | Sequence[int] | None = None) -> StagedTensor:
        return _ops().mean(self, axis)

    def astype(self, dtype: ir.DataType) -> StagedTensor:
        return _ops().cast(self, dtype)

    # numpy's functions on a staged tensor: NNKit's, where it has them
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any
                        ) -> Any:
        staged = numpy_ufuncs().get(ufunc)
        if staged is None or method != "__call__" or kwargs:
            how = f"numpy.{ufunc.__name__}" + (f".{method}" if method != "__call__" else "")
            raise type_error(f"{how} cannot compute on {self.described()}"
                             + (" with keyword arguments" if staged and kwargs else "")
                             + f": use {_instead(ufunc.__name__)}")
        return staged(*inputs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise type_error(f"numpy.{func.__name__} cannot compute on {self.described()}: use "
                         f"{_instead(func.__name__)}")


for _method, (_symbol, _instead_of) in UNSUPPORTED_OPERATORS.items():
    setattr(StagedTensor, _method, _unsupported(_symbol, _instead_of))
for _method, _what in NEEDS_A_VALUE.items():
    setattr(StagedTensor, _method, _no_value(_what))


# NNKit's operations, which make staged tensors (so they import this module): `ops` puts
# itself here when it is imported, and the operators of a staged tensor call it
OPERATIONS: Any = None


def _ops() -> Any:
    assert OPERATIONS is not None, "dlvm.nnkit.ops is imported with the package"
    return OPERATIONS


def _location() -> str:
    return user_location()


@functools.cache
def numpy_ufuncs() -> dict[np.ufunc, Callable[..., Any]]:
    """numpy's ufuncs that NNKit stages, and the operation of each."""
    ops = _ops()
    return {
        np.add: ops.add, np.subtract: ops.subtract, np.multiply: ops.multiply,
        np.true_divide: ops.divide, np.power: ops.power, np.matmul: ops.dot,
        np.maximum: ops.maximum, np.minimum: ops.minimum, np.negative: ops.negate,
        np.positive: lambda x: x, np.less: ops.less, np.less_equal: ops.less_equal,
        np.greater: ops.greater, np.greater_equal: ops.greater_equal, np.equal: ops.equal,
        np.not_equal: ops.not_equal, np.tanh: ops.tanh, np.exp: ops.exp, np.log: ops.log,
        np.sqrt: ops.sqrt, np.sin: ops.sin, np.cos: ops.cos, np.square: ops.square,
    }


def _instead(name: str) -> str:
    """`nnkit.NAME` when NNKit has an operation of that name, else a pointer to them all."""
    public = sys.modules["dlvm.nnkit"].__all__  # the package, which imports this module
    return f"nnkit.{name}" if name in public else "NNKit's operations (docs/nnkit.md)"
