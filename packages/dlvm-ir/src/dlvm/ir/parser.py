"""A hand-written recursive-descent parser for DLVM's textual IR.

Instructions are parsed from their `OpDef` formats, so adding an
instruction needs no parser change. Names may be used before they are
defined (values in later blocks, functions later in the module): such uses
get placeholders that are resolved when the function or module ends.
Errors are collected; after a bad line the parser skips to the next one, so
one run reports every independent error.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

from . import lexer as lx
from .core import (
    NULL,
    UNDEFINED,
    ZERO,
    AggregateLiteral,
    Argument,
    Block,
    BranchTarget,
    BuiltinRef,
    DenseLiteral,
    DerivativeDecl,
    FieldKey,
    Function,
    GlobalVariable,
    Instruction,
    Literal,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from .diagnostics import Diagnostic, DiagnosticError, DiagnosticSink, DlvmError, Source
from .files import read_input
from .opdef import Piece, TypeRuleError, lookup
from .plugin import failed_plugin_notes
from .types import (
    INVALID,
    STACK,
    VOID,
    AliasDecl,
    ArrayType,
    BoxType,
    EnumDecl,
    FunctionType,
    NominalType,
    PointerType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
    parse_data_type,
)

MAX_NESTING = 200
# `!inline`: inline at every call; `!kernel`: a fused element-wise kernel (one block, pure).
FUNCTION_ATTRIBUTES = {"inline", "kernel"}
TOP_LEVEL_KEYWORDS = {"func", "var", "type", "struct", "enum"}
DERIVATIVE_KINDS = {"gradient": "gradient", "adjoint": "gradient", "tangent": "tangent"}


class ParseError(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


class Placeholder(Value):
    """A name used before its definition; replaced when resolved."""

    __slots__ = ("offset", "sigil")

    def __init__(self, sigil: str, name: str, type: Type, offset: int) -> None:
        super().__init__(type, name)
        self.sigil = sigil
        self.offset = offset


def _positional(name: str) -> tuple[int, int | None, str] | None:
    """`0.1` → (0, 1, '.'), `2^0` → (2, 0, '^'), `3` → (3, None, ''); else None."""
    if not name[:1].isdigit():
        return None
    for sep in ".^":
        if sep in name:
            a, b = name.split(sep)
            return int(a), int(b), sep
    return int(name), None, ""


class Parser:
    def __init__(self, text: str, filename: str = "<input>") -> None:
        self.source = Source(filename, text)
        self.lines = lx.LineIndex(self.source)
        self.tokens, lex_errors = lx.tokenize(text)
        self.pos = 0
        self.sink = DiagnosticSink()
        self.lex_error_lines: set[int] = set()
        for offset, message in lex_errors:
            self.error_at(offset, message)
            self.lex_error_lines.add(self.lines.location(offset).line)
        self.poisoned: set[str] = set()  # '%x' / '@f' whose definition failed to parse
        self.nominal_uses: list[tuple[str, int]] = []
        self.alias_offsets: dict[str, int] = {}
        self.nesting = 0
        self.tensor_types: dict[str, tuple[Type, int]] = {}
        self.module = Module()
        self.globals: dict[str, Value] = {}
        self.global_uses: list[tuple[Placeholder, Type | None, int]] = []
        self.global_placeholders: dict[str, Placeholder] = {}
        self.globals_count = 0
        # per-function state
        self.locals: dict[str, Value] = {}
        self.local_placeholders: dict[str, Placeholder] = {}
        self.local_uses: list[tuple[Placeholder, Type, int]] = []
        self.blocks: dict[str, Block] = {}
        self.block_refs: dict[str, int] = {}
        self.fixups: list[Instruction] = []
        self.forward_uses = 0  # placeholders handed out so far (uses before definitions)
        self.function: Function | None = None
        self.block: Block | None = None
        self.unknown_opcodes = False  # a plugin that failed to load may have defined them

    # ------------------------------------------------------------ tokens

    @property
    def tok(self) -> lx.Token:
        return self.tokens[self.pos]

    def advance(self) -> lx.Token:
        t = self.tokens[self.pos]
        if t.kind != lx.EOF:
            self.pos += 1
        return t

    def fail(self, message: str, tok: lx.Token | None = None) -> NoReturn:
        raise ParseError((tok or self.tok).offset, message)

    def describe(self, tok: lx.Token) -> str:
        if tok.kind in (lx.NL, lx.EOF):
            return tok.kind
        text = tok.text if len(tok.text) <= 40 else tok.text[:40] + "…"
        return f"'{text}'"

    def expect_punct(self, text: str, what: str = "") -> lx.Token:
        t = self.tok
        if t.kind != lx.PUNCT or t.text != text:
            self.fail(f"expected '{text}'{what}, found {self.describe(t)}")
        return self.advance()

    def accept_punct(self, text: str) -> bool:
        t = self.tok
        if t.kind == lx.PUNCT and t.text == text:
            self.pos += 1
            return True
        return False

    def expect_keyword(self, word: str, what: str = "") -> lx.Token:
        t = self.tok
        if t.kind != lx.IDENT or t.text != word:
            self.fail(f"expected '{word}'{what}, found {self.describe(t)}")
        return self.advance()

    def accept_keyword(self, word: str) -> bool:
        t = self.tok
        if t.kind == lx.IDENT and t.text == word:
            self.pos += 1
            return True
        return False

    def expect(self, kind: str, what: str) -> lx.Token:
        t = self.tok
        if t.kind != kind:
            self.fail(f"expected {what}, found {self.describe(t)}")
        return self.advance()

    def skip_newlines(self) -> None:
        while self.tok.kind == lx.NL:
            self.pos += 1

    def peek_past_newlines(self) -> lx.Token:
        i = self.pos
        while self.tokens[i].kind == lx.NL:
            i += 1
        return self.tokens[i]

    def end_of_statement(self) -> None:
        t = self.tok
        if t.kind == lx.NL:
            self.skip_newlines()
        elif t.kind != lx.EOF and not (t.kind == lx.PUNCT and t.text == "}"):
            self.fail(f"expected end of line, found {self.describe(t)}")

    def error_at(self, offset: int, message: str) -> None:
        self.sink.error(message, self.lines.location(offset))

    def syntax_error(self, error: ParseError) -> None:
        """Report a parse error unless a lexical error on its line already explains it."""
        location = self.lines.location(error.offset)
        if location.line not in self.lex_error_lines:
            self.sink.error(error.message, location)

    def skip_line(self) -> None:
        while self.tok.kind not in (lx.NL, lx.EOF):
            self.pos += 1
        self.skip_newlines()

    def nest(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            self.fail(f"nesting deeper than {MAX_NESTING} levels")

    # ------------------------------------------------------------ module

    def parse_module(self) -> Module:
        self.skip_newlines()
        if self.tok.kind == lx.IDENT and self.tok.text == "module":
            self.header_line(self.parse_module_name)
        if self.tok.kind == lx.IDENT and self.tok.text == "stage":
            self.header_line(self.parse_stage)
        while self.tok.kind != lx.EOF:
            start = self.pos
            try:
                self.parse_top_level()
            except ParseError as e:
                self.syntax_error(e)
                self.recover_top_level(start)
        self.resolve_globals()
        self.check_nominal_types()
        return self.module

    def header_line(self, parse: Any) -> None:
        """Parse the `module` or `stage` line; on an error, skip just that line."""
        try:
            parse()
            self.end_of_statement()
        except ParseError as e:
            self.syntax_error(e)
            self.skip_line()

    def parse_module_name(self) -> None:
        self.advance()
        self.module.name = lx.unescape(self.expect(lx.STRING, "a module name string").text)

    def parse_stage(self) -> None:
        self.advance()
        t = self.expect(lx.IDENT, "a stage name")
        if t.text not in ("raw", "optimizable", "canonical", "lowered"):
            self.fail(f"unknown stage '{t.text}'", t)
        self.module.stage = "raw" if t.text == "canonical" else t.text

    def check_nominal_types(self) -> None:
        """Every `$Name` must be declared, and no alias may refer to itself."""
        decls = self.module.type_decls
        for name, offset in self.nominal_uses:
            if name not in decls:
                self.error_at(offset, f"use of undeclared type '${name}'")
        # An alias refers to itself when following it runs into a cycle. Each alias's answer
        # is remembered, so long chains are followed once, not once per alias on them.
        cyclic: dict[str, bool] = {}
        for name, offset in self.alias_offsets.items():
            path: dict[str, None] = {}
            current: str | None = name
            while current is not None and current not in cyclic and current not in path:
                path[current] = None
                target = getattr(decls.get(current), "target", None)
                current = target.name if isinstance(target, NominalType) and isinstance(
                    decls.get(target.name), AliasDecl) else None
            found = cyclic.get(current, current is not None)  # type: ignore[arg-type]
            cyclic.update(dict.fromkeys(path, found))
            if found:
                self.error_at(offset, f"type alias '${name}' refers to itself")

    def recover_top_level(self, start: int) -> None:
        """Skip to the next line that starts a top-level declaration."""
        if self.pos == start:
            self.advance()
        self.poison(start, self.pos)
        self.nesting = 0
        self.function = None
        while self.tok.kind != lx.EOF:
            if self.tok.kind == lx.NL:
                self.skip_newlines()
                t = self.tok
                if (t.kind == lx.IDENT and t.text in TOP_LEVEL_KEYWORDS) or t.kind == lx.ATTR:
                    return
                if t.kind == lx.PUNCT and t.text == "[":
                    return
            else:
                self.advance()

    def poison(self, start: int, stop: int) -> None:
        """Names defined by tokens[start:stop], a statement that failed to parse.

        Their later uses are not reported as undefined: the first error explains them.
        """
        for i in range(start, stop):
            t = self.tokens[i]
            after = self.tokens[i + 1]
            defines_local = t.kind == lx.LOCAL and after.kind == lx.PUNCT and after.text in "=:"
            defines_global = t.kind == lx.GLOBAL and self.tokens[i - 1].text in ("func", "var")
            if defines_local or defines_global:
                self.poisoned.add(t.text)

    def parse_top_level(self) -> None:
        t = self.tok
        if t.kind == lx.IDENT and t.text == "type":
            self.parse_type_alias()
        elif t.kind == lx.IDENT and t.text == "struct":
            self.parse_struct()
        elif t.kind == lx.IDENT and t.text == "enum":
            self.parse_enum()
        elif t.kind == lx.IDENT and t.text == "var":
            self.parse_variable()
        elif t.kind == lx.ATTR or (t.kind == lx.PUNCT and t.text == "[") or (
            t.kind == lx.IDENT and t.text == "func"
        ):
            self.parse_function()
        else:
            self.fail(f"expected a declaration ('func', 'var', 'type', 'struct' or 'enum'), "
                      f"found {self.describe(t)}")

    def define_type(self, tok: lx.Token, decl: Any) -> None:
        if tok.name in self.module.type_decls:
            self.error_at(tok.offset, f"redefinition of type '{tok.text}'")
            return
        decl.location = self.lines.location(tok.offset)  # where the verifier points
        self.module.add_type(decl)

    def parse_type_alias(self) -> None:
        self.advance()
        name = self.expect(lx.NOMINAL, "a type name like '$Name'")
        self.expect_punct("=")
        target = None if self.accept_keyword("opaque") else self.parse_type()
        self.alias_offsets.setdefault(name.name, name.offset)
        self.define_type(name, AliasDecl(name.name, target))
        self.end_of_statement()

    def parse_struct(self) -> None:
        self.advance()
        name = self.expect(lx.NOMINAL, "a type name like '$Name'")
        self.expect_punct("{")
        fields: list[tuple[str, Type]] = []
        self.skip_newlines()
        while not self.accept_punct("}"):
            key = self.expect(lx.FIELD, "a field like '#name'")
            if any(k == key.name for k, _ in fields):
                self.error_at(key.offset, f"duplicate field '{key.text}'")
            self.expect_punct(":")
            fields.append((key.name, self.parse_type()))
            at_end = self.tok.kind == lx.NL or (self.tok.kind == lx.PUNCT and self.tok.text == "}")
            if not self.accept_punct(",") and not at_end:
                self.fail(f"expected ',', newline or '}}', found {self.describe(self.tok)}")
            self.skip_newlines()
        self.define_type(name, StructDecl(name.name, fields))
        self.end_of_statement()

    def parse_enum(self) -> None:
        self.advance()
        name = self.expect(lx.NOMINAL, "a type name like '$Name'")
        self.expect_punct("{")
        cases: list[tuple[str, tuple[Type, ...]]] = []
        self.skip_newlines()
        while not self.accept_punct("}"):
            case = self.expect(lx.CASE, "an enum case like '?name'")
            if any(c == case.name for c, _ in cases):
                self.error_at(case.offset, f"duplicate case '{case.text}'")
            types: list[Type] = []
            if self.accept_punct("(") and not self.accept_punct(")"):
                types.append(self.parse_type())
                while self.accept_punct(","):
                    types.append(self.parse_type())
                self.expect_punct(")")
            cases.append((case.name, tuple(types)))
            self.accept_punct(",")
            self.skip_newlines()
        self.define_type(name, EnumDecl(name.name, cases))
        self.end_of_statement()

    def define_global(self, tok: lx.Token, value: Value) -> None:
        pos = _positional(tok.name)
        if pos is not None:
            if pos[1] is not None or pos[0] != self.globals_count:
                self.error_at(tok.offset, f"positional name '{tok.text}' does not match its "
                              f"position @{self.globals_count}")
            value.name = None
        elif tok.name in self.globals:
            self.error_at(tok.offset, f"redefinition of '{tok.text}'")
        self.globals[tok.name] = value
        self.globals_count += 1

    def parse_variable(self) -> None:
        self.advance()
        name = self.expect(lx.GLOBAL, "a variable name like '@name'")
        self.expect_punct(":")
        var = GlobalVariable(name.name, self.parse_type())
        var.location = self.lines.location(name.offset)
        self.define_global(name, var)
        self.module.add_global(var)
        self.end_of_statement()

    # ------------------------------------------------------------ functions

    def parse_function(self) -> None:
        attributes: list[str] = []
        while self.tok.kind == lx.ATTR:
            t = self.advance()
            if t.name not in FUNCTION_ATTRIBUTES:
                self.error_at(t.offset, f"unknown function attribute '{t.text}' (known: "
                              f"{', '.join('!' + a for a in sorted(FUNCTION_ATTRIBUTES))})")
            elif t.name not in attributes:
                attributes.append(t.name)
            self.skip_newlines()
        declaration: DerivativeDecl | str | None = None
        if self.accept_punct("["):
            declaration = self.parse_declaration_kind()
            self.expect_punct("]")
            self.skip_newlines()
        func_tok = self.expect_keyword("func", " after the function's attributes")
        name = self.expect(lx.GLOBAL, "a function name like '@name'")
        self.expect_punct(":")
        self.skip_newlines()
        type_tok = self.tok
        ftype = self.parse_type()
        if not isinstance(ftype, FunctionType):
            self.fail(f"expected a function type '(…) -> …', found '{ftype}'", type_tok)
        fn = Function(name.name, ftype, attributes=tuple(attributes), declaration=declaration)
        fn.location = self.lines.location(func_tok.offset)
        self.define_global(name, fn)
        self.module.add_function(fn)
        if self.peek_past_newlines().text == "{" and self.peek_past_newlines().kind == lx.PUNCT:
            self.skip_newlines()
            brace = self.advance()
            if declaration is not None:
                self.error_at(brace.offset, f"declaration '{name.text}' cannot have a body")
            if not self.parse_body(fn, brace):
                return
        self.end_of_statement()

    def parse_declaration_kind(self) -> DerivativeDecl | str:
        t = self.expect(lx.IDENT, "'extern', 'gradient', 'adjoint' or 'tangent'")
        if t.text == "extern":
            return "extern"
        if t.text not in DERIVATIVE_KINDS:
            self.fail(f"unknown declaration kind '{t.text}'", t)
        of_tok = self.expect(lx.GLOBAL, "the function to differentiate, like '@f'")
        decl = DerivativeDecl(DERIVATIVE_KINDS[t.text], self.global_use(of_tok, None))
        decl.location = self.lines.location(t.offset)
        if self.accept_keyword("from"):
            decl.from_index = self.parse_int()
        if self.accept_keyword("wrt"):
            decl.wrt = tuple(self.parse_int_list())
        if self.accept_keyword("keeping"):
            decl.keeping = tuple(self.parse_int_list())
        if self.accept_keyword("seedable"):
            decl.seedable = True
        return decl

    def parse_body(self, fn: Function, brace: lx.Token) -> bool:
        """The blocks up to the closing `}`; False when the body is left unclosed."""
        self.function = fn
        self.locals, self.local_placeholders, self.local_uses = {}, {}, []
        self.blocks, self.block_refs, self.fixups = {}, {}, []
        self.skip_newlines()
        closed = True
        while not (self.tok.kind == lx.PUNCT and self.tok.text == "}"):
            if self.tok.kind == lx.EOF:
                self.error_at(brace.offset, "function body is not closed: expected '}' "
                              "matching this '{'")
                closed = False
                break
            if self.starts_declaration():
                self.error_at(self.tok.offset, f"expected '}}' to close the body of "
                              f"'@{fn.name}' before this declaration")
                closed = False
                break
            self.parse_statement(fn)
        if closed:
            self.advance()  # '}'
            if not fn.blocks and not self.sink.failed:
                self.error_at(brace.offset, "a function body needs at least an entry block")
        self.resolve_locals(fn)
        self.function = None
        self.block = None
        return closed

    def starts_declaration(self) -> bool:
        """A top-level keyword at the start of a line, where a body statement should be."""
        t = self.tok
        if self.pos == 0 or self.tokens[self.pos - 1].kind != lx.NL:
            return False
        return (t.kind == lx.IDENT and t.text in TOP_LEVEL_KEYWORDS) or t.kind == lx.ATTR

    def parse_statement(self, fn: Function) -> None:
        """One block header or instruction; on an error, report it and skip the line."""
        start = self.pos
        try:
            if self.tok.kind == lx.BLOCK:
                self.parse_block_header(fn, self.advance())
            elif self.block is None:
                self.parse_unmarked_block_header(fn)
            else:
                self.parse_instruction()
        except ParseError as e:
            self.syntax_error(e)
            self.nesting = 0
            if self.pos == start:
                self.advance()
            while self.tok.kind not in (lx.NL, lx.EOF) and not (
                self.tok.kind == lx.PUNCT and self.tok.text == "}"
            ):
                self.advance()
            self.poison(start, self.pos)
            self.skip_newlines()

    def parse_unmarked_block_header(self, fn: Function) -> None:
        """`entry(…):` without its `'`: report it, then read it as a block header."""
        t, after = self.tok, self.tokens[self.pos + 1]
        if t.kind != lx.IDENT or after.kind != lx.PUNCT or after.text != "(":
            self.fail(f"expected a block label like 'entry(…):', found {self.describe(t)}")
        self.error_at(t.offset, f"block labels start with \"'\": write ''{t.text}'")
        self.advance()
        self.parse_block_header(fn, lx.Token(lx.BLOCK, "'" + t.text, t.offset))

    def block_named(self, tok: lx.Token) -> Block:
        block = self.blocks.get(tok.name)
        if block is None:
            block = self.blocks[tok.name] = Block(tok.name)
            self.block_refs[tok.name] = tok.offset
        return block

    def parse_block_header(self, fn: Function, tok: lx.Token) -> None:
        block = self.block_named(tok)
        if block.function is not None:
            self.error_at(tok.offset, f"redefinition of block {tok.text}")
            block = Block(tok.name)
        self.block_refs.pop(tok.name, None)
        pos = _positional(tok.name)
        index = len(fn.blocks)
        if pos is not None:
            if pos[1] is not None or pos[0] != index:
                self.error_at(tok.offset, f"positional block name '{tok.text}' does not match "
                              f"its position '{index}")
            block.name = None
        block.location = self.lines.location(tok.offset)
        fn.append_block(block)
        self.block = block
        self.expect_punct("(", " after the block name")
        if not self.accept_punct(")"):
            while True:
                arg_tok = self.expect(lx.LOCAL, "a block argument like '%x'")
                self.expect_punct(":")
                arg = Argument(self.parse_type(), arg_tok.name)
                block.add_argument(arg)
                self.define_local(arg_tok, arg, index, len(block.arguments) - 1, "^")
                if not self.accept_punct(","):
                    break
            self.expect_punct(")")
        self.expect_punct(":", " after the block header")
        self.end_of_statement()

    def define_local(self, tok: lx.Token, value: Value, b: int, i: int, sep: str) -> None:
        name = tok.name
        pos = _positional(name)
        if pos is not None:
            expected = f"%{b}{sep}{i}"
            if pos != (b, i, sep):
                self.error_at(tok.offset, f"positional name '{tok.text}' does not match its "
                              f"position {expected}")
            value.name = None
        if name in self.locals:
            self.error_at(tok.offset, f"redefinition of '{tok.text}'")
            return
        self.locals[name] = value

    def parse_instruction(self) -> None:
        assert self.block is not None and self.function is not None
        name_tok = None
        if self.tok.kind == lx.LOCAL:
            name_tok = self.advance()
            self.expect_punct("=", " after the instruction's name")
        op_tok = self.expect(lx.IDENT, "an instruction")
        op = lookup(op_tok.text)
        if op is None:
            self.unknown_opcodes = True
            self.fail(f"unknown instruction '{op_tok.text}'", op_tok)
        fields: dict[str, Any] = {}
        forward_uses = self.forward_uses
        self.parse_pieces(op.format, fields)
        inst = Instruction(op, fields, location=self.lines.location(op_tok.offset))
        if self.forward_uses != forward_uses:  # it uses a value defined later
            self.fixups.append(inst)
        try:
            inst.type = op.infer(inst, self.module)
        except TypeRuleError:
            inst.type = INVALID  # reported by the verifier
        index = len(self.block.instructions)
        self.block.append(inst)
        if name_tok is not None:
            inst.name = name_tok.name
            self.define_local(name_tok, inst, len(self.function.blocks) - 1, index, ".")
        self.end_of_statement()

    # ------------------------------------------------------------ instruction syntax

    def parse_pieces(self, pieces: tuple[Piece, ...], fields: dict[str, Any]) -> None:
        for p in pieces:
            if p.kind == "keyword":
                self.expect_keyword(p.text)
            elif p.kind == "punct":
                self.expect_punct(p.text)
            elif p.kind == "field":
                fields[p.text] = self.parse_field(p.field_kind)
            elif self.starts(p.children[0]):
                self.parse_pieces(p.children, fields)
            else:
                for c in p.children:
                    if c.kind == "field":
                        fields[c.text] = None

    def starts(self, p: Piece) -> bool:
        t = self.tok
        if p.kind == "keyword":
            return t.kind == lx.IDENT and t.text == p.text
        if p.kind == "punct":
            return t.kind == lx.PUNCT and t.text == p.text
        return t.kind not in (lx.NL, lx.EOF) and not (t.kind == lx.PUNCT and t.text == "}")

    def parse_field(self, kind: str) -> Any:
        return getattr(self, "field_" + kind)()

    def field_use(self) -> Value:
        return self.parse_use()

    field_literal_use = field_use

    def field_uses(self) -> list[Value]:
        out = [self.parse_use()]
        while self.accept_punct(","):
            out.append(self.parse_use())
        return out

    def field_call_args(self) -> list[Value]:
        self.expect_punct("(")
        out: list[Value] = []
        if not self.accept_punct(")"):
            out = self.field_uses()
            self.expect_punct(")")
        return out

    def field_keys(self) -> list[Any]:
        keys: list[Any] = []
        while True:
            t = self.tok
            if t.kind == lx.INT and not (
                self.tokens[self.pos + 1].kind == lx.PUNCT and self.tokens[self.pos + 1].text == ":"
            ):
                keys.append(self.parse_int())
            elif t.kind == lx.FIELD:
                keys.append(FieldKey(self.advance().name))
            else:
                keys.append(self.parse_use())
            if not self.accept_punct(","):
                return keys

    def field_target(self) -> BranchTarget:
        tok = self.expect(lx.BLOCK, "a block like 'name'")
        block = self.block_named(tok)
        args: list[Value] = []
        if self.accept_punct("(") and not self.accept_punct(")"):
            args = self.field_uses()
            self.expect_punct(")")
        return BranchTarget(block, args)

    def field_enum_cases(self) -> list[tuple[str, BranchTarget]]:
        cases = []
        self.expect_keyword("case")
        while True:
            case = self.expect(lx.CASE, "an enum case like '?name'")
            block = self.block_named(self.expect(lx.BLOCK, "a block like 'name'"))
            cases.append((case.name, BranchTarget(block, [])))
            if not self.accept_keyword("case"):
                return cases

    def field_combinator(self) -> Any:
        t = self.tok
        if t.kind == lx.IDENT and t.text == "builtin":
            self.advance()
            return BuiltinRef(lx.unescape(self.expect(lx.STRING, "a builtin name string").text))
        if t.kind == lx.IDENT and t.text not in ("true", "false", "zero"):
            op = lookup(self.advance().text)
            if op is None:
                self.unknown_opcodes = True
                self.fail(f"unknown combinator '{t.text}'", t)
            return op.name
        return self.parse_use()

    def field_callee(self) -> Value:
        t = self.tok
        if t.kind == lx.GLOBAL:
            return self.global_use(self.advance(), None)
        if t.kind == lx.LOCAL:
            return self.local_use(self.advance(), None)
        self.fail(f"expected a function like '@f', found {self.describe(t)}")

    def field_int(self) -> int:
        return self.parse_int()

    def field_ints(self) -> list[int]:
        return self.parse_int_list()

    def field_dtype(self) -> Any:
        t = self.expect(lx.IDENT, "a data type")
        dt = parse_data_type(t.text)
        if dt is None:
            self.fail(f"unknown data type '{t.text}'", t)
        return dt

    def field_type(self) -> Type:
        return self.parse_type()

    def field_shape(self) -> tuple[int | None, ...]:
        if self.accept_keyword("scalar"):
            return ()
        dims = [self.parse_dim()]
        while self.accept_keyword("x"):
            dims.append(self.parse_dim())
        return tuple(dims)

    def field_padding_mode(self) -> str:
        t = self.expect(lx.IDENT, "a padding mode ('none', 'half' or 'full')")
        if t.text not in ("none", "half", "full"):
            self.fail(f"unknown padding mode '{t.text}' (expected none, half or full)", t)
        return t.text

    def field_pads(self) -> list[tuple[int, int]]:
        pads = []
        while True:
            self.expect_punct("(")
            lo = self.parse_int()
            self.expect_punct(",")
            hi = self.parse_int()
            self.expect_punct(")")
            pads.append((lo, hi))
            if not self.accept_punct(","):
                return pads

    def field_string(self) -> str:
        return lx.unescape(self.expect(lx.STRING, "a string").text)

    def field_signature(self) -> Type:
        if self.accept_punct(":"):  # the paper-era `: (T…) -> R`
            t = self.tok
            ftype = self.parse_type()
            if not isinstance(ftype, FunctionType):
                self.fail(f"expected a function type after ':', found '{ftype}'", t)
            return ftype.result
        self.expect_punct("->", " before the result type")
        return self.parse_type()

    # ------------------------------------------------------------ pieces shared by fields

    def parse_int(self) -> int:
        return int(self.expect(lx.INT, "an integer").text)

    def parse_int_list(self) -> list[int]:
        out = [self.parse_int()]
        while self.accept_punct(","):
            out.append(self.parse_int())
        return out

    def parse_dim(self) -> int | None:
        t = self.tok
        if t.kind == lx.INT:
            self.advance()
            if t.text.startswith("-"):
                self.fail(f"dimension must not be negative, found {t.text}", t)
            return int(t.text)
        if t.kind == lx.IDENT and t.text == "_":
            self.advance()
            return None
        self.fail(f"expected a dimension (an integer or '_'), found {self.describe(t)}")

    def parse_type(self) -> Type:
        self.nest()
        try:
            return self._parse_type()
        finally:
            self.nesting -= 1

    def _parse_type(self) -> Type:
        t = self.tok
        if t.kind == lx.IDENT:
            self.advance()
            dt = parse_data_type(t.text)
            if dt is not None:
                return TensorType((), dt)
            if t.text == "stack":
                return STACK
            if t.text == "void":
                return VOID
            if t.text == "box":
                self.expect_punct("{")
                inner = self.parse_type()
                self.expect_punct("}")
                return BoxType(inner)
            self.fail(f"unknown type '{t.text}'", t)
        if t.kind == lx.NOMINAL:
            self.advance()
            self.nominal_uses.append((t.name, t.offset))
            return NominalType(t.name)
        if t.kind == lx.PUNCT:
            if t.text == "<":
                return self.parse_tensor_type()
            if t.text == "(":
                self.advance()
                elements: list[Type] = []
                if not self.accept_punct(")"):
                    elements.append(self.parse_type())
                    while self.accept_punct(","):
                        elements.append(self.parse_type())
                    self.expect_punct(")", " at the end of the type list")
                nxt = self.peek_past_newlines()
                if nxt.kind == lx.PUNCT and nxt.text == "->":
                    self.skip_newlines()
                    self.advance()
                    self.skip_newlines()
                    return FunctionType(tuple(elements), self.parse_type())
                return TupleType(tuple(elements))
            if t.text == "[":
                self.advance()
                count = self.parse_int()
                if count < 0:
                    self.fail("array size must not be negative", t)
                self.expect_keyword("x", " in the array type")
                element = self.parse_type()
                self.expect_punct("]")
                return ArrayType(count, element)
            if t.text == "*":
                self.advance()
                return PointerType(self.parse_type())
        self.fail(f"expected a type, found {self.describe(t)}")

    def parse_tensor_type(self) -> Type:
        # Tensor types repeat on every use; parse each distinct spelling once.
        start = self.tokens[self.pos].offset
        end = self.source.text.find(">", start)
        key = self.source.text[start: end + 1] if end > 0 else ""
        cached = self.tensor_types.get(key)
        if cached is not None:
            self.pos += cached[1]
            return cached[0]
        first = self.pos
        t = self._parse_tensor_type()
        if key and self.tokens[self.pos - 1].offset == end and "/" not in key and "\n" not in key:
            self.tensor_types[key] = (t, self.pos - first)
        return t

    def _parse_tensor_type(self) -> Type:
        self.advance()  # '<'
        dims: list[int | None] = []
        while True:
            t = self.tok
            if t.kind == lx.IDENT and t.text != "_":
                dt = parse_data_type(t.text)
                if dt is None:
                    self.fail(f"unknown data type '{t.text}'", t)
                self.advance()
                break
            dims.append(self.parse_dim())
            self.expect_keyword("x", " between dimensions")
        self.expect_punct(">", " at the end of the tensor type")
        if not dims:
            self.fail("a tensor type needs at least one dimension; write the scalar type "
                      f"'{dt}' instead", t)
        return TensorType(tuple(dims), dt)

    # ------------------------------------------------------------ uses and literals

    def parse_use(self) -> Value:
        t = self.tok
        if t.kind == lx.LOCAL or t.kind == lx.GLOBAL:
            self.advance()
            colon = self.tok
            if colon.kind != lx.PUNCT or colon.text != ":":  # the message only when needed
                self.expect_punct(":", f" and the type of '{t.text}'")
            self.pos += 1
            use = self.local_use if t.kind == lx.LOCAL else self.global_use
            return use(t, self.parse_type())
        self.nest()
        try:
            literal = self.parse_literal()
            self.expect_punct(":", " and the literal's type")
            return LiteralValue(literal, self.parse_type())
        finally:
            self.nesting -= 1

    def parse_literal(self) -> Literal:
        t = self.tok
        if t.kind == lx.INT:
            self.advance()
            return ScalarLiteral(int(t.text))
        if t.kind == lx.FLOAT:
            self.advance()
            return ScalarLiteral(float(t.text))
        if t.kind == lx.IDENT and t.text == "dense":
            self.advance()
            text = lx.unescape(self.expect(lx.STRING, "the elements as a string '\"0x…\"' "
                                                  "after 'dense'").text)
            digits = text[2:] if text.startswith("0x") else None
            try:
                return DenseLiteral(bytes.fromhex(digits or "?"))
            except ValueError:
                self.fail("a dense literal's string is '0x' and two hexadecimal digits per "
                          "byte")
        if t.kind == lx.IDENT:
            keyword = {"true": ScalarLiteral(True), "false": ScalarLiteral(False),
                       "zero": ZERO, "undefined": UNDEFINED, "null": NULL,
                       "inf": ScalarLiteral(float("inf")), "nan": ScalarLiteral(float("nan"))}
            if t.text in keyword:
                self.advance()
                return keyword[t.text]
        if t.kind == lx.CASE:
            self.advance()
            elements = self.literal_elements("(", ")") if (
                self.tok.kind == lx.PUNCT and self.tok.text == "("
            ) else ()
            return AggregateLiteral("enum", elements, (t.name,))
        if t.kind == lx.PUNCT:
            brackets = {"<": ("tensor", ">"), "(": ("tuple", ")"), "[": ("array", "]")}
            if t.text in brackets:
                kind, close = brackets[t.text]
                return AggregateLiteral(kind, self.literal_elements(t.text, close))
            if t.text == "{":
                return self.parse_struct_literal()
        self.fail(f"expected a value (like '%x: f32' or '1: f32'), found {self.describe(t)}")

    def literal_elements(self, open_: str, close: str) -> tuple[Value, ...]:
        self.expect_punct(open_)
        if self.accept_punct(close):
            return ()
        elements = [self.parse_use()]
        while self.accept_punct(","):
            elements.append(self.parse_use())
        self.expect_punct(close, " at the end of the literal")
        return tuple(elements)

    def parse_struct_literal(self) -> Literal:
        self.expect_punct("{")
        keys: list[str] = []
        values: list[Value] = []
        self.skip_newlines()
        while not self.accept_punct("}"):
            keys.append(self.expect(lx.FIELD, "a field like '#name'").name)
            self.expect_punct("=")
            values.append(self.parse_use())
            if not self.accept_punct(","):
                self.skip_newlines()
                self.expect_punct("}", " at the end of the struct literal")
                break
            self.skip_newlines()
        return AggregateLiteral("struct", tuple(values), tuple(keys))

    # ------------------------------------------------------------ name resolution

    def check_use_type(self, value: Value, written: Type, offset: int, text: str) -> None:
        actual = value.type
        if actual == written or actual is INVALID:
            return
        if self.module.resolve(actual) == self.module.resolve(written):
            return
        self.error_at(offset, f"'{text}' has type '{actual}' but is used as '{written}'")

    def local_use(self, tok: lx.Token, written: Type | None) -> Value:
        value = self.locals.get(tok.name)
        if value is None:
            ph = self.local_placeholders.get(tok.name)
            if ph is None:
                ph = self.local_placeholders[tok.name] = Placeholder(
                    "%", tok.name, written or INVALID, tok.offset)
            if written is not None:
                self.local_uses.append((ph, written, tok.offset))
            self.forward_uses += 1
            return ph
        if written is not None:
            self.check_use_type(value, written, tok.offset, tok.text)
        return value

    def global_use(self, tok: lx.Token, written: Type | None) -> Value:
        value = self.globals.get(tok.name)
        if value is None:
            ph = self.global_placeholders.get(tok.name)
            if ph is None:
                ph = self.global_placeholders[tok.name] = Placeholder(
                    "@", tok.name, written or INVALID, tok.offset)
            self.global_uses.append((ph, written, tok.offset))
            self.forward_uses += 1
            return ph
        if written is not None:
            self.check_use_type(value, written, tok.offset, tok.text)
        return value

    def resolve_locals(self, fn: Function) -> None:
        for name, offset in self.block_refs.items():
            self.error_at(offset, f"use of undefined block ''{name}'")
        if not self.local_placeholders:
            return
        mapping: dict[Value, Value] = {}
        for name, ph in self.local_placeholders.items():
            value = self.locals.get(name)
            if value is None:
                if f"%{name}" not in self.poisoned:
                    self.error_at(ph.offset, f"use of undefined value '%{name}'")
            else:
                mapping[ph] = value
        for ph, written, offset in self.local_uses:
            if ph in mapping:
                self.check_use_type(mapping[ph], written, offset, f"%{ph.name}")
        for inst in self.fixups:
            inst.replace_uses(mapping)
            self.retype(inst)

    def retype(self, inst: Instruction) -> None:
        try:
            inst.type = inst.op.infer(inst, self.module)
        except TypeRuleError:
            inst.type = INVALID

    def resolve_globals(self) -> None:
        if not self.global_placeholders:
            return
        mapping: dict[Value, Value] = {}
        for name, ph in self.global_placeholders.items():
            value = self.globals.get(name)
            if value is None:
                if f"@{name}" not in self.poisoned:
                    self.error_at(ph.offset, f"use of undefined function or variable '@{name}'")
            else:
                mapping[ph] = value
        for ph, written, offset in self.global_uses:
            if ph in mapping and written is not None:
                self.check_use_type(mapping[ph], written, offset, f"@{ph.name}")
        for fn in self.module.functions:
            if isinstance(fn.declaration, DerivativeDecl):
                fn.declaration.of = mapping.get(fn.declaration.of, fn.declaration.of)
            for inst in fn.instructions():
                if inst.replace_uses(mapping):
                    self.retype(inst)


def parse(text: str | bytes, filename: str = "<input>") -> Module:
    """Parse a module; raises `DiagnosticError` listing every error found."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DiagnosticError([Diagnostic(f"{filename}: input is not UTF-8 text ({e.reason} "
                                              f"at byte {e.start})")]) from None
    parser = Parser(text, filename)
    module = parser.parse_module()
    parser.sink.sort()
    if parser.unknown_opcodes:
        parser.sink.diagnostics.extend(Diagnostic(n, severity="note")
                                       for n in failed_plugin_notes())
    parser.sink.raise_if_failed()
    return module


def parse_file(path: str | os.PathLike[str]) -> Module:
    """The module in the file `path`, read as `dlvm.ir.files` reads a module's text (at
    most `MAX_TEXT_BYTES`; a pipe or device too, up to that)."""
    try:
        data = read_input(path, what="module")
    except DlvmError as e:
        raise DiagnosticError([Diagnostic(str(e))]) from None
    return parse(data, os.fspath(path))
