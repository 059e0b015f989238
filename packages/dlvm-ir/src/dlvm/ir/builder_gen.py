"""Writes `builder_methods.py`: one typed `Builder` method per built-in instruction.

The methods are generated from the `OpDef` table, so editors and type checkers see every
instruction's operands while the table stays the one place that defines them. Run
`python -m dlvm.ir.builder_gen` after adding or changing a built-in instruction; a test
fails while the file is out of date. (A plugin's instructions are reached through
`Builder.create` or `Builder.__getattr__`.)
"""

from __future__ import annotations

import keyword
import sys
from pathlib import Path

from .opdef import OPS, OpDef, Piece

TARGET = Path(__file__).with_name("builder_methods.py")

# field kind → the Python type a method accepts for it
ANNOTATIONS = {
    "use": "Operand",
    "literal_use": "Operand",
    "uses": "Sequence[Operand]",
    "call_args": "Sequence[Operand]",
    "keys": "Sequence[Key]",
    "target": "Target",
    "enum_cases": "Sequence[tuple[str, Target]]",
    "combinator": "Combinator",
    "callee": "Value",
    "int": "int",
    "ints": "Sequence[int]",
    "dtype": "DataType",
    "type": "Type",
    "shape": "Sequence[int | None]",
    "padding_mode": "str",
    "pads": "Sequence[tuple[int, int]]",
    "string": "str",
    "signature": "Type",
}
# Builder methods of the same name do something else (`insert` places an instruction,
# `literal` builds one from a Python value): those instructions take a trailing underscore,
# like Python keywords, which `Builder.__getattr__` understands too.
TAKEN = {"insert", "literal", "function", "declare", "create", "call", "tuple"}
# Fields the builder fills in when omitted: `apply`'s result comes from the callee's type.
INFERRED = {("apply", "result")}

HEADER = '''"""Typed `Builder` methods, one per built-in instruction.

Generated from the `OpDef` table by `python -m dlvm.ir.builder_gen`; do not edit by hand.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from .core import Block, BranchTarget, BuiltinRef, Instruction, Value
    from .types import DataType, Type

Operand: TypeAlias = "Value | bool | int | float"
Key: TypeAlias = "int | str | Value"
Target: TypeAlias = "BranchTarget | Block | tuple[Block, Sequence[Value]]"
Combinator: TypeAlias = "str | BuiltinRef | Value"


class InstructionMethods:
    """`b.add(x, y)`, `b.dot(a, w)`, …: positional arguments in syntax order; the result type
    comes from the instruction's type rule."""

    if TYPE_CHECKING:
        def create(self, opcode: str, *args: Any, name: str | None = None,
                   **fields: Any) -> Instruction: ...
'''


def method_name(op: OpDef) -> str:
    if op.name == "return":
        return "ret"
    if keyword.iskeyword(op.name) or op.name in TAKEN:
        return op.name + "_"
    return op.name


def optional_fields(pieces: tuple[Piece, ...], inside: bool = False) -> set[str]:
    out: set[str] = set()
    for p in pieces:
        if p.kind == "field" and inside:
            out.add(p.text)
        elif p.kind == "optional":
            out |= optional_fields(p.children, True)
    return out


def parameter(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def render_method(op: OpDef) -> str:
    optional = optional_fields(op.format) | {f for o, f in INFERRED if o == op.name}
    params, passed = ["self"], []
    # A key path comes after the aggregate it indexes (`b.extract(tuple_value, [0])`), as in
    # `insert` and `elementPointer`, although `extract` writes it first.
    fields = sorted(op.fields, key=lambda f: f[1] == "keys")
    for field, kind in fields:
        p = parameter(field)
        annotation = ANNOTATIONS[kind]
        params.append(f"{p}: {annotation} | None = None" if field in optional
                      else f"{p}: {annotation}")
        passed.append(f"{field}={p}" if p == field else f"**{{{field!r}: {p}}}")
    params.append("*, name: str | None = None")
    summary = op.summary or op.name
    doc = f"`{op.syntax.strip()}`: {summary}."
    call = ", ".join([repr(op.name), *passed, "name=name"])
    return (f"    def {method_name(op)}({', '.join(params)}) -> Instruction:\n"
            f"        {doc!r}\n"
            f"        return self.create({call})\n")


def render() -> str:
    """The module's text for the instructions defined now (built-ins only when run as a
    script, since plugins load later)."""
    methods = [render_method(op) for op in OPS.values()]
    return HEADER + "\n" + "\n".join(methods)


def main() -> None:
    from . import instructions  # noqa: F401  the built-in instruction set

    TARGET.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {TARGET}\n")


if __name__ == "__main__":
    main()
