"""The in-memory IR: module → function → block → instruction.

Instructions keep their operands in named `fields`, laid out by their
`OpDef`'s syntax (see `opdef.py`). Any value nested in a field — a use, a
branch target's arguments, a key, a literal's elements — is an operand; the
generic walkers below find and replace them, so passes never need to know
an instruction's layout to rewrite its uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .diagnostics import Location
from .types import (
    INVALID,
    AliasDecl,
    ArrayType,
    FunctionType,
    NominalType,
    PointerType,
    TupleType,
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


@dataclass(frozen=True, slots=True)
class DenseLiteral(Literal):
    """`dense "0x…"`: a static tensor's elements as raw bytes, row-major and little-endian
    (booleans one byte each) — how large constants such as a model's weights are kept and
    written, without one literal object per element."""

    data: bytes

    @staticmethod
    def of(array: Any) -> DenseLiteral:
        import numpy as np

        a = np.ascontiguousarray(array)
        return DenseLiteral(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())

    def array(self, dtype: Any, shape: tuple[int, ...]) -> Any:
        """The elements as a read-only numpy array of `dtype` and `shape`."""
        import numpy as np

        a = np.frombuffer(self.data, np.dtype(dtype).newbyteorder("<")).reshape(shape)
        return a.astype(np.dtype(dtype), copy=False)


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

    def __post_init__(self) -> None:
        # a literal is a value: hashable, whatever sequence it was made from
        if not isinstance(self.elements, tuple):
            object.__setattr__(self, "elements", tuple(self.elements))
        if not isinstance(self.keys, tuple):
            object.__setattr__(self, "keys", tuple(self.keys))

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


def _collect(obj: Any, out: list[Value]) -> None:
    """`out` extended by `_walk(obj)`, without a generator per value (the hot path)."""
    if isinstance(obj, Value):
        out.append(obj)
        if isinstance(obj, LiteralValue) and not isinstance(
                obj.literal, ScalarLiteral | KeywordLiteral):
            out.extend(obj.literal.values())
    elif isinstance(obj, list | tuple):
        for x in obj:
            _collect(x, out)
    elif isinstance(obj, BranchTarget):
        for x in obj.args:
            _collect(x, out)


def _mentions(obj: Any, mapping: dict[Value, Value]) -> bool:
    """Whether a value in `obj` other than a literal is a key of `mapping` (values nested
    in literals included), found without building the operand list."""
    if isinstance(obj, LiteralValue):
        return not isinstance(obj.literal, ScalarLiteral | KeywordLiteral) and any(
            not isinstance(v, LiteralValue) and v in mapping for v in obj.literal.values())
    if isinstance(obj, Value):
        return obj in mapping
    if isinstance(obj, list | tuple):
        return any(_mentions(x, mapping) for x in obj)
    if isinstance(obj, BranchTarget):
        return any(_mentions(x, mapping) for x in obj.args)
    return False


class UniqueNames:
    """Names not yet taken: `base`, else `base2`, `base3`… (`base.1`, `base.2`… with
    `separator="."`). The taken set is collected once by the caller, so naming n new
    values costs O(n), not a scan of the function each time."""

    def __init__(self, taken: Iterable[str | None] = (), separator: str = "") -> None:
        self.taken: set[str] = {n for n in taken if n}
        self.separator = separator

    def __call__(self, base: str) -> str:
        name, k = base, 1 if not self.separator else 0
        while name in self.taken:
            k += 1
            name = f"{base}{self.separator}{k}"
        self.taken.add(name)
        return name


def copy_field(obj: Any, values: dict[Value, Value], blocks: dict[Block, Block]) -> Any:
    """A copy of an instruction field for a copied function: values (also inside literals)
    and branch targets' blocks mapped through `values` and `blocks`, anything not in them
    kept; targets are new objects, so the copy shares nothing mutable with the original."""
    if isinstance(obj, LiteralValue):
        literal = obj.literal.map_values(lambda v: copy_field(v, values, blocks))
        return obj if literal == obj.literal else LiteralValue(literal, obj.type)
    if isinstance(obj, Value):
        return values.get(obj, obj)
    if isinstance(obj, BranchTarget):
        return BranchTarget(blocks.get(obj.block, obj.block),
                            [copy_field(a, values, blocks) for a in obj.args])
    if isinstance(obj, list):
        return [copy_field(x, values, blocks) for x in obj]
    if isinstance(obj, tuple):
        return tuple(copy_field(x, values, blocks) for x in obj)
    return obj


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


# ---------------------------------------------------------------- positions


class IndexedList(list):  # type: ignore[type-arg]
    """A list that finds the position of an item by identity in about O(√n), not O(n).

    Blocks hold their instructions, and functions their blocks, in one of these, so that
    `inst.index()`, `block.remove(inst)` and inserting before an instruction stay cheap in
    blocks of 100,000 instructions, where a pass may do each thousands of times. It is a
    plain list to everything that reads it. Positions are cached and, after an insertion or
    a deletion in the middle, corrected by replaying the short log of such edits since the
    cache was built; the log is dropped (and the cache rebuilt on the next question) once it
    is as long as √n. A cached answer is always checked by identity, so a change the list
    did not see (none is known) costs a rebuild, never a wrong position. Items are compared
    by identity, as `==` does for instructions and blocks; a list holding an item twice
    answers as `list.index` does, by search.
    """

    __slots__ = ("_log", "_pos", "_stamp")

    def __new__(cls, *args: Any, **kwargs: Any) -> IndexedList:
        self = super().__new__(cls, *args, **kwargs)
        self._pos: dict[Any, int] | None = None  # item → position, when the log is replayed
        self._stamp: dict[Any, int] = {}  # item → log length when its position was noted
        self._log: list[int] = []  # 2·i for an insertion at i, 2·i + 1 for a deletion at i
        return self

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self._reset()

    def _reset(self) -> None:
        self._pos, self._stamp, self._log = None, {}, []

    def _rebuild(self) -> bool:
        """Note every item's position; False when an item occurs twice."""
        n = len(self)
        pos = dict(zip(self, range(n), strict=True))  # an item held twice: fewer keys
        if len(pos) != n:
            self._reset()
            return False
        self._pos, self._stamp, self._log = pos, {}, []
        return True

    def _edit(self, code: int) -> None:
        log = self._log
        log.append(code)
        if len(log) * len(log) > len(self) and len(log) > 16:
            self._reset()

    def _note(self, item: Any, i: int) -> None:
        """`item` now sits at `i` (after the edits logged so far)."""
        pos = self._pos
        if pos is None:
            return
        if item in pos:  # held twice (or its old place is unknown): rebuild when asked
            self._reset()
            return
        pos[item] = i
        self._stamp[item] = len(self._log)

    def _forget(self, item: Any) -> None:
        if self._pos is not None:
            self._pos.pop(item, None)

    def _find(self, item: Any) -> int | None:
        """`item`'s cached position replayed through the later edits, if it checks out."""
        pos = self._pos
        if pos is None:
            return None
        p = pos.get(item)
        if p is None:
            return None
        log = self._log
        stamp = self._stamp.get(item, 0)
        for k in range(stamp, len(log)):
            code = log[k]
            at = code >> 1
            if code & 1:  # a deletion
                if p > at:
                    p -= 1
                elif p == at:
                    return None
            elif p >= at:
                p += 1
        if p < len(self) and self[p] is item:
            if len(log) - stamp > 4:
                pos[item] = p
                self._stamp[item] = len(log)
            return p
        return None

    def index(self, item: Any, *bounds: Any) -> int:
        if not bounds:
            p = self._find(item)
            if p is None and self._rebuild():
                p = self._find(item)
            if p is not None:
                return p
        return list.index(self, item, *bounds)

    def insert(self, index: Any, item: Any) -> None:
        n = len(self)
        i = index.__index__()
        i = max(i + n, 0) if i < 0 else min(i, n)
        list.insert(self, i, item)
        if self._pos is not None:
            if i < n:
                self._edit(2 * i)
            self._note(item, i)

    def append(self, item: Any) -> None:
        list.append(self, item)
        self._note(item, len(self) - 1)

    def extend(self, items: Any) -> None:
        start = len(self)
        list.extend(self, items)
        if self._pos is not None:
            for i in range(start, len(self)):
                self._note(self[i], i)

    def __iadd__(self, items: Any) -> IndexedList:
        self.extend(items)
        return self

    def __delitem__(self, index: Any) -> None:
        if isinstance(index, slice):
            list.__delitem__(self, index)
            self._reset()
            return
        n = len(self)
        i = index.__index__()
        item = self[i]
        list.__delitem__(self, i)
        if self._pos is not None:
            self._forget(item)
            i = i + n if i < 0 else i
            if i < n - 1:
                self._edit(2 * i + 1)

    def pop(self, index: Any = -1) -> Any:
        n = len(self)
        item = list.pop(self, index)
        if self._pos is not None:
            i = index.__index__()
            i = i + n if i < 0 else i
            self._forget(item)
            if i < n - 1:
                self._edit(2 * i + 1)
        return item

    def remove(self, item: Any) -> None:
        try:
            i = self.index(item)
        except ValueError:
            raise ValueError("list.remove(x): x not in list") from None
        del self[i]

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice) or self._pos is None:
            list.__setitem__(self, index, value)
            self._reset()
            return
        n = len(self)
        i = index.__index__()
        old = self[i]
        list.__setitem__(self, i, value)
        if old is not value:
            self._forget(old)
            self._note(value, i + n if i < 0 else i)

    def clear(self) -> None:
        list.clear(self)
        self._reset()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        list.sort(self, *args, **kwargs)
        self._reset()

    def reverse(self) -> None:
        list.reverse(self)
        self._reset()

    def __imul__(self, n: Any) -> IndexedList:
        list.__imul__(self, n)
        self._reset()
        return self

    def copy(self) -> list[Any]:
        return list(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (IndexedList, (list(self),))


# ---------------------------------------------------------------- instructions


def _field_property(key: str) -> property:
    """`inst.<key>`: the field `key`, or AttributeError when the instruction has none."""

    def get(self: Instruction) -> Any:
        try:
            return self.fields[key]
        except KeyError:
            raise AttributeError(key) from None

    return property(get, doc=f"The field '{key}'.")


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
        # Field access by name: `inst.lhs`, `inst.dims`. Python calls this only after the
        # usual lookup failed, at the price of an exception, so the first access by a
        # field's name adds a property of that name to the class: the later ones, by type
        # rules and passes for every instruction, find it directly.
        try:
            value = object.__getattribute__(self, "fields")[key]
        except KeyError:
            raise AttributeError(key) from None
        if not key.startswith("_") and key not in Instruction.__dict__:
            setattr(Instruction, key, _field_property(key))
        return value

    @property
    def opcode(self) -> str:
        return self.op.name

    @property
    def operands(self) -> list[Value]:
        """Every value this instruction uses, nested ones included, in syntax order."""
        out: list[Value] = []
        fields = self.fields
        for f in self.op.value_fields:
            x = fields.get(f)
            if isinstance(x, Value):  # the common case, without a call
                out.append(x)
                if isinstance(x, LiteralValue) and not isinstance(
                        x.literal, ScalarLiteral | KeywordLiteral):
                    out.extend(x.literal.values())
            elif x is not None:
                _collect(x, out)
        return out

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
        """Replace the operands that are keys of `mapping` (not literals, which are values
        rather than identities, but values nested in them); True if anything changed."""
        if not mapping:
            return False
        fields = self.fields
        for f in self.op.value_fields:
            x = fields.get(f)
            if x is not None and _mentions(x, mapping):
                break
        else:
            return False  # the common case in a sweep: nothing to replace
        return self.map_operands(
            lambda v: v if isinstance(v, LiteralValue) else mapping.get(v, v))

    def erase(self) -> None:
        """Remove from the parent block."""
        if self.block is not None:
            self.block.remove(self)

    def index(self) -> int:
        assert self.block is not None
        return self.block.instructions.index(self)


def erase_instructions(insts: Iterable[Instruction]) -> None:
    """Remove instructions from their blocks, each block's list rebuilt once: erasing k of
    a block's n instructions one by one costs O(k·n)."""
    by_block: dict[Block, set[Instruction]] = {}
    for inst in insts:
        if inst.block is not None:
            by_block.setdefault(inst.block, set()).add(inst)
    for block, gone in by_block.items():
        if len(gone) == 1:
            block.remove(next(iter(gone)))
            continue
        block.instructions[:] = [i for i in block.instructions if i not in gone]
        for inst in gone:
            inst.block = None
        block._changed()


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
        self.instructions: list[Instruction] = IndexedList()
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

    def clear(self) -> list[Instruction]:
        """Remove every instruction at once; returns them, in order."""
        insts = list(self.instructions)
        self.instructions.clear()
        for inst in insts:
            inst.block = None
        self._changed()
        return insts

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
        self.blocks: list[Block] = IndexedList()
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
        """Drop cached analyses after a change; the module's are brought up to date when next
        asked for."""
        if self._analyses:
            self._analyses.clear()
        if self.module is not None:
            self.module.function_changed(self)

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


class TypeDecls(dict):  # type: ignore[type-arg]
    """A module's type declarations by name, with the types its aliases resolve to, kept
    until a declaration is added, replaced or removed (declarations are not edited)."""

    __slots__ = ("resolved",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.resolved: dict[str, Type] = {}

    def _edited(self) -> None:
        if self.resolved:
            self.resolved = {}

    def __setitem__(self, key: str, value: TypeDecl) -> None:
        super().__setitem__(key, value)
        self._edited()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._edited()

    def __ior__(self, other: Any) -> TypeDecls:
        super().__ior__(other)
        self._edited()
        return self

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._edited()

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._edited()
        return super().setdefault(key, default)

    def pop(self, *args: Any) -> Any:
        self._edited()
        return super().pop(*args)

    def popitem(self) -> Any:
        self._edited()
        return super().popitem()

    def clear(self) -> None:
        super().clear()
        self._edited()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (TypeDecls, (dict(self),))


class Module:
    """A compilation unit: type declarations, global variables and functions."""

    def __init__(self, name: str = "main", stage: str = "raw") -> None:
        self.name = name
        self.stage = stage
        self.type_decls: dict[str, TypeDecl] = TypeDecls()
        self.globals: list[GlobalVariable] = []
        self.functions: list[Function] = IndexedList()
        self._analyses: dict[Any, Any] = {}
        self._changed: set[Function] = set()  # changed since the cached analyses were made

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)

    def __repr__(self) -> str:
        return f"<Module {self.name!r}: {len(self.functions)} functions>"

    def invalidate(self) -> None:
        """Drop cached analyses after a change of the module itself."""
        if self._analyses:
            self._analyses.clear()
        self._changed.clear()

    def function_changed(self, fn: Function) -> None:
        """Note that the body of `fn` changed. A pass editing one function after another
        would otherwise recompute a module analysis once per function, so the cached ones
        are brought up to date on their next request instead: by their `updated(changed)`
        method where they have one (it returns the analysis of the changed module, or None
        when it cannot tell cheaply), else by computing them again."""
        if self._analyses:
            self._changed.add(fn)

    def analysis(self, kind: Callable[[Module], Any]) -> Any:
        """The cached result of `kind(self)`, computed on first request."""
        if self._changed:
            self._refresh()
        try:
            return self._analyses[kind]
        except KeyError:
            result = self._analyses[kind] = kind(self)
            return result

    def _refresh(self) -> None:
        changed, self._changed = self._changed, set()
        for kind, result in list(self._analyses.items()):
            updated = getattr(result, "updated", None)
            new = updated(changed) if updated is not None else None
            if new is None:
                del self._analyses[kind]
            else:
                self._analyses[kind] = new

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
        """Follow transparent aliases to the underlying type.

        The result of every alias on a chain is remembered (in the declarations, until they
        change), so resolving each of n chained aliases costs O(n) in all, not O(n²). A
        chain that runs into a cycle (an error the verifier reports) is not remembered: its
        result depends on where it was entered."""
        if not isinstance(t, NominalType):
            return t
        decls = self.type_decls
        memo: dict[str, Type] | None = getattr(decls, "resolved", None)
        if memo is not None:
            hit = memo.get(t.name)
            if hit is not None:
                return hit
        seen: dict[str, None] = {}
        while isinstance(t, NominalType) and t.name not in seen:
            if memo is not None and t.name in memo:
                t = memo[t.name]
                break
            seen[t.name] = None
            decl = decls.get(t.name)
            if not isinstance(decl, AliasDecl) or decl.target is None:
                break
            t = decl.target
        else:
            if isinstance(t, NominalType):  # a cycle
                return t
        if memo is not None:
            for name in seen:
                memo[name] = t
        return t

    def resolve_deep(self, t: Type, _path: frozenset[str] = frozenset()) -> Type:
        """`t` with transparent aliases followed everywhere inside it (tuples, arrays,
        functions), to compare types structurally. An alias met again on its own path (a
        cycle the verifier reports) is left as it is."""
        if isinstance(t, NominalType):
            if t.name in _path:
                return t
            _path = _path | {t.name}
            t = self.resolve(t)
        if isinstance(t, TupleType):
            return TupleType(tuple(self.resolve_deep(e, _path) for e in t.elements))
        if isinstance(t, ArrayType):
            return ArrayType(t.count, self.resolve_deep(t.element, _path))
        if isinstance(t, FunctionType):
            return FunctionType(tuple(self.resolve_deep(a, _path) for a in t.arguments),
                                self.resolve_deep(t.result, _path))
        return t
