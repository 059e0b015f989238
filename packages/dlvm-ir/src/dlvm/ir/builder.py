"""A builder for front ends and passes: `b.add(x, y)`, `b.dot(a, w)`, `b.ret(v)`.

Any registered instruction is a method (`b.<opcode>(…)`; Python keywords
and names the builder uses itself take a trailing underscore: `b.not_`, `b.and_`,
`b.or_`, `b.insert_`; `b.ret` is `return`). Built-in instructions have typed methods
(`builder_methods.py`, generated); a plugin's are found by name. Positional
arguments fill the instruction's fields in syntax order; Python numbers become scalar
literals of the other operands' data type. The result type comes from the instruction's
type rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .builder_methods import InstructionMethods
from .core import (
    AggregateLiteral,
    Argument,
    Block,
    BranchTarget,
    DerivativeDecl,
    FieldKey,
    Function,
    Instruction,
    Literal,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from .opdef import OpDef, TypeRuleError, lookup
from .plugin import RegistryError, failed_plugin_notes
from .types import F32, DataType, FunctionType, TensorType, TupleType, Type

_USE_KINDS = ("use", "literal_use")


def constant(value: bool | int | float, type: Type) -> LiteralValue:
    """A scalar literal operand: `constant(1.0, scalar(F32))` prints `1.0: f32`."""
    return LiteralValue(ScalarLiteral(value), type)


class Builder(InstructionMethods):
    """Appends instructions at a position; one typed method per instruction comes from
    `InstructionMethods` (generated from the `OpDef` table)."""

    def __init__(self, module: Module | None = None) -> None:
        self.module = module if module is not None else Module()
        self.block: Block | None = None
        self.index: int | None = None  # insertion index in self.block; None: at the end

    # ------------------------------------------------------------ structure

    def function(self, name: str | None, arg_types: Sequence[Type], result: Type,
                 arg_names: Sequence[str | None] | None = None, *, block_name: str | None = "entry",
                 attributes: Sequence[str] = ()) -> Function:
        """A new function with an entry block; the builder moves to its end."""
        fn = Function(name, FunctionType(tuple(arg_types), result), attributes=tuple(attributes))
        self.module.add_function(fn)
        self.block_in(fn, block_name, arg_types, arg_names)
        return fn

    def declare(self, name: str, ftype: FunctionType,
                declaration: DerivativeDecl | str | None = "extern") -> Function:
        """A bodiless function: an external or gradient declaration."""
        return self.module.add_function(Function(name, ftype, declaration=declaration))

    def block_in(self, fn: Function, name: str | None = None, arg_types: Sequence[Type] = (),
                 arg_names: Sequence[str | None] | None = None) -> Block:
        """Append a block with arguments to `fn` and move to its end."""
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        block = Block(name, [Argument(t, n) for t, n in zip(arg_types, names, strict=True)])
        fn.append_block(block)
        self.position_at_end(block)
        return block

    def new_block(self, name: str | None = None, arg_types: Sequence[Type] = (),
                  arg_names: Sequence[str | None] | None = None) -> Block:
        """Append a block to the current function and move to it."""
        assert self.block is not None and self.block.function is not None
        return self.block_in(self.block.function, name, arg_types, arg_names)

    def position_at_end(self, block: Block) -> None:
        self.block, self.index = block, None

    def position_before(self, inst: Instruction) -> None:
        assert inst.block is not None
        self.block, self.index = inst.block, inst.block.instructions.index(inst)

    def position_after(self, inst: Instruction) -> None:
        assert inst.block is not None
        self.block, self.index = inst.block, inst.block.instructions.index(inst) + 1

    # ------------------------------------------------------------ instructions

    def create(self, opcode: str, *args: Any, name: str | None = None, **fields: Any
               ) -> Instruction:
        op = lookup(opcode)
        if op is None:
            raise RegistryError(f"unknown instruction '{opcode}'", notes=failed_plugin_notes())
        values = self._fields(op, args, fields)
        inst = Instruction(op, values, name=name)
        try:
            inst.type = op.infer(inst, self.module)
        except TypeRuleError as e:
            raise TypeRuleError(f"'{opcode}': {e}") from None
        return self.insert(inst)

    def insert(self, inst: Instruction) -> Instruction:
        if self.block is None:
            raise ValueError("the builder has no insertion block")
        if self.index is None:
            self.block.append(inst)
        else:
            self.block.insert(self.index, inst)
            self.index += 1
        return inst

    def _fields(self, op: OpDef, args: tuple[Any, ...], given: dict[str, Any]) -> dict[str, Any]:
        names = [n for n, _ in op.fields if n not in given]
        if len(args) > len(names):
            raise TypeError(f"'{op.name}' takes at most {len(names)} positional arguments")
        raw = {**dict(zip(names, args, strict=False)), **given}
        dtype = next((v.type.dtype for v in _values(raw.values())
                      if isinstance(v.type, TensorType)), F32)
        out: dict[str, Any] = {}
        for n, kind in op.fields:
            x = raw.get(n)
            if x is None:
                out[n] = None
            elif kind in _USE_KINDS:
                out[n] = self._use(x, dtype)
            elif kind == "uses" or kind == "call_args":
                out[n] = [self._use(v, dtype) for v in x]
            elif kind == "target":
                out[n] = _target(x)
            elif kind == "enum_cases":
                out[n] = [(c, _target(b)) for c, b in x]
            elif kind == "keys":
                out[n] = [FieldKey(k[1:]) if isinstance(k, str) else k for k in x]
            elif kind in ("ints", "pads"):
                out[n] = list(x)
            elif kind == "shape":
                out[n] = tuple(x)
            else:
                out[n] = x
        if "result" in out and out["result"] is None and op.name == "apply":
            callee = out["callee"]
            out["result"] = callee.type.result if isinstance(callee.type, FunctionType) else None
        return out

    def _use(self, x: Any, dtype: DataType) -> Value:
        if isinstance(x, Value):
            return x
        if isinstance(x, bool | int | float):
            from .types import BOOL

            return constant(x, TensorType((), BOOL if isinstance(x, bool) else dtype))
        raise TypeError(f"cannot use {x!r} as an operand")

    def __getattr__(self, opcode: str) -> Any:
        name = "return" if opcode == "ret" else opcode.rstrip("_")
        if lookup(name) is None:
            if opcode.startswith("_"):
                raise AttributeError(opcode)
            raise AttributeError("\n".join([f"the builder has no instruction '{opcode}'",
                                            *(f"note: {n}" for n in failed_plugin_notes())]))
        return lambda *args, **kw: self.create(name, *args, **kw)

    # ------------------------------------------------------------ conveniences

    def literal(self, value: Literal | bool | int | float, type: Type,
                name: str | None = None) -> Instruction:
        lit = value if isinstance(value, Literal) else ScalarLiteral(value)
        return self.create("literal", LiteralValue(lit, type), name=name)

    def tuple(self, values: Sequence[Value], name: str | None = None) -> Instruction:
        """`literal (%a: A, %b: B): (A, B)`."""
        t = TupleType(tuple(v.type for v in values))
        return self.create("literal", LiteralValue(AggregateLiteral("tuple", tuple(values)), t),
                           name=name)

    def call(self, fn: Function, args: Sequence[Value], name: str | None = None) -> Instruction:
        return self.create("apply", fn, list(args), fn.type_.result, name=name)


def _values(xs: Any) -> list[Value]:
    out: list[Value] = []
    for x in xs:
        if isinstance(x, Value):
            out.append(x)
        elif isinstance(x, list | tuple):
            out.extend(_values(x))
    return out


def _target(x: Any) -> BranchTarget:
    if isinstance(x, BranchTarget):
        return x
    if isinstance(x, Block):
        return BranchTarget(x, [])
    block, args = x
    return BranchTarget(block, list(args))
