"""The structures that keep passes near-linear on large modules: positions of instructions
and blocks (`IndexedList`), module analyses brought up to date after a function changes
(`SideEffects.updated`), and type aliases resolved once per chain (`Module.resolve`).

They must answer exactly as the plain structures they replace; the counting tests check
that the work stays bounded (the times themselves belong to benchmarks/scaling.py).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import dlvm.ir as ir
from dlvm.ir.analysis import SideEffects
from dlvm.ir.core import (
    Block,
    Function,
    IndexedList,
    Instruction,
    Module,
    TypeDecls,
    erase_instructions,
)
from dlvm.ir.diagnostics import DiagnosticError
from dlvm.ir.opdef import OpDef, compile_format
from dlvm.ir.types import F32, I64, VOID, AliasDecl, FunctionType, NominalType, TupleType, scalar


class Item:
    """Compared by identity, as instructions and blocks are."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Item({self.n})"


# ---------------------------------------------------------------- IndexedList


def _check(fast: IndexedList, plain: list[Any]) -> None:
    assert list(fast) == plain
    for i, x in enumerate(plain):
        assert fast.index(x) == plain.index(x) == i


@pytest.mark.parametrize("seed", range(20))
def test_indexed_list_answers_as_a_list(seed: int) -> None:
    rng = random.Random(seed)
    items = [Item(i) for i in range(400)]
    fast, plain = IndexedList(items[:50]), list(items[:50])
    spare = items[50:]
    for step in range(600):
        op = rng.choice(["insert", "append", "delete", "pop", "remove", "index", "set",
                         "extend", "slice", "clear"] if step % 97 else ["clear"])
        if op == "insert" and spare:
            x, i = spare.pop(), rng.randrange(-len(plain) - 2, len(plain) + 3)
            fast.insert(i, x)
            plain.insert(i, x)
        elif op == "append" and spare:
            x = spare.pop()
            fast.append(x)
            plain.append(x)
        elif op == "extend" and len(spare) > 3:
            xs = [spare.pop() for _ in range(3)]
            fast.extend(xs)
            plain.extend(xs)
        elif op in ("delete", "pop", "remove") and plain:
            i = rng.randrange(-len(plain), len(plain))
            if op == "delete":
                del fast[i]
                spare.append(plain.pop(i))
            elif op == "pop":
                x = fast.pop(i)
                assert x is plain.pop(i)
                spare.append(x)
            else:
                x = plain[i]
                fast.remove(x)
                plain.remove(x)
                spare.append(x)
        elif op == "set" and plain and spare:
            i, x = rng.randrange(len(plain)), spare.pop()
            spare.append(plain[i])
            fast[i] = x
            plain[i] = x
        elif op == "slice" and len(plain) > 4:
            i = rng.randrange(len(plain) - 2)
            spare.extend(plain[i:i + 2])
            del fast[i:i + 2]
            del plain[i:i + 2]
        elif op == "clear":
            spare.extend(plain)
            fast.clear()
            plain.clear()
        elif op == "index" and plain:
            x = rng.choice(plain)
            assert fast.index(x) == plain.index(x)
        if step % 50 == 0:
            _check(fast, plain)
    _check(fast, plain)
    for x in spare:
        with pytest.raises(ValueError):
            fast.index(x)
        with pytest.raises(ValueError):
            fast.remove(x)


def test_indexed_list_with_an_item_twice_finds_the_first() -> None:
    a, b = Item(0), Item(1)
    fast = IndexedList([a, b])
    fast.append(a)
    assert fast.index(a) == 0
    fast.insert(0, b)
    assert fast.index(b) == 0 and fast.index(a) == 1
    del fast[0]
    assert fast.index(b) == 1


def test_indexed_list_copies_are_plain_lists() -> None:
    fast = IndexedList([Item(0), Item(1)])
    assert type(fast[:]) is list and type(fast.copy()) is list
    assert isinstance(fast, list)


