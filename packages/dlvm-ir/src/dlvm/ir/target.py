"""What every target provides: `compile(module) -> Executable`, and calling conventions.

`Executable.call(name, *arrays)` always returns a tuple of numpy arrays;
tuple results are flattened in order (nested tuples depth-first). `exe["f"]` gives the
function's result back in the structure of its type.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .core import Module
from .diagnostics import DlvmError
from .runtime import ExecutionError
from .types import ArrayType, TupleType, Type

# The nesting of a result: None for one value (an array), a tuple for a tuple of them.
Structure = tuple["Structure", ...] | None


def flatten_results(value: Any) -> tuple[np.ndarray, ...]:
    """A function's result as a flat tuple of arrays."""
    if isinstance(value, tuple):
        out: list[np.ndarray] = []
        for v in value:
            out.extend(flatten_results(v))
        return tuple(out)
    if value is None:
        return ()
    arr = np.asarray(value)
    if not arr.flags.writeable:
        arr = arr.copy()
    return (arr,)


def result_structure(module: Module, t: Type) -> Structure:
    """How a value of type `t` nests: tuples and arrays (`[n x T]`, n elements) are tuples
    of their elements' structures, named types are what they name; anything else is one
    value (a tensor; a struct or an enum, which `call` returns as one object)."""
    t = module.resolve(t)
    if isinstance(t, TupleType):
        return tuple(result_structure(module, e) for e in t.elements)
    if isinstance(t, ArrayType):
        element = result_structure(module, t.element)
        return tuple(element for _ in range(t.count))
    return None


def leaf_count(structure: Structure) -> int:
    return 1 if structure is None else sum(leaf_count(s) for s in structure)


def nest_results(structure: Structure, flat: tuple[Any, ...]) -> Any:
    """The flat results of `call` in the nesting of `structure` (see `result_structure`)."""
    leaves = iter(flat)

    def build(s: Structure) -> Any:
        return next(leaves) if s is None else tuple(build(e) for e in s)

    return build(structure)


class Executable(ABC):
    """A compiled module whose functions can be called with numpy arrays.

    `exe.call("f", x, y)` returns every result as a flat tuple of arrays; `exe["f"](x, y)`
    returns what the function returns, in the structure of its result type: one array, a
    tuple for a tuple result (nested as the type nests; an array `[n x T]` is a tuple of n),
    None for none.
    """

    module: Module

    @abstractmethod
    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]: ...

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.module.functions if f.name and f.blocks]

    def function(self, name: str) -> Callable[..., Any]:
        """A Python callable for function `@name` (see the class docstring); made once per
        name, so `exe["f"](x)` in a loop costs no more than a saved `f = exe["f"]`."""
        cache: dict[str, Callable[..., Any]] | None = getattr(self, "_callables", None)
        if cache is None:
            cache = {}
            with contextlib.suppress(AttributeError):  # with __slots__: made each time
                self._callables = cache
        made = cache.get(name)
        if made is None:
            made = cache[name] = self._make_function(name)
        return made

    def _make_function(self, name: str) -> Callable[..., Any]:
        name = name.removeprefix("@")
        fn = self.module.function(name)
        if fn is None or not fn.blocks:
            known = ", ".join(f"@{n}" for n in self.function_names) or "none"
            raise ExecutionError(f"no function '@{name}' to call (available: {known})")
        structure = result_structure(self.module, fn.type_.result)
        expected = leaf_count(structure)
        flat = structure is not None and all(s is None for s in structure)

        def call(*args: Any) -> Any:
            out = self.call(name, *args)
            if len(out) != expected:
                raise ExecutionError(f"'@{name}' returned {len(out)} values for a result of "
                                     f"type '{fn.type_.result}', which holds {expected}")
            if flat:  # a tuple of arrays (or none): the flat results are the structure
                return out if structure else None
            return out[0] if structure is None else nest_results(structure, out)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"@{name}: {fn.type}"
        return call

    def __getitem__(self, name: str) -> Callable[..., Any]:
        return self.function(name)


# Numbers end up in 64-bit fields of compiled code: a timeout as a deadline in nanoseconds.
INT64_MAX = 2**63 - 1
OPTION_MAXIMUM: dict[str, float] = {"timeout": 1e9}  # seconds (31 years)


def check_option(name: str, value: Any, kind: type, *, minimum: float | None = None,
                 optional: bool = False) -> None:
    """Refuse a target option of the wrong type or range with a one-line error (options come
    from command lines and TOML files, so a wrong one is the user's mistake, not a bug)."""
    if value is None and optional:
        return
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok:
        article = {int: "an integer", float: "a number", bool: "true or false"}.get(
            kind, kind.__name__)
        raise DlvmError(f"target option '{name}' must be {article}, found {value!r}")
    if isinstance(value, float) and math.isnan(value):
        raise DlvmError(f"target option '{name}' must be a number, found nan")
    if isinstance(value, float) and math.isinf(value):
        raise DlvmError(f"target option '{name}' must be a finite number, found {value}")
    if minimum is not None and value < minimum:
        raise DlvmError(f"target option '{name}' must be at least {minimum:g}, found {value}")
    maximum = OPTION_MAXIMUM.get(name, INT64_MAX)
    if kind in (int, float) and value > maximum:
        raise DlvmError(f"target option '{name}' must be at most {int(maximum)}, found {value}")


@dataclass
class Target(ABC):
    """A code generator. Subclasses are dataclasses whose fields are their options."""

    name = "target"
    emits: ClassVar[tuple[str, ...]] = ()  # what `emit` writes, e.g. ("llvm", "asm", "obj")

    @abstractmethod
    def compile(self, module: Module) -> Executable: ...

    @staticmethod
    def availability() -> str | None:
        """None when this target can run code on this machine, else why not (a GPU target
        without a GPU); `dlvm plugins` shows it. Emitting code may work all the same."""
        return None

    def emit(self, module: Module, what: str) -> str | bytes:
        """The module as this target's code: text (`llvm`, `asm`, `ptx`) or bytes (`obj`)."""
        kinds = ", ".join(self.emits) or "nothing"
        raise DlvmError(f"target '{self.name}' cannot emit '{what}' (it emits: {kinds})")
