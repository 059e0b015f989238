"""The Python names of TEL names in the module `dlvm tel generate` writes.

A TEL name is any `[A-Za-z_][A-Za-z0-9_]*`, so it may be a Python keyword (`lambda`), a
name the generated code uses itself (`self`, `lr`, `parameters`, `np`, `float`), or begin
with two underscores (which Python renames inside a class). Such a name is mangled rather
than refused, so every model gets a class that imports and works: it gets a `_` at the end
(`lambda_`), more while the result is taken (`lambda__` when the model also has a
`lambda_`); one that begins with two underscores loses them first (`__w` → `w_`). The
archive `save` writes and the dictionaries `parameters` and `grad` return keep the TEL
names.
"""

from __future__ import annotations

import keyword

# The names the generated code defines or reads besides the TEL names, by where a TEL name
# meets them. The class's scope: its members, and what its annotations and decorators read
# there (a parameter attribute named `float` would be the `float` of `-> float`):
CLASS_SCOPE = frozenset({
    "parameters", "loss", "grad", "step", "save", "load", "_executable", "_packed",
    "optimizer_state",
    "Array", "Path", "Any", "int", "float", "str", "dict", "tuple", "property",
})
# The methods that take the model's inputs as arguments (`__call__`, `loss`, `grad`,
# `step`): their other arguments, locals, and the globals and builtins they read.
METHOD_SCOPE = frozenset({
    "self", "lr", "out", "value", "grads", "g", "key", "attribute", "state", "ATTRIBUTES",
    "PARAMETERS", "STATE", "np", "dict", "zip", "float", "getattr", "setattr", "tuple", "len",
})
# The module: its imports, constants and functions, and the builtins its code reads (the
# class is defined among them).
MODULE_SCOPE = frozenset({
    "annotations", "Path", "Any", "ir", "files", "np", "npt", "Array", "IR", "PARAMETERS",
    "ATTRIBUTES", "STATE", "checked", "ValueError", "Exception", "isinstance", "property",
    "int", "float", "str", "dict", "tuple", "zip", "getattr", "setattr", "len",
})
MEMBER_NAMES = CLASS_SCOPE | METHOD_SCOPE  # what a parameter or an input may not be called


def reserved(name: str, taken: frozenset[str] = MEMBER_NAMES) -> bool:
    """Whether `name` cannot be used as it is where the generated code uses `taken`."""
    return keyword.iskeyword(name) or name in taken or name.startswith("__")


def mangled(name: str, taken: set[str], scope: frozenset[str] = MEMBER_NAMES) -> str:
    """`name` made usable in `scope` and not in `taken` (which it joins)."""
    if not reserved(name, scope) and name not in taken:
        taken.add(name)
        return name
    base = (name.lstrip("_") or "name") if name.startswith("__") else name
    candidate = f"{base}_"
    while reserved(candidate, scope) or candidate in taken:
        candidate += "_"
    taken.add(candidate)
    return candidate


def python_names(names: list[str]) -> dict[str, str]:
    """Each TEL name's Python name: itself when usable, mangled otherwise. A mangled name
    is none of the TEL names, so two never meet."""
    taken = {n for n in names if not reserved(n)}
    out: dict[str, str] = {}
    for name in names:
        out[name] = name if not reserved(name) else mangled(name, taken)
    return out


def class_name(module: str) -> str:
    """The class of the TEL module `module`: its words capitalized (`digit_model` →
    `DigitModel`), `Model` when it has none, a `_` at the end when the result is reserved
    (`module None` → `None_`, `module IR` → `IR_`)."""
    words = [w for w in module.split("_") if w]
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Model"
    if not name[0].isalpha():
        name = f"Model{name}"
    return mangled(name, set(), MODULE_SCOPE)
