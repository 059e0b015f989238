"""TEL's lexer and recursive-descent parser.

Precedence, from the tightest: postfix `^T` and `as [shape]`; unary minus; the tensor
product `.` (also `•`, `⊗`); `*` and `/`; `+` and `-`. Primaries are numbers, names
(`h[t-1]` in a recurrent block), calls, parentheses and concatenations `[a, b] @axis`.
Statements need no separator: each starts with a keyword, `name:`, or `optimizer KIND`
(`optimizer` is a keyword only there, so a tensor may still be called `optimizer`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from dlvm.ir import Diagnostic, DiagnosticError, Location, Source

from .syntax import (
    ROLES,
    Binary,
    Call,
    Concat,
    Declaration,
    Expr,
    InitialState,
    Loss,
    Name,
    Number,
    OptimizerDecl,
    Option,
    Program,
    Recurrent,
    Reshape,
    Shape,
    Transpose,
    Unary,
)

_SHAPE = re.compile(r"\s*(\d+|_|\?)(\s*[x×]\s*(\d+|_|\?))*\s*")
DTYPES = ("int8", "int16", "int32", "int64", "float16", "float32", "float64")
KEYWORDS = ("module", "type", "loss", "recurrent", "as")
PRODUCT = (".", "•", "⊗")
T = TypeVar("T")

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+|//[^\n]*|\#[^\n]*)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<transpose>\^T\b)
  | (?P<symbol>[:\[\](),=+\-*/.@{}?•⊗×])
""", re.VERBOSE)


@dataclass
class Token:
    kind: str  # "number", "name", "transpose", "symbol", "end"
    text: str
    location: Location
    offset: int


class ParseError(Exception):
    def __init__(self, message: str, location: Location) -> None:
        super().__init__(message)
        self.diagnostic = Diagnostic(message, location)


def tokenize(source: Source) -> list[Token]:
    text, out, pos, line, line_start = source.text, [], 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        where = Location(source, line, pos - line_start + 1)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", where)
        kind = m.lastgroup or ""
        if kind != "space":
            out.append(Token(kind, m.group(), where, pos))
        for i, c in enumerate(m.group()):
            if c == "\n":
                line, line_start = line + 1, pos + i + 1
        pos = m.end()
    out.append(Token("end", "", Location(source, line, pos - line_start + 1), pos))
    return out


def _show(t: Token) -> str:
    return "the end of the file" if t.kind == "end" else f"'{t.text}'"


