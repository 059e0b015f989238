"""Argument checks for every public function and class of NNKit: each says what it expected
and what it found, in one line located at the user's call (`NNKitTypeError` for a value of
the wrong kind, `NNKitValueError` for a bad value), instead of a traceback from deep inside.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from dlvm.ir import DataType

from .errors import type_error, value_error

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SHOWN_CHARS = 40  # a longer string or repr is shortened in messages


def describe(value: Any) -> str:
    """What `value` is, in words a user recognises: `a staged tensor of type <3 x f32>`,
    `the int -1`, `a numpy array of shape (2, 3) and dtype float32`, …; NNKit's own
    classes (staged tensors and functions, tensor types) say it with `described()`."""
    if value is None:
        return "None"
    if callable(getattr(type(value), "described", None)):
        return value.described()  # type: ignore[no-any-return]
    if isinstance(value, DataType):
        return f"the element type {value}"
    if isinstance(value, bool | int | float | complex):
        return f"the {type(value).__name__} {_short(repr(value))}"
    if isinstance(value, str):
        return f"the string {_short(repr(value))}"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, np.generic):
        return f"the numpy {value.dtype} {_short(repr(value.item()))}"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"a dict of {len(value)} key{'s' if len(value) != 1 else ''}"
    if callable(value) and hasattr(value, "__name__"):
        return f"the {type(value).__name__} '{value.__name__}'"
    return f"a {type(value).__name__}"


def _short(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def wrong(what: str, expected: str, value: Any) -> Exception:
    """`what must be EXPECTED, found VALUE` as a type error of the user's line."""
    return type_error(f"{what} must be {expected}, found {describe(value)}")


def bad(what: str, expected: str, value: Any) -> Exception:
    """`what must be EXPECTED, found VALUE` as a value error of the user's line."""
    return value_error(f"{what} must be {expected}, found {describe(value)}")


# ---------------------------------------------------------------- numbers


@dataclass(frozen=True)
class Interval:
    """The numbers a parameter may take: `[0, 1)`, `(0, ∞)`, …"""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, x: float) -> bool:
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return above and below

    def __str__(self) -> str:
        if self.high == math.inf:
            if self.low == 0:
                return "> 0" if self.low_open else "≥ 0"
            return f"{'>' if self.low_open else '≥'} {self.low:g}"
        return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")


POSITIVE = Interval(0, math.inf, low_open=True)
NON_NEGATIVE = Interval(0)
ANY_FINITE = Interval()


def check_real(value: Any, what: str, within: Interval = ANY_FINITE) -> float:
    """A finite real number within `within`, as a Python float."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise wrong(what, f"a number {within}" if within != ANY_FINITE else "a number", value)
    x = float(value)
    if not math.isfinite(x) or x not in within:
        shown = f"a finite number {within}" if within != ANY_FINITE else "a finite number"
        raise bad(what, shown, value)
    return x


def check_int(value: Any, what: str, *, minimum: int | None = None) -> int:
    """An integer (not a bool), at least `minimum`, as a Python int."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise wrong(what, "an integer" if minimum is None else _int_range(minimum), value)
    n = int(value)
    if minimum is not None and n < minimum:
        raise bad(what, _int_range(minimum), value)
    return n


def _int_range(minimum: int) -> str:
    return {0: "an integer ≥ 0", 1: "a positive integer"}.get(minimum,
                                                              f"an integer ≥ {minimum}")


def check_bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise wrong(what, "True or False", value)
    return bool(value)


# ---------------------------------------------------------------- other kinds


def check_callable(value: Any, what: str, expected: str = "a function") -> Callable[..., Any]:
    if not callable(value) or isinstance(value, type) or getattr(type(value), "is_staged_tensor",
                                                                 False):
        raise wrong(what, expected, value)
    return value  # type: ignore[no-any-return]


