"""Linking: one module from two, as `llvm-link` does.

A function declared `extern` in one module and defined in the other becomes the definition
(its uses, calls and derivative declarations included, now refer to it); type declarations
may repeat when they declare the same type. Anything else declared twice is an error.
"""

from __future__ import annotations

from dataclasses import fields

from .core import DerivativeDecl, Function, Module, Value
from .diagnostics import DlvmError
from .types import TypeDecl, types_compatible


def _same_type_decl(a: TypeDecl, b: TypeDecl) -> bool:
    """The same kind of declaration with the same contents (wherever it is written)."""
    keys = [f.name for f in fields(a) if f.name != "location"]  # type: ignore[arg-type]
    return type(a) is type(b) and all(getattr(a, k) == getattr(b, k) for k in keys)


def _external(fn: Function) -> bool:
    """A declaration without a body that is not a derivative declaration."""
    return not fn.blocks and not isinstance(fn.declaration, DerivativeDecl)


def link(module: Module, other: Module, name: str = "the linked module") -> Module:
    """Move `other`'s declarations into `module` (which is returned); `name` names `other`
    in errors."""
    for key, decl in other.type_decls.items():
        mine = module.type_decls.get(key)
        if mine is None:
            module.add_type(decl)
        elif not _same_type_decl(mine, decl):
            raise DlvmError(f"{name}: type '${key}' is declared differently in the module")
    for var in other.globals:
        if any(g.name == var.name for g in module.globals):
            raise DlvmError(f"{name}: global '@{var.name}' is declared in both modules")
    mapping: dict[Value, Value] = {}
    moved: list[Function] = []
    for fn in list(other.functions):
        mine = module.function(fn.name) if fn.name else None
        if mine is None:
            moved.append(fn)
            continue
        a, b = module.resolve_deep(mine.type), other.resolve_deep(fn.type)
        if not types_compatible(a, b):
            raise DlvmError(f"{name}: '@{fn.name}' has type '{fn.type}' but the module's has "
                            f"type '{mine.type}'")
        if _external(fn):
            mapping[fn] = mine
        elif _external(mine):
            mapping[mine] = fn
            module.remove_function(mine)
            moved.append(fn)
        else:
            raise DlvmError(f"{name}: '@{fn.name}' is defined in both modules")
    for var in list(other.globals):
        module.add_global(var)
    for fn in moved:
        other.functions.remove(fn)
        module.add_function(fn)
    if mapping:
        for fn in module.functions:
            decl = fn.declaration
            if isinstance(decl, DerivativeDecl) and decl.of in mapping:
                decl.of = mapping[decl.of]
            for block in fn.blocks:
                for inst in block.instructions:
                    inst.replace_uses(mapping)
    if other.stage == "raw":
        module.stage = "raw"
    module.invalidate()
    return module