class Parser:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.pos = 0
        self.errors: list[Diagnostic] = []

    # ------------------------------------------------------------ tokens

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def next(self) -> Token:
        t = self.tok
        if t.kind != "end":
            self.pos += 1
        return t

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("symbol", "name", "transpose") and self.tok.text in texts

    def expect(self, text: str, what: str) -> Token:
        if not self.at(text):
            raise ParseError(f"expected '{text}' {what}, found {_show(self.tok)}",
                             self.tok.location)
        return self.next()

    def name(self, what: str) -> Token:
        t = self.tok
        if t.kind != "name" or t.text in KEYWORDS:
            raise ParseError(f"expected {what}, found {_show(t)}", t.location)
        return self.next()

    def listed(self, item: Callable[[], T], close: str) -> list[T]:
        """`item, item, …` up to `close` (not read), or nothing when `close` comes first."""
        if self.at(close):
            return []
        items = [item()]
        while self.at(","):
            self.next()
            items.append(item())
        return items

    def integer(self, what: str) -> int:
        t = self.tok
        if t.kind != "number" or not t.text.isdigit():
            raise ParseError(f"expected {what} (an integer), found {_show(t)}", t.location)
        self.next()
        return int(t.text)

    # ------------------------------------------------------------ statements

    def program(self) -> Program:
        t = self.tok
        if not self.at("module"):
            raise ParseError(f"a TEL file starts with 'module NAME', found {_show(t)}",
                             t.location)
        self.next()
        program = Program(self.name("the module's name").text, t.location)
        while self.tok.kind != "end":
            start = self.pos
            try:
                self.statement(program)
            except ParseError as e:
                self.errors.append(e.diagnostic)
                self.recover(start)
        return program

    def recover(self, start: int) -> None:
        """Skip to the next token that can begin a statement."""
        self.pos = max(self.pos, start + 1)
        while self.tok.kind != "end":
            if self.at("type", "loss", "recurrent", "}") or self.at_optimizer() or (
                    self.tok.kind == "name" and self.peek().text == ":"):
                return
            self.pos += 1

    def statement(self, program: Program) -> None:
        t = self.tok
        if self.at("type"):
            self.next()
            d = self.name("a data type")
            if d.text not in DTYPES:
                raise ParseError(f"unknown data type '{d.text}' (one of {', '.join(DTYPES)})",
                                 d.location)
            if program.dtype_location is not None:
                raise ParseError("the data type is set twice (one 'type' per module)",
                                 t.location)
            program.dtype, program.dtype_location = d.text, t.location
        elif self.at("loss"):
            self.next()
            n = self.name("the loss's name")
            self.expect("=", "after the loss's name")
            program.losses.append(Loss(n.text, self.expr(), n.location))
        elif self.at("recurrent"):
            program.recurrent.append(self.recurrent(program))
        elif self.at("module"):
            raise ParseError("'module' may appear only once, at the start", t.location)
        elif self.at_optimizer():
            program.optimizers.append(self.optimizer())
        else:
            program.declarations.append(self.declaration())

    def at_optimizer(self) -> bool:
        """`optimizer KIND`: the contextual keyword, followed by a name (not by `:`)."""
        return self.tok.kind == "name" and self.tok.text == "optimizer" and \
            self.peek().kind == "name"

    def optimizer(self) -> OptimizerDecl:
        """`optimizer KIND` or `optimizer KIND(option = value, …)`."""
        self.next()
        kind = self.name("the optimizer")
        options: list[Option] = []
        if self.at("("):
            self.next()
            options = self.listed(self.option, ")")
            self.expect(")", "to close the optimizer's options")
        return OptimizerDecl(kind.text, options, kind.location)

    def option(self) -> Option:
        """`name = number` or `name = [param, …]`."""
        n = self.name("an option's name")
        self.expect("=", f"after the option '{n.text}'")
        if self.at("["):
            self.next()
            names = self.listed(lambda: self.name("a parameter's name").text, "]")
            self.expect("]", "to close the list of names")
            return Option(n.text, names, n.location)
        negative = self.at("-")
        if negative:
            self.next()
        t = self.tok
        if t.kind != "number":
            raise ParseError(f"expected the value of '{n.text}' (a number or a list of "
                             f"names), found {_show(t)}", t.location)
        self.next()
        value: float | int = int(t.text) if t.text.isdigit() else float(t.text)
        return Option(n.text, -value if negative else value, n.location)

    def declaration(self, recurrent: bool = False) -> Declaration:
        n = self.name("a declaration 'name: role[shape] = value'")
        self.expect(":", f"after '{n.text}' in a declaration")
        r = self.tok
        if r.kind != "name" or r.text not in ROLES:
            raise ParseError(f"expected a role ({', '.join(ROLES)}), found {_show(r)}",
                             r.location)
        self.next()
        where = self.tok.location
        shape = self.shape() if self.at("[") else ()
        value = None
        if self.at("="):
            self.next()
            value = self.expr()
        return Declaration(n.text, r.text, shape, value, n.location, where, recurrent)

    def recurrent(self, program: Program) -> Recurrent:
        t = self.next()
        var = self.name("the time variable (as in 'recurrent t {')")
        self.expect("{", "to open the recurrent block")
        block = Recurrent(var.text, [], [], t.location)
        while not self.at("}"):
            if self.tok.kind == "end":
                raise ParseError("the recurrent block is not closed with '}'", t.location)
            start = self.pos
            try:
                if self.tok.kind == "name" and self.peek().text == "[":
                    n = self.next()
                    self.next()
                    step = self.integer("the initial step")
                    if step != 0:
                        raise ParseError(f"only the initial state '{n.text}[0]' can be "
                                         f"given, not '{n.text}[{step}]'", n.location)
                    self.expect("]", "after the initial step")
                    self.expect("=", f"after '{n.text}[0]'")
                    block.initial.append(InitialState(n.text, self.expr(), n.location))
                else:
                    d = self.declaration(recurrent=True)
                    block.declarations.append(d)
                    program.declarations.append(d)
            except ParseError as e:
                self.errors.append(e.diagnostic)
                self.recover(start)
                if self.tok.kind == "end":
                    return block
        self.next()
        return block

    def shape(self) -> Shape:
        """`[d1 x d2 …]`: sizes, or `_`/`?` for a dynamic one; `[]` is a scalar."""
        open_ = self.expect("[", "to open a shape")
        parts: list[str] = []
        while not self.at("]"):
            t = self.tok
            if t.kind not in ("number", "name", "symbol") or t.text in ("[", "=", ":") \
                    or t.kind == "end":
                raise ParseError(f"expected ']' to close the shape, found {_show(t)}",
                                 t.location)
            parts.append(t.text)
            self.next()
        self.next()
        text = " ".join(parts)
        if not text:
            return ()
        dims = [None if d in ("_", "?") else int(d)
                for d in re.split(r"\s*[x×]\s*", text.strip())] if _SHAPE.fullmatch(text) else []
        if not dims or 0 in dims:
            raise ParseError(f"bad shape '[{text}]': each dimension is a positive integer or "
                             "'_' (dynamic), separated by 'x'", open_.location)
        return tuple(dims)

    # ------------------------------------------------------------ expressions

    def expr(self) -> Expr:
        lhs = self.term()
        while self.at("+", "-"):
            op = self.next()
            lhs = Binary(op.location, op.text, lhs, self.term())
        return lhs

    def term(self) -> Expr:
        lhs = self.product()
        while self.at("*", "/"):
            op = self.next()
            lhs = Binary(op.location, op.text, lhs, self.product())
        return lhs

    def product(self) -> Expr:
        lhs = self.unary()
        while self.at(*PRODUCT):
            op = self.next()
            lhs = Binary(op.location, ".", lhs, self.unary())
        return lhs

    def unary(self) -> Expr:
        if self.at("-"):
            op = self.next()
            return Unary(op.location, "-", self.unary())
        return self.postfix()

    def postfix(self) -> Expr:
        x = self.primary()
        while True:
            if self.tok.kind == "transpose":
                x = Transpose(self.next().location, x)
            elif self.at("as"):
                t = self.next()
                x = Reshape(t.location, x, self.shape())
            else:
                return x

    def primary(self) -> Expr:
        t = self.tok
        if t.kind == "number":
            self.next()
            value: float | int = int(t.text) if t.text.isdigit() else float(t.text)
            return Number(t.location, value, t.text)
        if self.at("("):
            self.next()
            x = self.expr()
            self.expect(")", "to close the parenthesis")
            return x
        if self.at("["):
            self.next()
            items = [self.expr()]
            while self.at(","):
                self.next()
                items.append(self.expr())
            self.expect("]", "to close the concatenation")
            axis = 0
            if self.at("@"):
                self.next()
                axis = self.integer("the concatenation's axis")
            return Concat(t.location, items, axis)
        n = self.name("an expression")
        if self.at("("):
            self.next()
            args = self.listed(self.expr, ")")
            self.expect(")", f"to close the call of '{n.text}'")
            return Call(n.location, n.text, args)
        if self.at("[") and self.tok.offset == n.offset + len(n.text):
            return self.time_index(n)
        return Name(n.location, n.text)

    def time_index(self, n: Token) -> Name:
        """`h[t]`, `h[t-1]` (the block's time variable; the checker checks which)."""
        self.next()
        var = self.name("the time variable")
        offset = 0
        if self.at("-", "+"):
            sign = -1 if self.next().text == "-" else 1
            offset = sign * self.integer("a step offset")
        self.expect("]", "to close the time index")
        return Name(n.location, n.text, offset, var.text)


def parse(text: str, filename: str = "<tel>") -> Program:
    """The syntax tree of a TEL file; syntax errors are raised together."""
    source = Source(filename, text)
    try:
        parser = Parser(source)
        program = parser.program()
    except ParseError as e:
        raise DiagnosticError([e.diagnostic]) from None
    if parser.errors:
        raise DiagnosticError(parser.errors)
    return program
