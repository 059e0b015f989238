"""The verifier: every rule a well-formed module obeys.

It reports all problems it finds (not just the first), each located at
the offending instruction, block or function when the IR came from text.
Checked: names, types of every instruction (the type rules), literals,
terminators, block arguments, returns, dominance of uses, entry
arguments, and the types of gradient declarations.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .analysis.dominance import DominatorTree
from .core import (
    Argument,
    Block,
    DerivativeDecl,
    Function,
    GlobalVariable,
    Instruction,
    LiteralValue,
    Module,
    Value,
)
from .derivatives import gradient_type
from .diagnostics import DiagnosticError, DiagnosticSink, Location
from .instructions.aggregate import check_literal
from .opdef import TypeRuleError
from .types import (
    INVALID,
    MAX_SIZE,
    AliasDecl,
    ArrayType,
    BoxType,
    EnumDecl,
    FunctionType,
    InvalidType,
    NominalType,
    PointerType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
    types_compatible,
)

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")

# Field kinds the text format writes as a list of one or more items: what one item is
# (by field name first, then by kind).
NONEMPTY_FIELDS = {"uses": "operand", "keys": "key", "enum_cases": "case", "ints": "value",
                   "pads": "(low, high) pair"}
ITEM_NAMES = {"dims": "dimension", "strides": "stride", "leftDilation": "dilation",
              "rightDilation": "dilation"}


class Verifier:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.sink = DiagnosticSink()
        self.cyclic: set[str] = set()

    def error(self, message: str, where: Location | None) -> None:
        self.sink.error(message, where)

    def run(self) -> None:
        m = self.module
        names: dict[str, object] = {}
        for g in [*m.globals, *m.functions]:
            if g.name is None:
                continue
            if not IDENTIFIER.match(g.name):
                self.error(f"invalid name '@{g.name}'", g.location)
            if g.name in names:
                self.error(f"redefinition of '@{g.name}'", g.location)
            names[g.name] = g
        self.type_decls()
        for g in m.globals:
            self.check_type(g.value_type, f"the type of '@{g.name}'", g.location)
        self.cyclic = self.derivative_cycles()
        for fn in m.functions:
            self.function(fn)

    def derivative_cycles(self) -> set[str]:
        """A gradient of a gradient is fine; a declaration that is (through others) its own
        derivative has no definition to start from. Returns the names in such cycles."""
        decls = {f.name: f for f in self.module.functions
                 if isinstance(f.declaration, DerivativeDecl) and f.name is not None}

        def of(name: str) -> list[str]:
            target = decls[name].declaration.of  # type: ignore[union-attr]
            return [target.name] if target.name in decls and target is decls.get(
                target.name) else []

        cyclic: set[str] = set()
        for cycle in cycles(decls, of):
            path = " → ".join(f"@{n}" for n in [*cycle, cycle[0]])
            for n in cycle:
                decl = decls[n].declaration
                assert isinstance(decl, DerivativeDecl)
                self.error(f"{decl.kind} declaration '@{n}' depends on itself ({path})",
                           decl.location or decls[n].location)
            cyclic.update(cycle)
        return cyclic

    # ------------------------------------------------------------ types

    def type_problem(self, t: Type) -> str | None:
        """Why `t` is not a well-formed type of this module, or None."""
        if isinstance(t, InvalidType):
            return "an invalid type"
        if isinstance(t, NominalType):
            return None if t.name in self.module.type_decls else f"undeclared type '${t.name}'"
        if isinstance(t, TensorType):
            return size_problem(t)
        if isinstance(t, ArrayType) and t.count > MAX_SIZE:
            return f"an array count {t.count} beyond the largest size ({MAX_SIZE})"
        return next((p for p in map(self.type_problem, type_parts(t)) if p), None)

    def by_value_structs(self, decl: StructDecl) -> list[str]:
        """The structs that `decl` holds in place (directly or inside tuples, arrays, aliases)."""
        out: list[str] = []
        todo = [t for _, t in decl.fields]
        seen: set[str] = set()
        while todo:
            t = todo.pop()
            if isinstance(t, TupleType):
                todo.extend(t.elements)
            elif isinstance(t, ArrayType):
                todo.append(t.element)
            elif isinstance(t, NominalType) and t.name not in seen:
                seen.add(t.name)
                d = self.module.type_decls.get(t.name)
                if isinstance(d, StructDecl):
                    out.append(t.name)
                elif isinstance(d, AliasDecl) and d.target is not None:
                    todo.append(d.target)
        return out

    def check_type(self, t: Type, what: str, where: Location | None) -> bool:
        problem = self.type_problem(t)
        if problem:
            self.error(f"{what} contains {problem}", where)
        return problem is None

    def type_decls(self) -> None:
        decls = self.module.type_decls
        for name, decl in decls.items():
            for t in decl_members(decl):
                self.check_type(t, f"the declaration of '${name}'", decl.location)
        # An alias is transparent, so it must expand to a finite type: no alias may appear in
        # its own expansion, at any depth (`type $B = ($A, f32)` with `type $A = $B`).
        aliases = {n: d for n, d in decls.items() if isinstance(d, AliasDecl)}
        for cycle in cycles(aliases, lambda n: [m for m in nominal_names(aliases[n].target)
                                                 if m in aliases]):
            path = " → ".join(f"${n}" for n in [*cycle, cycle[0]])
            for n in cycle:
                self.error(f"type alias '${n}' refers to itself ({path}); a recursive type "
                           "needs a struct or an enum", aliases[n].location)
        # A struct holds its fields in place, so it cannot contain itself by value (through
        # tuples, arrays, aliases and other structs); pointers, boxes and enums are indirect.
        structs = {n: d for n, d in decls.items() if isinstance(d, StructDecl)}
        for cycle in cycles(structs, lambda n: self.by_value_structs(structs[n])):
            path = " → ".join(f"${n}" for n in [*cycle, cycle[0]])
            for n in cycle:
                self.error(f"struct '${n}' contains itself by value ({path}); hold it through "
                           "a pointer or a box", structs[n].location)

    # ------------------------------------------------------------ functions

    def function(self, fn: Function) -> None:
        decl = fn.declaration
        if decl is not None and fn.blocks:
            self.error(f"declaration '@{fn.name}' cannot have a body", fn.location)
        if isinstance(decl, DerivativeDecl):
            if self.module.stage != "raw":
                self.error(f"'@{fn.name}' is a {decl.kind} declaration, which a module at "
                           f"stage '{self.module.stage}' cannot hold (only 'raw' modules do; "
                           "the differentiation pass turns them into functions)",
                           decl.location or fn.location)
            if fn.name not in self.cyclic:
                self.derivative(fn, decl)
        if not self.check_type(fn.type, f"the signature of '@{fn.name}'", fn.location):
            return
        if "kernel" in fn.attributes:
            self.kernel(fn)
        if not fn.blocks:
            return
        entry = fn.entry
        params = fn.type_.arguments
        arg_types = tuple(a.type for a in entry.arguments)
        if arg_types != params and tuple(map(self.module.resolve, arg_types)) != tuple(
            map(self.module.resolve, params)
        ):
            self.error(f"entry block arguments ({', '.join(map(str, arg_types))}) do not match "
                       f"the parameters of '@{fn.name}' ({', '.join(map(str, params))})",
                       entry.location or fn.location)
        for block in fn.blocks[1:]:
            for a in block.arguments:
                self.check_type(a.type, f"an argument of block {self.block_name(block)}",
                                block.location or fn.location)
        self.names(fn)
        dom = fn.analysis(DominatorTree)
        for block in fn.blocks:
            self.block(fn, block, dom)

    def kernel(self, fn: Function) -> None:
        """`!kernel`: one block of pure instructions, so that a target compiles one loop nest."""
        if len(fn.blocks) != 1:
            self.error(f"kernel '@{fn.name}' must have exactly one block, found "
                       f"{len(fn.blocks)}", fn.location)
            return
        for inst in fn.blocks[0].instructions[:-1]:
            if "pure" not in inst.op.traits:
                self.error(f"kernel '@{fn.name}' may hold only pure instructions, found "
                           f"'{inst.opcode}'", inst.location or fn.location)

    def derivative(self, fn: Function, decl: DerivativeDecl) -> None:
        of = decl.of
        where = decl.location or fn.location
        if not isinstance(of, Function) or of.module is not self.module:
            self.error(f"gradient declaration refers to '{of.name}', which is not a function "
                       "of this module", where)
            return
        try:
            expected = gradient_type(decl, of.type_, self.module)
        except TypeRuleError as e:
            self.error(f"invalid gradient declaration of '@{of.name}': {e}", where)
            return
        if not types_compatible(self.module.resolve_deep(fn.type),
                                self.module.resolve_deep(expected)):
            self.error(f"gradient declaration '@{fn.name}' must have type '{expected}', "
                       f"found '{fn.type}'", where)

    def names(self, fn: Function) -> None:
        values: set[str] = set()
        blocks: set[str] = set()
        for block in fn.blocks:
            if block.name is not None:
                if not IDENTIFIER.match(block.name):
                    self.error(f"invalid block name '{block.name}", block.location)
                elif block.name in blocks:
                    self.error(f"redefinition of block '{block.name}", block.location)
                blocks.add(block.name)
            for v in [*block.arguments, *block.instructions]:
                if v.name is None:
                    continue
                where = v.location if isinstance(v, Instruction) else block.location
                if not IDENTIFIER.match(v.name):
                    self.error(f"invalid name '%{v.name}'", where)
                elif v.name in values:
                    self.error(f"redefinition of '%{v.name}'", where)
                values.add(v.name)

    # ------------------------------------------------------------ blocks

    def block(self, fn: Function, block: Block, dom: DominatorTree) -> None:
        if not block.instructions:
            self.error(f"block {self.block_name(block)} is empty; it must end with a "
                       "terminator", block.location)
            return
        last = block.instructions[-1]
        if not last.is_terminator:
            self.error(f"block {self.block_name(block)} does not end with a terminator "
                       "(branch, conditional, branchEnum or return)",
                       last.location or block.location)
        reachable = dom.is_reachable(block) if hasattr(dom, "is_reachable") else True
        for inst in block.instructions:
            if inst.is_terminator and inst is not last:
                self.error(f"terminator '{inst.opcode}' must be the last instruction of its "
                           "block", inst.location)
            self.instruction(fn, inst, dom, reachable)

    def block_name(self, block: Block) -> str:
        if block.name is not None:
            return "'" + block.name
        return "'" + str(block.index()) if block.function else "'?"

    # ------------------------------------------------------------ instructions

    def instruction(self, fn: Function, inst: Instruction, dom: DominatorTree,
                    reachable: bool) -> None:
        where = inst.location
        ok = self.list_fields(inst)
        for v in inst.operands:
            if not self.operand(fn, inst, v, dom, reachable):
                ok = False
        if not ok:
            return
        try:
            t = inst.op.infer(inst, self.module)
        except TypeRuleError as e:
            self.error(f"'{inst.opcode}': {e}", where)
            return
        if inst.type is INVALID or not types_compatible(inst.type, t):
            if inst.type is not INVALID:
                self.error(f"'{inst.opcode}' has result type '{inst.type}', but its type rule "
                           f"gives '{t}'", where)
            inst.type = t
        if not self.check_type(inst.type, f"the result type of '{inst.opcode}'", where):
            inst.type = INVALID
            return
        if inst.type.is_void and inst.name is not None:
            self.error(f"'{inst.opcode}' produces no value and cannot be named '%{inst.name}'",
                       where)
        if inst.is_terminator:
            self.terminator(fn, inst)

    def list_fields(self, inst: Instruction) -> bool:
        """Lists that the text format cannot write empty (`along`, `case`, …)."""
        ok = True
        for name, kind in inst.op.fields:
            x = inst.fields.get(name)
            if kind in NONEMPTY_FIELDS and x is not None and not x:
                item = ITEM_NAMES.get(name, NONEMPTY_FIELDS[kind])
                self.error(f"'{inst.opcode}': '{name}' is empty; it needs at least one {item}",
                           inst.location)
                ok = False
        return ok

    def operand(self, fn: Function, inst: Instruction, v: Value, dom: DominatorTree,
                reachable: bool) -> bool:
        where = inst.location
        if isinstance(v, LiteralValue):
            try:
                check_literal(v.literal, v.type, self.module)
            except TypeRuleError as e:
                self.error(f"'{inst.opcode}': {e}", where)
                return False
            return True
        if isinstance(v, Function | GlobalVariable):
            if v.module is not self.module:
                self.error(f"'{inst.opcode}' uses '@{v.name}', which is not in this module",
                           where)
                return False
            return True
        if isinstance(v, Instruction | Argument):
            owner = v.block.function if v.block is not None else None
            if owner is not fn:
                self.error(f"'{inst.opcode}' uses a value defined outside '@{fn.name}'", where)
                return False
            if v.type is INVALID:
                return False  # already reported at its definition
            if reachable and not dom.value_dominates(v, inst):
                self.error(f"'{inst.opcode}' uses '%{self.value_name(v)}' where its definition "
                           "does not dominate", where)
                return False
            return True
        self.error(f"'{inst.opcode}' uses an unresolved value '{v.name}'", where)
        return False

    def value_name(self, v: Value) -> str:
        if v.name is not None:
            return v.name
        if isinstance(v, Instruction) and v.block and v.block.function:
            return f"{v.block.index()}.{v.index()}"
        if isinstance(v, Argument) and v.block and v.block.function:
            return f"{v.block.index()}^{v.index()}"
        return "?"

    def terminator(self, fn: Function, inst: Instruction) -> None:
        where = inst.location
        if inst.opcode == "return":
            result = fn.type_.result
            v = inst.fields.get("value")
            if v is None:
                if not result.is_void:
                    self.error(f"'return' needs a value of type '{result}'", where)
            elif not self.compatible(v.type, result):
                self.error(f"'return' of '{v.type}' in a function returning '{result}'", where)
            return
        if inst.opcode == "branchEnum":
            decl = self.module.type_decls.get(self.enum_name(inst.value.type))
            for case, target in inst.cases:
                types = decl.case_types(case) if isinstance(decl, EnumDecl) else None
                self.target_args(fn, inst, target.block, list(types or ()), f"case '?{case}'")
            return
        for target in inst.targets:
            self.target_args(fn, inst, target.block, [a.type for a in target.args], "branch")

    def enum_name(self, t: Type) -> str:
        t = self.module.resolve(t)
        return t.name if isinstance(t, NominalType) else ""

    def target_args(self, fn: Function, inst: Instruction, block: Block, given: list[Type],
                    what: str) -> None:
        where = inst.location
        if block.function is not fn:
            self.error(f"'{inst.opcode}' targets a block that is not in '@{fn.name}'", where)
            return
        params = [a.type for a in block.arguments]
        name = self.block_name(block)
        if len(given) != len(params):
            self.error(f"{what} passes {len(given)} argument{'s' if len(given) != 1 else ''} "
                       f"to block {name}, which takes {len(params)}", where)
            return
        for i, (g, p) in enumerate(zip(given, params, strict=True)):
            if not self.compatible(g, p):
                self.error(f"{what} passes '{g}' as argument {i} of block {name}, "
                           f"which expects '{p}'", where)

    def compatible(self, a: Type, b: Type) -> bool:
        if types_compatible(a, b):
            return True
        ra, rb = self.module.resolve(a), self.module.resolve(b)
        if isinstance(ra, TupleType) and isinstance(rb, TupleType):
            return len(ra.elements) == len(rb.elements) and all(
                self.compatible(x, y) for x, y in zip(ra.elements, rb.elements, strict=True))
        return types_compatible(ra, rb)


def decl_members(decl: StructDecl | EnumDecl | AliasDecl) -> list[Type]:
    """The types a nominal declaration is written in terms of."""
    if isinstance(decl, StructDecl):
        return [t for _, t in decl.fields]
    if isinstance(decl, EnumDecl):
        return [t for _, ts in decl.cases for t in ts]
    return [] if decl.target is None else [decl.target]


def nominal_names(t: Type | None) -> list[str]:
    """The `$Name`s written anywhere inside `t`."""
    out: list[str] = []
    todo = [] if t is None else [t]
    while todo:
        t = todo.pop()
        if isinstance(t, NominalType):
            out.append(t.name)
        else:
            todo.extend(type_parts(t))
    return out


def cycles(nodes: dict[str, object], edges: Callable[[str], list[str]]) -> list[list[str]]:
    """The cycles of a directed graph, one per strongly connected component that has one
    (Tarjan's algorithm, iterative: linear in the graph's size and free of recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(edges(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges(nxt))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        component.append(n)
                        if n == node:
                            break
                    if len(component) > 1 or node in edges(node):
                        out.append(sorted(component, key=index.__getitem__))
    return out


def size_problem(t: TensorType) -> str | None:
    """Dimensions, and the element count, must fit in an i64."""
    count = 1
    for d in t.shape:
        if d is None:
            continue
        if d > MAX_SIZE:
            return f"a dimension {d} beyond the largest size ({MAX_SIZE})"
        count *= d
    if count > MAX_SIZE:
        return f"a tensor of {count} elements, beyond the largest size ({MAX_SIZE})"
    return None


def type_parts(t: Type) -> tuple[Type, ...]:
    """The types a compound type is built from."""
    if isinstance(t, TupleType):
        return t.elements
    if isinstance(t, FunctionType):
        return (*t.arguments, t.result)
    if isinstance(t, ArrayType):
        return (t.element,)
    if isinstance(t, PointerType):
        return (t.pointee,)
    if isinstance(t, BoxType):
        return (t.boxed,)
    return ()


def verify(module: Module) -> None:
    """Raise `DiagnosticError` listing every problem in the module."""
    v = Verifier(module)
    v.run()
    v.sink.raise_if_failed()


def verify_diagnostics(module: Module) -> list[str]:
    """The verifier's messages, without raising (for tests and tools)."""
    try:
        verify(module)
    except DiagnosticError as e:
        return [d.message for d in e.diagnostics]
    return []