def test_indexed_list_rebuilds_about_once_per_sqrt_n_edits() -> None:
    """A sweep that inserts before, and asks the position of, each of many instructions of
    a long block works out the positions anew only every √n edits, not at every question."""
    n, k = 10_000, 2_000
    items = [Item(i) for i in range(n)]
    rebuilds = 0

    class Counting(IndexedList):
        __slots__ = ()

        def _rebuild(self) -> bool:
            nonlocal rebuilds
            rebuilds += 1
            return super()._rebuild()

    fast = Counting(items)
    for j in range(k):
        anchor = items[j * (n // k)]
        fast.insert(fast.index(anchor), Item(-j))
        del fast[fast.index(items[j * (n // k) + 1])]
    assert rebuilds <= 2 * k / n ** 0.5 + 2


# ---------------------------------------------------------------- blocks and functions


def _op(name: str, fmt: str, *traits: str) -> OpDef:
    return OpDef(name=name, format=compile_format(fmt), infer=lambda inst, m: VOID,
                 traits=frozenset(traits))


NOP = _op("nop", "", "pure")
RET = _op("ret", "[$value]", "terminator")
STORE = _op("store", "", "side_effects")
CALL = _op("call", "$callee", "call")


def test_erase_instructions_matches_erasing_one_by_one() -> None:
    rng = random.Random(1)
    blocks = []
    for _ in range(2):
        fn = Function("f", FunctionType((), VOID))
        block = fn.append_block(Block("b"))
        for _ in range(200):
            block.append(Instruction(NOP, {}))
        blocks.append(block)
    gone = rng.sample(range(200), 80)
    erase_instructions(blocks[0].instructions[i] for i in gone)
    for inst in [blocks[1].instructions[i] for i in gone]:
        inst.erase()
    assert [blocks[0].instructions.index(i) for i in blocks[0].instructions] == list(range(120))
    assert len(blocks[0].instructions) == len(blocks[1].instructions) == 120
    assert all(i.block is blocks[0] for i in blocks[0].instructions)


def test_block_clear_detaches_every_instruction() -> None:
    fn = Function("f", FunctionType((), VOID))
    block = fn.append_block(Block("b"))
    insts = [block.append(Instruction(NOP, {})) for _ in range(5)]
    assert block.clear() == insts
    assert not block.instructions and all(i.block is None for i in insts)


# ---------------------------------------------------------------- SideEffects, updated


def _module(n: int, rng: random.Random) -> Module:
    """Functions calling earlier ones (and now and then a later one), some storing."""
    m = Module()
    fns = [m.add_function(Function(f"f{i}", FunctionType((), VOID))) for i in range(n)]
    for i, fn in enumerate(fns):
        block = fn.append_block(Block("entry"))
        for _ in range(rng.randrange(3)):
            callee = fns[rng.randrange(n)] if rng.random() < 0.1 else fns[rng.randrange(i + 1)]
            block.append(Instruction(CALL, {"callee": callee}))
        if rng.random() < 0.15:
            block.append(Instruction(STORE, {}))
        block.append(Instruction(RET, {}))
    return m


def _effects(m: Module, fx: SideEffects) -> list[Any]:
    return [fx.of(fn) for fn in m.functions]


@pytest.mark.parametrize("seed", range(25))
def test_side_effects_updated_equal_computed_afresh(seed: int) -> None:
    rng = random.Random(seed)
    m = _module(30, rng)
    for _ in range(12):
        fx = m.analysis(SideEffects)
        fn = rng.choice(m.functions)
        block = fn.blocks[0]
        edit = rng.choice(["drop", "call", "store", "nothing"])
        if edit == "drop" and len(block.instructions) > 1:
            block.instructions[rng.randrange(len(block.instructions) - 1)].erase()
        elif edit == "call":
            block.insert(0, Instruction(CALL, {"callee": rng.choice(m.functions)}))
        elif edit == "store":
            block.insert(0, Instruction(STORE, {}))
        else:
            fn.invalidate()
        assert _effects(m, m.analysis(SideEffects)) == _effects(m, SideEffects(m))
        assert fx is not None


def test_dead_code_over_many_functions_computes_side_effects_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each function's changes bring the cached analysis up to date instead of making the
    next function compute it for the whole module again."""
    pytest.importorskip("dlvm.opt", reason="the pass 'dce' comes with dlvm-opt")
    text = "\n".join(
        f"func @f{i}: (f32) -> f32 {{\n'entry(%x: f32):\n    %d = add %x: f32, 1.0: f32\n"
        f"    %y = multiply %x: f32, 2.0: f32\n    return %y: f32\n}}\n" for i in range(60))
    module = ir.parse(text)
    built = 0
    init = SideEffects.__init__

    def counted(self: SideEffects, m: Module) -> None:
        nonlocal built
        built += 1
        init(self, m)

    monkeypatch.setattr(SideEffects, "__init__", counted)
    records = ir.run_passes(module, "dce", verify_each=False)
    assert records[0].instructions_after == 120
    assert built == 1


# ---------------------------------------------------------------- type aliases


def _naive_resolve(m: Module, t: Any) -> Any:
    seen: set[str] = set()
    while isinstance(t, NominalType) and t.name not in seen:
        seen.add(t.name)
        decl = m.type_decls.get(t.name)
        if not isinstance(decl, AliasDecl) or decl.target is None:
            return t
        t = decl.target
    return t


def test_resolve_matches_following_each_chain() -> None:
    m = Module()
    m.add_type(AliasDecl("A0", scalar(F32)))
    for i in range(1, 50):
        m.add_type(AliasDecl(f"A{i}", NominalType(f"A{i - 1}")))
    m.add_type(AliasDecl("T", TupleType((NominalType("A3"),))))
    m.add_type(AliasDecl("Opaque", None))
    m.add_type(AliasDecl("O1", NominalType("Opaque")))
    # a cycle, and a chain running into it: their results depend on where one enters
    m.add_type(AliasDecl("C0", NominalType("C1")))
    m.add_type(AliasDecl("C1", NominalType("C2")))
    m.add_type(AliasDecl("C2", NominalType("C1")))
    m.add_type(AliasDecl("Missing", NominalType("Nowhere")))
    names = [*m.type_decls, "Nowhere"]
    for order in (names, names[::-1]):
        for name in order:
            assert m.resolve(NominalType(name)) == _naive_resolve(m, NominalType(name))
    m.add_type(AliasDecl("Nowhere", scalar(I64)))  # a new declaration drops what was known
    assert m.resolve(NominalType("Missing")) == scalar(I64)


def test_resolving_a_chain_reads_each_declaration_a_few_times() -> None:
    reads = 0

    class Counting(TypeDecls):
        def get(self, key: str, default: Any = None) -> Any:
            nonlocal reads
            reads += 1
            return super().get(key, default)

    m = Module()
    m.type_decls = Counting()
    n = 2_000
    m.add_type(AliasDecl("A0", scalar(F32)))
    for i in range(1, n):
        m.add_type(AliasDecl(f"A{i}", NominalType(f"A{i - 1}")))
    for i in range(n):
        assert m.resolve(NominalType(f"A{i}")) == scalar(F32)
    assert reads <= 2 * n


def _alias_module(lines: list[str]) -> str:
    return "\n".join(["module \"m\"", *lines, ""])


@pytest.mark.parametrize(("lines", "errors"), [
    (["type $A = $B", "type $B = $C", "type $C = $B"], {"A", "B", "C"}),
    (["type $A = $A"], {"A"}),
    (["type $A = $B", "type $B = ($A, f32)"], set()),  # the verifier's to report
    (["type $A = $B", "type $B = $C", "type $C = f32", "type $D = $A"], set()),
])
def test_parser_reports_every_alias_running_into_a_cycle(lines: list[str],
                                                         errors: set[str]) -> None:
    text = _alias_module(lines)
    if not errors:
        ir.parse(text)
        return
    with pytest.raises(DiagnosticError) as e:
        ir.parse(text)
    found = {d.message.split("'$")[1].split("'")[0] for d in e.value.diagnostics}
    assert found == errors


def test_parsing_a_long_alias_chain_checks_it_once() -> None:
    n = 3_000
    lines = ["type $A0 = <2 x f32>", *(f"type $A{i} = $A{i - 1}" for i in range(1, n)),
             f"func @f: ($A{n - 1}) -> $A0 {{", f"'entry(%x: $A{n - 1}):",
             f"    %y = add %x: $A{n // 2}, %x: $A1", "    return %y: $A0", "}"]
    m = ir.parse(_alias_module(lines))
    assert len(m.type_decls.resolved) >= n  # type: ignore[attr-defined]
