"""The in-memory IR: module → function → block → instruction.

Instructions keep their operands in named `fields`, laid out by their
`OpDef`'s syntax (see `opdef.py`). Any value nested in a field — a use, a
branch target's arguments, a key, a literal's elements — is an operand; the
generic walkers below find and replace them, so passes never need to know
an instruction's layout to rewrite its uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .diagnostics import Location
from .types import (
    INVALID,
    AliasDecl,
    FunctionType,
    NominalType,
    PointerType,
    Type,
    TypeDecl,
)

if TYPE_CHECKING:
    from .opdef import OpDef


class Value:
    """Anything an instruction can use."""

    __slots__ = ("name", "type")

    def __init__(self, type: Type, name: str | None = None) -> None:
        self.type = type
        self.name = name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name or '?'}: {self.type}>"


# ---------------------------------------------------------------- literals


class Literal:
    """An untyped literal; it becomes a value paired with a type."""

    __slots__ = ()

    def values(self) -> Iterator[Value]:
        return iter(())

    def map_values(self, fn: Callable[[Value], Value]) -> Literal:
        return self


@dataclass(frozen=True, slots=True, eq=False)
class ScalarLiteral(Literal):
    """A number or boolean as written. Two are equal when they are the same literal: `0.0`
    and `-0.0` differ (Python's `==` does not tell them apart), `nan` equals itself, and
    `1`, `1.0` and `true` are three literals."""

    value: bool | int | float

    def _key(self) -> tuple[type, bool | int | str]:
        v = self.value
        return type(v), (v.hex() if isinstance(v, float) else v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ScalarLiteral) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class KeywordLiteral(Literal):
    """`zero`, `undefined` or `null`."""

    keyword: str


ZERO = KeywordLiteral("zero")
UNDEFINED = KeywordLiteral("undefined")
NULL = KeywordLiteral("null")


@dataclass(frozen=True, slots=True)
class AggregateLiteral(Literal):
    """`<…>` tensor, `(…)` tuple, `[…]` array, `{#k = …}` struct or `?case(…)` enum.

    `keys` holds the struct's field names or, for an enum, the case name.
    """

    kind: str  # "tensor" | "tuple" | "array" | "struct" | "enum"
    elements: tuple[Value, ...]
    keys: tuple[str, ...] = ()

    def values(self) -> Iterator[Value]:
        for e in self.elements:
            yield e
            yield from iter_nested(e)

    def map_values(self, fn: Callable[[Value], Value]) -> Literal:
        return AggregateLiteral(self.kind, tuple(fn(e) for e in self.elements), self.keys)


class LiteralValue(Value):
    """A literal used as an operand: `1: f32`, `(%a: f32, %b: f32): (f32, f32)`."""

    __slots__ = ("literal",)

    def __init__(self, literal: Literal, type: Type) -> None:
        super().__init__(type)
        self.literal = literal

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LiteralValue)
            and self.type == other.type
            and self.literal == other.literal
        )

    def __hash__(self) -> int:
        return hash((self.literal, self.type))

    def __repr__(self) -> str:
        return f"<LiteralValue {self.literal}: {self.type}>"


def iter_nested(value: Value) -> Iterator[Value]:
    """Values nested inside a literal value (not the value itself)."""
    if isinstance(value, LiteralValue):
        yield from value.literal.values()


# ---------------------------------------------------------------- field payloads


@dataclass(frozen=True, slots=True)
class FieldKey:
    """`#name` in an `extract`/`insert`/`elementPointer` key path."""

    name: str


@dataclass(slots=True)
class BranchTarget:
    block: Block
    args: list[Value]


@dataclass(frozen=True, slots=True)
class BuiltinRef:
    """`builtin "name"` used as a reduction combinator."""

    name: str


def _walk(obj: Any) -> Iterator[Value]:
    if isinstance(obj, Value):
        yield obj
        yield from iter_nested(obj)
    elif isinstance(obj, list | tuple):
        for x in obj:
            yield from _walk(x)
    elif isinstance(obj, BranchTarget):
        yield from _walk(obj.args)


def _map(obj: Any, fn: Callable[[Value], Value]) -> Any:
    """`obj` with every value mapped through `fn`; the same object when nothing changed."""
    if isinstance(obj, LiteralValue):
        new = fn(obj)
        if new is not obj:
            return new
        lit = obj.literal.map_values(lambda v: _map(v, fn))
        return obj if lit == obj.literal else LiteralValue(lit, obj.type)
    if isinstance(obj, Value):
        return fn(obj)
    if isinstance(obj, list | tuple):
        items = [_map(x, fn) for x in obj]
        if all(a is b for a, b in zip(items, obj, strict=True)):
            return obj
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, BranchTarget):
        args = _map(obj.args, fn)
        if args is not obj.args:
            obj.args = args  # targets are updated in place, so holders stay valid
        return obj
    return obj


# ---------------------------------------------------------------- instructions


class Instruction(Value):
    """One instruction; `op` defines its syntax, type rule, traits and semantics."""

    __slots__ = ("block", "fields", "location", "op")

    def __init__(
        self,
        op: OpDef,
        fields: dict[str, Any],
        type: Type = INVALID,
        name: str | None = None,
        location: Location | None = None,
    ) -> None:
        super().__init__(type, name)
        self.op = op
        self.fields = fields
        self.block: Block | None = None
        self.location = location

    def __getattr__(self, key: str) -> Any:
        # Field access by name: `inst.lhs`, `inst.dims`.
        try:
            return object.__getattribute__(self, "fields")[key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def opcode(self) -> str:
        return self.op.name

    @property
    def operands(self) -> list[Value]:
        """Every value this instruction uses, nested ones included, in syntax order."""
        return [v for f in self.op.value_fields for v in _walk(self.fields.get(f))]

    @property
    def targets(self) -> list[BranchTarget]:
        out: list[BranchTarget] = []
        for f in self.op.target_fields:
            x = self.fields.get(f)
            if isinstance(x, BranchTarget):
                out.append(x)
            elif isinstance(x, list):  # enum cases: [(case, BranchTarget)]
                out.extend(t for _, t in x)
        return out

    @property
    def successors(self) -> list[Block]:
        return [t.block for t in self.targets]

    def has_trait(self, trait: str) -> bool:
        return trait in self.op.traits

    @property
    def is_terminator(self) -> bool:
        return "terminator" in self.op.traits

    def map_operands(self, fn: Callable[[Value], Value]) -> bool:
        """Rewrite every operand through `fn`; True if anything changed."""
        changed = False

        def tracked(v: Value) -> Value:
            nonlocal changed
            new = fn(v)
            changed = changed or new is not v
            return new

        for f in self.op.value_fields:
            if f in self.fields:
                self.fields[f] = _map(self.fields[f], tracked)
        if changed and self.block is not None:
            self.block._changed()
        return changed

    def replace_uses(self, mapping: dict[Value, Value]) -> bool:
        return self.map_operands(
            lambda v: v if isinstance(v, LiteralValue) else mapping.get(v, v))

    def erase(self) -> None:
        """Remove from the parent block."""
        if self.block is not None:
            self.block.remove(self)

    def index(self) -> int:
        assert self.block is not None
        return self.block.instructions.index(self)


class Argument(Value):
    """A block argument (the entry block's are the function's parameters)."""

    __slots__ = ("block",)

    def __init__(self, type: Type, name: str | None = None, block: Block | None = None) -> None:
        super().__init__(type, name)
        self.block = block

    def index(self) -> int:
        assert self.block is not None
        return self.block.arguments.index(self)


class Block:
    __slots__ = ("arguments", "function", "instructions", "location", "name")

    def __init__(self, name: str | None = None, arguments: list[Argument] | None = None) -> None:
        self.name = name
        self.arguments: list[Argument] = []
        self.instructions: list[Instruction] = []
        self.function: Function | None = None
        self.location: Location | None = None
        for a in arguments or []:
            self.add_argument(a)

    def __repr__(self) -> str:
        return f"<Block {self.name or '?'}>"

    def _changed(self) -> None:
        if self.function is not None:
            self.function.invalidate()

    def add_argument(self, arg: Argument) -> Argument:
        arg.block = self
        self.arguments.append(arg)
        self._changed()
        return arg

    def remove_argument(self, arg: Argument) -> None:
        self.arguments.remove(arg)
        arg.block = None
        self._changed()

    def append(self, inst: Instruction) -> Instruction:
        return self.insert(len(self.instructions), inst)

    def insert(self, index: int, inst: Instruction) -> Instruction:
        inst.block = self
        self.instructions.insert(index, inst)
        self._changed()
        return inst

    def insert_before(self, anchor: Instruction, inst: Instruction) -> Instruction:
        return self.insert(self.instructions.index(anchor), inst)

    def remove(self, inst: Instruction) -> None:
        self.instructions.remove(inst)
        inst.block = None
        self._changed()

    @property
    def terminator(self) -> Instruction | None:
        if self.instructions and self.instructions[-1].is_terminator:
            return self.instructions[-1]
        return None

    @property
    def successors(self) -> list[Block]:
        t = self.terminator
        return t.successors if t is not None else []

    def index(self) -> int:
        assert self.function is not None
        return self.function.blocks.index(self)


@dataclass(slots=True)
class DerivativeDecl:
    """`[gradient @f from S wrt i… keeping k… seedable]` on a bodiless function."""

    kind: str  # "gradient"
    of: Value  # the Function (a forward reference while parsing)
    from_index: int | None = None
    wrt: tuple[int, ...] | None = None
    keeping: tuple[int, ...] = ()
    seedable: bool = False
    location: Location | None = None


class Function(Value):
    """A function definition (with blocks) or declaration (without)."""

    __slots__ = ("_analyses", "attributes", "blocks", "declaration", "location", "module")

    def __init__(
        self,
        name: str | None,
        type: FunctionType,
        *,
        attributes: tuple[str, ...] = (),
        declaration: DerivativeDecl | str | None = None,
    ) -> None:
        super().__init__(type, name)
        self.blocks: list[Block] = []
        self.attributes = list(attributes)
        # None: a definition; "extern": an external declaration; or a DerivativeDecl.
        self.declaration = declaration
        self.module: Module | None = None
        self.location: Location | None = None
        self._analyses: dict[Any, Any] = {}

    @property
    def type_(self) -> FunctionType:
        assert isinstance(self.type, FunctionType)
        return self.type

    @property
    def is_declaration(self) -> bool:
        return not self.blocks

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    def append_block(self, block: Block) -> Block:
        return self.insert_block(len(self.blocks), block)

    def insert_block(self, index: int, block: Block) -> Block:
        block.function = self
        self.blocks.insert(index, block)
        self.invalidate()
        return block

    def remove_block(self, block: Block) -> None:
        self.blocks.remove(block)
        block.function = None
        self.invalidate()

    def instructions(self) -> Iterator[Instruction]:
        for b in self.blocks:
            yield from b.instructions

    def invalidate(self) -> None:
        """Drop cached analyses after a change."""
        if self._analyses:
            self._analyses.clear()
        if self.module is not None:
            self.module.invalidate()

    def analysis(self, kind: Callable[[Function], Any]) -> Any:
        """The cached result of `kind(self)`, computed on first request."""
        try:
            return self._analyses[kind]
        except KeyError:
            result = self._analyses[kind] = kind(self)
            return result


class GlobalVariable(Value):
    """`var @name: T`; its uses have type `*T`."""

    __slots__ = ("location", "module", "value_type")

    def __init__(self, name: str | None, value_type: Type) -> None:
        super().__init__(PointerType(value_type), name)
        self.value_type = value_type
        self.module: Module | None = None
        self.location: Location | None = None


class Module:
    """A compilation unit: type declarations, global variables and functions."""

    def __init__(self, name: str = "main", stage: str = "raw") -> None:
        self.name = name
        self.stage = stage
        self.type_decls: dict[str, TypeDecl] = {}
        self.globals: list[GlobalVariable] = []
        self.functions: list[Function] = []
        self._analyses: dict[Any, Any] = {}

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)

    def __repr__(self) -> str:
        return f"<Module {self.name!r}: {len(self.functions)} functions>"

    def invalidate(self) -> None:
        if self._analyses:
            self._analyses.clear()

    def analysis(self, kind: Callable[[Module], Any]) -> Any:
        try:
            return self._analyses[kind]
        except KeyError:
            result = self._analyses[kind] = kind(self)
            return result

    def add_function(self, fn: Function, index: int | None = None) -> Function:
        fn.module = self
        self.functions.insert(len(self.functions) if index is None else index, fn)
        self.invalidate()
        return fn

    def remove_function(self, fn: Function) -> None:
        self.functions.remove(fn)
        fn.module = None
        self.invalidate()

    def add_global(self, var: GlobalVariable) -> GlobalVariable:
        var.module = self
        self.globals.append(var)
        self.invalidate()
        return var

    def add_type(self, decl: TypeDecl) -> TypeDecl:
        self.type_decls[decl.name] = decl
        return decl

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)

    def __getitem__(self, name: str) -> Function:
        fn = self.function(name)
        if fn is None:
            raise KeyError(name)
        return fn

    def resolve(self, t: Type) -> Type:
        """Follow transparent aliases to the underlying type."""
        if not isinstance(t, NominalType):
            return t
        seen: set[str] = set()
        while isinstance(t, NominalType) and t.name not in seen:
            seen.add(t.name)
            decl = self.type_decls.get(t.name)
            if not isinstance(decl, AliasDecl) or decl.target is None:
                return t
            t = decl.target
        return t
