"""Instruction definitions: one `OpDef` per opcode, kept in one table.

An `OpDef` is the single place that defines an instruction — its name, its
syntax (a small format string from which the parser and the printer
follow), its type rule, its traits and its numpy semantics. Other packages
attach their own rules (adjoints, folding, lowering) to it by opcode, in
their own tables; a plugin adds an instruction by calling `define`.

The table holds every installed instruction: a name that `lookup` does not
find makes it load the plugin registry once (whose `register_instructions`
hooks define the plugins' instructions) and look again, so parsing sees a
plugin's instructions without the caller loading plugins first.

Format strings are space-separated pieces:
  `word`            a keyword, printed and expected verbatim
  `,`               a comma
  `$name`           an operand use `%v: T` (or a literal `1: f32`)
  `$name:kind`      a field of another kind, see `FIELD_KINDS`
  `[ … ]`           an optional group, present when its first piece is
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import Instruction, Module
    from .types import Type

# Field kinds and whether they can hold values (operands).
FIELD_KINDS: dict[str, bool] = {
    "use": True,  # %v: T
    "uses": True,  # %a: T, %b: U  (one or more)
    "call_args": True,  # (%a: T, …)  (zero or more, parenthesized)
    "literal_use": True,  # a use that may be an aggregate literal
    "keys": True,  # 0, #field, %i: i64
    "target": True,  # 'block(%a: T, …)
    "enum_cases": True,  # case ?c 'block case ?d 'block
    "combinator": True,  # add | builtin "max" | @f: (T, T) -> T
    "callee": True,  # @f or %v, untyped
    "int": False,
    "ints": False,  # 1, 2, 3
    "dtype": False,  # f32
    "type": False,  # any type
    "shape": False,  # 2 x 3 | scalar
    "padding_mode": False,  # none | half | full
    "pads": False,  # (lo, hi), (lo, hi)
    "string": False,  # "name"
    "signature": False,  # -> R   (or the paper-era `: (T…) -> R`)
}

TRAITS = frozenset(
    {
        "pure",  # no side effects: may be removed or moved when unused
        "elementwise",  # maps elements independently (with broadcasting)
        "commutative",  # swapping the two operands gives the same result
        "terminator",  # ends a block
        "side_effects",  # writes memory, or state visible to others
        "may_trap",  # may stop the program whatever its operands
        "may_trap_on_integers",  # may stop the program on integer operands (x / 0)
        "cast",  # changes only shape or type metadata
        "reduction",  # folds a tensor along dimensions (reduce, unbroadcast)
        "call",
    }
)


@dataclass(frozen=True, slots=True)
class Piece:
    kind: str  # "keyword" | "punct" | "field" | "optional"
    text: str = ""  # keyword text, punctuation, or field name
    field_kind: str = ""
    children: tuple[Piece, ...] = ()


class TypeRuleError(Exception):
    """A type rule rejected an instruction; the message says why."""


Evaluate = Callable[["Instruction", Any], Any]
Infer = Callable[["Instruction", "Module | None"], "Type"]


@dataclass(eq=False)
class OpDef:
    name: str
    format: tuple[Piece, ...]
    infer: Infer
    traits: frozenset[str] = frozenset()
    evaluate: Evaluate | None = None
    aliases: tuple[str, ...] = ()
    summary: str = ""
    category: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    fields: tuple[tuple[str, str], ...] = ()  # (name, kind) in syntax order
    value_fields: tuple[str, ...] = ()
    target_fields: tuple[str, ...] = ()
    module: str = ""  # the module that called `define`
    provider: str = ""  # the distribution that defined it ("" when unknown)

    def __post_init__(self) -> None:
        fields = tuple(_fields_of(self.format))
        self.fields = fields
        self.value_fields = tuple(n for n, k in fields if FIELD_KINDS[k])
        self.target_fields = tuple(n for n, k in fields if k in ("target", "enum_cases"))
        unknown = self.traits - TRAITS
        if unknown:
            raise ValueError(f"{self.name}: unknown traits {sorted(unknown)}")

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"

    def __hash__(self) -> int:
        return id(self)

    @property
    def syntax(self) -> str:
        """The format as a human-readable string (for docs and errors)."""
        return self.name + " " + " ".join(_render(p) for p in self.format)


def _fields_of(pieces: tuple[Piece, ...]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for p in pieces:
        if p.kind == "field":
            out.append((p.text, p.field_kind))
        elif p.kind == "optional":
            out.extend(_fields_of(p.children))
    return out


def _render(p: Piece) -> str:
    if p.kind == "optional":
        return "[" + " ".join(_render(c) for c in p.children) + "]"
    if p.kind == "field":
        return f"${p.text}" if p.field_kind == "use" else f"${p.text}:{p.field_kind}"
    return p.text


def compile_format(spec: str) -> tuple[Piece, ...]:
    """Turn a format string into pieces (see the module docstring)."""
    words = spec.replace("[", " [ ").replace("]", " ] ").replace(",", " , ").split()
    stack: list[list[Piece]] = [[]]
    for w in words:
        if w == "[":
            stack.append([])
        elif w == "]":
            group = tuple(stack.pop())
            if not group:
                raise ValueError(f"empty optional group in {spec!r}")
            stack[-1].append(Piece("optional", children=group))
        elif w == ",":
            stack[-1].append(Piece("punct", ","))
        elif w.startswith("$"):
            name, _, kind = w[1:].partition(":")
            kind = kind or "use"
            if kind not in FIELD_KINDS:
                raise ValueError(f"unknown field kind {kind!r} in {spec!r}")
            stack[-1].append(Piece("field", name, kind))
        else:
            stack[-1].append(Piece("keyword", w))
    if len(stack) != 1:
        raise ValueError(f"unbalanced [ ] in {spec!r}")
    return tuple(stack[0])


# ---------------------------------------------------------------- the table

OPS: dict[str, OpDef] = {}
ALIASES: dict[str, str] = {}

BUILTIN_PROVIDER = "dlvm-ir"
_PROVIDER: ContextVar[str] = ContextVar("dlvm_ir_instruction_provider", default="")
_plugins_loaded = False


@contextmanager
def provided_by(distribution: str) -> Iterator[None]:
    """Attribute the instructions defined inside the block to `distribution`.

    The plugin registry wraps each plugin's loading in it, so that `dlvm plugins`
    can name the distribution behind every instruction.
    """
    token = _PROVIDER.set(distribution)
    try:
        yield
    finally:
        _PROVIDER.reset(token)


def define(
    name: str,
    format: str,
    infer: Infer,
    *,
    traits: tuple[str, ...] | frozenset[str] = (),
    evaluate: Evaluate | None = None,
    aliases: tuple[str, ...] = (),
    summary: str = "",
    category: str = "",
    **extra: Any,
) -> OpDef:
    """Register an instruction. Redefining an opcode or alias is an error naming the
    distribution that has it (recorded from `provided_by`, or dlvm-ir's own modules)."""
    for taken in (name, *aliases):
        if taken in OPS or taken in ALIASES:
            owner = OPS[ALIASES.get(taken, taken)].provider
            by = f" by {owner}" if owner else ""
            raise ValueError(f"instruction {taken!r} is already defined{by}")
    module = sys._getframe(1).f_globals.get("__name__", "")
    provider = _PROVIDER.get() or (BUILTIN_PROVIDER if _in_dlvm_ir(module) else "")
    op = OpDef(
        name=name,
        format=compile_format(format),
        infer=infer,
        traits=frozenset(traits),
        evaluate=evaluate,
        aliases=aliases,
        summary=summary,
        category=category,
        extra=dict(extra),
        module=module,
        provider=provider,
    )
    OPS[name] = op
    for a in aliases:
        ALIASES[a] = name
    return op


def _in_dlvm_ir(module: str) -> bool:
    return module == "dlvm.ir" or module.startswith("dlvm.ir.")


def lookup(name: str) -> OpDef | None:
    """The definition of an opcode or of one of its aliases.

    A miss loads the installed plugins' instructions (once per process) and looks again.
    """
    op = _find(name)
    if op is None and not _plugins_loaded:
        ensure_instructions()
        op = _find(name)
    return op


def _find(name: str) -> OpDef | None:
    op = OPS.get(name)
    if op is None and name in ALIASES:
        op = OPS[ALIASES[name]]
    return op


def ensure_instructions() -> None:
    """Define every installed plugin's instructions, by loading the plugin registry.

    Runs at most once per process, and is a no-op while the registry is being
    loaded; call it before listing `OPS`. (`dlvm.ir.registry()` does the same.)
    """
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from .plugin import registry  # imported late: the registry imports plugins, which import us

    registry()
