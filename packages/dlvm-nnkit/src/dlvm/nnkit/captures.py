"""What a build read from outside its arguments, and whether that still holds.

A staged function's build bakes in, as constants, the arrays and numbers it reads from
outside its arguments: they are captured by value when it is staged, as in JAX. So that a
build never answers with an old value, it records what it captured — every array made a
constant (with a copy of its value), and the numbers and arrays that the staged Python
functions, and the plain Python functions they use, read from global and closure
variables — and checks them before each call: when one changed (an array written in
place, a variable bound to another value) the function is staged and compiled again.

What it cannot see is a value reached through an object or a container (`self.scale`,
`params["w"]`) that is replaced by another: such values are read once, when staging.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

WATCHED = (bool, int, float, complex, np.generic, np.ndarray)  # what staging bakes in
_MISSING = object()


class Captures:
    """The outside values one build was staged with."""

    def __init__(self) -> None:
        # (array, its shape, dtype and bytes then)
        self.arrays: list[tuple[np.ndarray, tuple[int, ...], np.dtype[Any], bytes]] = []
        self.names: list[tuple[dict[str, Any], str, Any]] = []  # (globals, name, value)
        self.cells: list[tuple[types.CellType, Any]] = []  # (closure cell, value)
        self._arrays_seen: set[int] = set()
        self._functions_seen: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.arrays or self.names or self.cells)

    # ------------------------------------------------------------ recording

    def array(self, arr: np.ndarray) -> None:
        """`arr` was made a constant: remember its value."""
        if id(arr) not in self._arrays_seen and not arr.dtype.hasobject:
            self._arrays_seen.add(id(arr))
            self.arrays.append((arr, arr.shape, arr.dtype, arr.tobytes()))

    def function(self, fn: Any) -> None:
        """`fn` is being staged: watch the global and closure variables it reads (and those
        of the plain Python functions it refers to)."""
        if not isinstance(fn, types.FunctionType) or id(fn) in self._functions_seen:
            return
        self._functions_seen.add(id(fn))
        namespace = fn.__globals__
        for name in _names_read(fn.__code__):
            value = namespace.get(name, _MISSING)
            if self._watch(value):
                self.names.append((namespace, name, value))
        for cell in fn.__closure__ or ():
            value = _cell_value(cell)
            if self._watch(value):
                self.cells.append((cell, value))

    def _watch(self, value: Any) -> bool:
        """Whether a variable holding `value` must keep it; follows functions."""
        if isinstance(value, types.FunctionType):
            self.function(value)
            return False
        if isinstance(value, np.ndarray):
            self.array(value)
        return isinstance(value, WATCHED)

    # ------------------------------------------------------------ checking

    def changed(self) -> bool:
        """Whether a captured value is no longer what the build was staged with."""
        for arr, shape, dtype, then in self.arrays:
            if arr.shape != shape or arr.dtype != dtype or arr.tobytes() != then:
                return True
        for namespace, name, value in self.names:
            if not _same(namespace.get(name, _MISSING), value):
                return True
        return any(not _same(_cell_value(cell), value) for cell, value in self.cells)


def _names_read(code: types.CodeType) -> Iterator[str]:
    """The global names a function's code (and the functions defined in it) may read."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_read(const)


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not bound yet
        return _MISSING


def _same(now: Any, then: Any) -> bool:
    """The same object, or an equal number (NaN equal to NaN)."""
    if now is then:
        return True
    if isinstance(then, np.ndarray) or type(now) is not type(then):
        return False
    if now == then:
        return True
    return isinstance(then, float | np.floating) and math.isnan(then) and math.isnan(now)
