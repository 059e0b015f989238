"""The stable entry points: run passes on a module, and compile it for a target."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .copies import carry_locations
from .core import DerivativeDecl, Function, Module, Value
from .diagnostics import DlvmError
from .passes import Pass, PassManager, PassRecord
from .pipeline import build_pipeline
from .plugin import install_hint, registry
from .printer import print_module
from .target import Executable

T = TypeVar("T")


def replace_all_uses(fn: Function, old: Value, new: Value) -> int:
    """Make every use of `old` in `fn` a use of `new` (operands, branch arguments, literal
    elements); returns the number of instructions changed."""
    count = 0
    mapping = {old: new}
    for block in fn.blocks:
        for inst in block.instructions:
            if inst.replace_uses(mapping):
                count += 1
    return count


def in_plugin(kind: str, obj: Any, what: str, run: Callable[[], T]) -> T:
    """`run()`, with an unexpected exception raised by a plugin's code reported as an error
    naming the plugin (a `DlvmError` is a deliberate message and passes unchanged)."""
    try:
        return run()
    except DlvmError:
        raise
    except Exception as e:
        owner = registry().owner(kind, obj)
        if owner is None or owner.first_party:
            raise
        raise DlvmError(f"{what} of {owner.label} failed: {type(e).__name__}: {e}") from e


def run_passes(
    module: Module,
    pipeline: str | list[Pass],
    *,
    verify_each: bool | None = None,
    print_after: Callable[[Pass, Module, bool], None] | None = None,
) -> list[PassRecord]:
    """Run pipeline text (`"cse,dce"`, `"inline{threshold=40},O2"`) or pass objects,
    verifying as `PassManager` says for `verify_each` (by default after each pass, or once
    at the end for modules of over 20,000 instructions)."""
    passes = build_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    return PassManager(passes, verify_each=verify_each, print_after=print_after).run(module)


def has_gradient_declarations(module: Module) -> bool:
    return any(isinstance(f.declaration, DerivativeDecl) for f in module.functions)


def clone(module: Module) -> Module:
    """A deep copy, through the canonical text form, whose parts keep the source locations
    of the originals (errors in the copy name the user's file, not the printed text)."""
    from .parser import parse

    copy = parse(print_module(module), f"<copy of {module.name}>")
    carry_locations(module, copy)
    return copy


def compile(module: Module, target: str | None = None, **options: Any) -> Executable:
    """Compile for a registered target (None: the fastest installed one).

    A module with gradient declarations is first differentiated (on a copy),
    which needs the `differentiation` pass from dlvm-ad.
    """
    reg = registry()
    if has_gradient_declarations(module):
        if not reg.has("pass", "differentiation"):
            raise DlvmError("the module has gradient declarations, which need the "
                            f"'differentiation' pass from dlvm-ad: {install_hint('dlvm-ad')}")
        module = clone(module)
        run_passes(module, "differentiation")
    made = reg.make_target(target, **options)
    return in_plugin("target", made, f"target '{made.name}'", lambda: made.compile(module))
