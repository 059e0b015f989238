"""What every target provides: `compile(module) -> Executable`, and calling conventions.

`Executable.call(name, *arrays)` always returns a tuple of numpy arrays;
tuple results are flattened in order (nested tuples depth-first).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import Module


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


class Executable(ABC):
    """A compiled module whose functions can be called with numpy arrays."""

    module: Module

    @abstractmethod
    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]: ...

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.module.functions if f.name and f.blocks]


@dataclass
class Target(ABC):
    """A code generator. Subclasses are dataclasses whose fields are their options."""

    name = "target"

    @abstractmethod
    def compile(self, module: Module) -> Executable: ...
