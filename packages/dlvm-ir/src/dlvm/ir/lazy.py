"""Packages whose names load on first use, so that importing a plugin's entry point is cheap.

Every `dlvm` command imports every installed plugin's entry-point module (`dlvm.onnx.plugin`,
`dlvm.llvm.plugin`, …), and importing a submodule runs its package's `__init__` first. A
package whose `__init__` re-exports its implementation would load ONNX, LLVM or Ray into
every command; with `lazy_exports` it loads them when a name is first read:

    # dlvm/onnx/__init__.py
    if TYPE_CHECKING:                     # what type checkers and readers see
        from .importer import load
    __getattr__ = lazy_exports(__name__, {"load": ".importer"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str],
                 before: Callable[[], object] | None = None) -> Callable[[str], Any]:
    """A module-level `__getattr__` (PEP 562) for `package`: `exports` maps each name to the
    module (relative to `package`) that defines it; `before()` runs once before the first
    such import (e.g. to register tables the modules fill)."""
    done: list[bool] = []

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        if before is not None and not done:
            before()
            done.append(True)
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)  # later reads find it directly
        return value

    return __getattr__
