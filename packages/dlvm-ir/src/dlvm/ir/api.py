"""The stable entry points: run passes on a module, and compile it for a target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import DerivativeDecl, Module
from .diagnostics import DlvmError
from .passes import Pass, PassManager, PassRecord
from .pipeline import build_pipeline
from .plugin import registry
from .printer import print_module
from .target import Executable


def run_passes(
    module: Module,
    pipeline: str | list[Pass],
    *,
    verify_each: bool = True,
    print_after: Callable[[Pass, Module, bool], None] | None = None,
) -> list[PassRecord]:
    """Run pipeline text (`"cse,dce"`, `"inline{threshold=40},O2"`) or pass objects."""
    passes = build_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    return PassManager(passes, verify_each=verify_each, print_after=print_after).run(module)


def has_gradient_declarations(module: Module) -> bool:
    return any(isinstance(f.declaration, DerivativeDecl) for f in module.functions)


def clone(module: Module) -> Module:
    """A deep copy, through the canonical text form."""
    from .parser import parse

    return parse(print_module(module), f"<copy of {module.name}>")


def compile(module: Module, target: str | None = None, **options: Any) -> Executable:
    """Compile for a registered target (None: the fastest installed one).

    A module with gradient declarations is first differentiated (on a copy),
    which needs the `differentiation` pass from dlvm-ad.
    """
    reg = registry()
    if has_gradient_declarations(module):
        if not reg.has("pass", "differentiation"):
            raise DlvmError("the module has gradient declarations, which need the "
                            "'differentiation' pass from dlvm-ad: pip install dlvm-ad")
        module = clone(module)
        run_passes(module, "differentiation")
    return reg.make_target(target, **options).compile(module)
