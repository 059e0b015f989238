"""The canonical printer: `print(parse(print(m))) == print(m)` for every module.

Unnamed values get positional names (`%b.i` for instructions, `%b^i` for
block arguments, `'b` for blocks, `@n` for globals), which the parser
accepts back at the same positions.
"""

from __future__ import annotations

import math
from typing import Any

from .core import (
    AggregateLiteral,
    Block,
    BranchTarget,
    BuiltinRef,
    DenseLiteral,
    DerivativeDecl,
    FieldKey,
    Function,
    Instruction,
    KeywordLiteral,
    Literal,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from .lexer import escape
from .opdef import Piece
from .types import AliasDecl, EnumDecl, StructDecl, Type, format_shape


def format_scalar(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text if ("." in text or "e" in text) else text + ".0"


class Namer:
    """Printed names of one function's values and blocks."""

    def __init__(self, globals_: dict[Value, str]) -> None:
        self.globals = globals_
        self.names: dict[Value, str] = {}
        self.block_names: dict[Block, str] = {}

    def enter(self, fn: Function) -> None:
        self.names = {}
        self.block_names = {}
        for b, block in enumerate(fn.blocks):
            self.block_names[block] = "'" + (block.name or str(b))
            for i, arg in enumerate(block.arguments):
                self.names[arg] = "%" + (arg.name or f"{b}^{i}")
            for i, inst in enumerate(block.instructions):
                self.names[inst] = "%" + (inst.name or f"{b}.{i}")

    def value(self, v: Value) -> str:
        name = self.names.get(v) or self.globals.get(v)
        if name is None:  # a value from outside this function: still print something readable
            sigil = "@" if isinstance(v, Function) else "%"
            name = sigil + (v.name or "<unknown>")
        return name


class Printer:
    def __init__(self, module: Module) -> None:
        self.module = module
        globals_: dict[Value, str] = {}
        for n, g in enumerate([*module.globals, *module.functions]):
            globals_[g] = "@" + (g.name or str(n))
        self.namer = Namer(globals_)
        self.out: list[str] = []

    # ------------------------------------------------------------ module level

    def module_text(self) -> str:
        m = self.module
        parts = [f"module {escape(m.name)}\nstage {m.stage}\n"]
        decls = [self.type_decl(d) for d in m.type_decls.values()]
        if decls:
            parts.append("\n".join(decls) + "\n")
        if m.globals:
            parts.append(
                "\n".join(f"var {self.namer.value(g)}: {g.value_type}" for g in m.globals) + "\n"
            )
        parts.extend(self.function_text(fn) for fn in m.functions)
        return "\n".join(parts)

    def type_decl(self, d: Any) -> str:
        if isinstance(d, AliasDecl):
            return f"type ${d.name} = {'opaque' if d.target is None else d.target}"
        if isinstance(d, StructDecl):
            fields = "".join(f"    #{k}: {t}\n" for k, t in d.fields)
            return f"struct ${d.name} {{\n{fields}}}"
        assert isinstance(d, EnumDecl)
        cases = "".join(
            f"    ?{c}" + (f"({', '.join(map(str, ts))})" if ts else "") + "\n" for c, ts in d.cases
        )
        return f"enum ${d.name} {{\n{cases}}}"

    def function_text(self, fn: Function) -> str:
        lines = [f"!{a}" for a in fn.attributes]
        if fn.declaration == "extern":
            lines.append("[extern]")
        elif isinstance(fn.declaration, DerivativeDecl):
            lines.append(f"[{self.declaration(fn.declaration)}]")
        head = f"func {self.namer.value(fn)}: {fn.type}"
        if not fn.blocks:
            lines.append(head)
            return "\n".join(lines) + "\n"
        lines.append(head + " {")
        self.namer.enter(fn)
        for block in fn.blocks:
            lines.append(self.block_header(block))
            lines.extend("    " + self.instruction(inst) for inst in block.instructions)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def declaration(self, d: DerivativeDecl) -> str:
        words = [d.kind, self.namer.value(d.of)]
        if d.from_index is not None:
            words += ["from", str(d.from_index)]
        if d.wrt is not None:
            words += ["wrt", ", ".join(map(str, d.wrt))]
        if d.keeping:
            words += ["keeping", ", ".join(map(str, d.keeping))]
        if d.seedable:
            words.append("seedable")
        return " ".join(words)

    def block_header(self, block: Block) -> str:
        args = ", ".join(f"{self.namer.value(a)}: {a.type}" for a in block.arguments)
        return f"{self.namer.block_names[block]}({args}):"

    # ------------------------------------------------------------ instructions

    def instruction(self, inst: Instruction) -> str:
        words = [inst.op.name]
        self.pieces(inst.op.format, inst.fields, words)
        body = " ".join(words)
        if inst.type.is_void and inst.name is None:
            return body
        return f"{self.namer.value(inst)} = {body}"

    def pieces(self, pieces: tuple[Piece, ...], fields: dict[str, Any], words: list[str]) -> None:
        for p in pieces:
            if p.kind == "punct":
                words[-1] += p.text
            elif p.kind == "keyword":
                words.append(p.text)
            elif p.kind == "field" and p.field_kind == "call_args":
                words[-1] += self.field(p.field_kind, fields.get(p.text))  # `@f(…)`
            elif p.kind == "field":
                words.append(self.field(p.field_kind, fields.get(p.text)))
            else:
                first = next(c for c in p.children if c.kind == "field")
                if fields.get(first.text) is not None:
                    self.pieces(p.children, fields, words)

    def field(self, kind: str, x: Any) -> str:
        if kind in ("use", "literal_use"):
            return self.use(x)
        if kind == "uses":
            return ", ".join(self.use(v) for v in x)
        if kind == "call_args":
            return "(" + ", ".join(self.use(v) for v in x) + ")"
        if kind == "keys":
            return ", ".join(self.key(k) for k in x)
        if kind == "target":
            return self.target(x)
        if kind == "enum_cases":
            return " ".join(f"case ?{c} {self.namer.block_names[t.block]}" for c, t in x)
        if kind == "combinator":
            if isinstance(x, str):
                return x
            if isinstance(x, BuiltinRef):
                return f"builtin {escape(x.name)}"
            return self.use(x)
        if kind == "callee":
            return self.namer.value(x)
        if kind == "ints":
            return ", ".join(map(str, x))
        if kind == "shape":
            return format_shape(x) if x else "scalar"
        if kind == "pads":
            return ", ".join(f"({lo}, {hi})" for lo, hi in x)
        if kind == "string":
            return escape(x)
        if kind == "signature":
            return f"-> {x}"
        return str(x)  # int, dtype, type, padding_mode

    def key(self, k: Any) -> str:
        if isinstance(k, FieldKey):
            return f"#{k.name}"
        if isinstance(k, int):
            return str(k)
        return self.use(k)

    def target(self, t: BranchTarget) -> str:
        args = ", ".join(self.use(v) for v in t.args)
        return f"{self.namer.block_names.get(t.block, repr(t.block))}({args})"

    def use(self, v: Value) -> str:
        if isinstance(v, LiteralValue):
            return f"{self.literal(v.literal)}: {v.type}"
        return f"{self.namer.value(v)}: {v.type}"

    def literal(self, lit: Literal) -> str:
        if isinstance(lit, ScalarLiteral):
            return format_scalar(lit.value)
        if isinstance(lit, KeywordLiteral):
            return lit.keyword
        if isinstance(lit, DenseLiteral):
            return f'dense "0x{lit.data.hex()}"'
        assert isinstance(lit, AggregateLiteral)
        elements = ", ".join(self.use(e) for e in lit.elements)
        if lit.kind == "tensor":
            return f"<{elements}>"
        if lit.kind == "tuple":
            return f"({elements})"
        if lit.kind == "array":
            return f"[{elements}]"
        if lit.kind == "struct":
            return "{" + ", ".join(
                f"#{k} = {self.use(e)}" for k, e in zip(lit.keys, lit.elements, strict=True)
            ) + "}"
        return f"?{lit.keys[0]}" + (f"({elements})" if lit.elements else "")


def print_module(module: Module) -> str:
    return Printer(module).module_text()


def print_function(fn: Function) -> str:
    assert fn.module is not None
    return Printer(fn.module).function_text(fn)


def print_instruction(inst: Instruction) -> str:
    """One instruction, with names as the module printer gives them."""
    fn = inst.block.function if inst.block else None
    module = fn.module if fn else None
    printer = Printer(module or Module())
    if fn is not None:
        printer.namer.enter(fn)
    return printer.instruction(inst)


def print_type(t: Type) -> str:
    return str(t)