def check_name(value: Any, what: str) -> str:
    """A name that IR and parameter files can hold: letters, digits, `_`."""
    if not isinstance(value, str):
        raise wrong(what, "a name (a string)", value)
    if not NAME.match(value):
        raise bad(what, "a name of letters, digits and '_' that does not start with a digit",
                  value)
    return value


def check_optional_name(value: Any, what: str) -> str | None:
    return None if value is None else check_name(value, what)


def check_sequence(value: Any, what: str, expected: str) -> Sequence[Any]:
    """A list or tuple (not a string, a dict or a single value)."""
    if not isinstance(value, list | tuple):
        raise wrong(what, expected, value)
    return value


def check_mapping(value: Any, what: str, keys: Sequence[str], whose: str) -> Mapping[str, Any]:
    """A mapping that holds every one of `keys`."""
    if not isinstance(value, Mapping):
        raise wrong(what, f"a dict of {whose}", value)
    missing = [k for k in keys if k not in value]
    if missing:
        shown = ", ".join(repr(k) for k in missing[:5]) + (", …" if len(missing) > 5 else "")
        raise value_error(f"{what}: missing {shown} ({whose}: {', '.join(keys[:8])}"
                          f"{', …' if len(keys) > 8 else ''})")
    return value


def check_rng(value: Any, what: str) -> np.random.Generator:
    if not isinstance(value, np.random.Generator):
        raise wrong(what, "a numpy random generator (numpy.random.default_rng(seed))", value)
    return value


# ---------------------------------------------------------------- indices


def check_axis(value: Any, rank: int, what: str) -> int:
    """An axis of a rank-`rank` tensor, negative ones counted from the end."""
    axis = check_int(value, what)
    if not -rank <= axis < rank:
        raise bad(what, f"an axis of a rank-{rank} tensor (-{rank} to {rank - 1})"
                  if rank else "an axis, but a scalar has none", value)
    return axis + rank if axis < 0 else axis


def check_axes(value: Any, rank: int, what: str) -> list[int] | None:
    """None (every axis), an axis, or a sequence of distinct axes, sorted."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        axes = [check_axis(a, rank, f"{what}[{k}]") for k, a in enumerate(value)]
        if len(set(axes)) != len(axes):
            raise bad(what, "distinct axes", value)
        return sorted(axes)
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise wrong(what, "an axis, a tuple of axes or None", value)
    return [check_axis(value, rank, what)]


def check_indices(value: Any, what: str, *, count: int | None, allow_empty: bool,
                  default: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """None (`default`), an index, or a sequence of distinct indices below `count` (when
    known): the arguments a derivative is taken with respect to, or the results kept."""
    if value is None:
        return default
    if isinstance(value, list | tuple):
        items = list(value)
    elif isinstance(value, Integral) and not isinstance(value, bool):
        items = [value]
    else:
        raise wrong(what, "an index, a tuple of indices or None", value)
    indices = tuple(check_int(k, f"{what}[{n}]" if isinstance(value, list | tuple) else what,
                              minimum=0) for n, k in enumerate(items))
    if not indices and not allow_empty:
        raise bad(what, "at least one index (None: all of them)", value)
    if len(set(indices)) != len(indices):
        raise bad(what, "distinct indices", value)
    if count is not None:
        out = [k for k in indices if k >= count]
        if out:
            raise bad(what, f"indices below {count} (there {'are' if count != 1 else 'is'} "
                      f"{count} argument{'s' if count != 1 else ''})", value)
    return indices


# ---------------------------------------------------------------- types


def check_dtype(value: Any, what: str, *, kinds: tuple[str, ...] = ("bool", "int", "float")
                ) -> Any:
    """An element type of NNKit (`nnkit.f32`, …) of one of `kinds`."""
    if not isinstance(value, DataType):
        raise wrong(what, "an element type such as nnkit.f32", value)
    if value.kind not in kinds:
        raise bad(what, f"a {' or '.join(kinds)} element type", value)
    return value
