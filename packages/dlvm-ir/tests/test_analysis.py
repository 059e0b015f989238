"""Tests of the CFG, dominance, loop, use-def and side-effect analyses.

The IR is built with the core API and test-local instruction definitions,
so these tests depend neither on the parser nor on the global opcode table.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from dlvm.ir.analysis import (
    ALL_EFFECTS,
    NO_EFFECTS,
    ControlFlowGraph,
    DominatorTree,
    FunctionEffects,
    LoopInfo,
    PostDominatorTree,
    SideEffects,
    UseDefInfo,
)
from dlvm.ir.core import (
    Argument,
    Block,
    BranchTarget,
    DerivativeDecl,
    Function,
    GlobalVariable,
    Instruction,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from dlvm.ir.opdef import OpDef, compile_format
from dlvm.ir.types import BOOL, I64, VOID, FunctionType, Type, scalar

INT = scalar(I64)
FLAG = scalar(BOOL)


def _op(name: str, fmt: str, *traits: str) -> OpDef:
    return OpDef(
        name=name,
        format=compile_format(fmt),
        infer=lambda inst, m: VOID,
        traits=frozenset(traits),
    )


BR = _op("br", "$dest:target", "terminator")
CONDBR = _op("condbr", "$cond then $then:target else $else:target", "terminator")
RET = _op("ret", "[$value]", "terminator")
ADD = _op("add", "$lhs , $rhs", "pure")
STORE = _op("store", "$value to $pointer", "side_effects")
TRAP = _op("trap", "", "side_effects", "may_trap")
APPLY = _op("apply", "$callee:callee $args:call_args $sig:signature", "call")
REDUCE = _op("reduce", "$x by $combinator:combinator", "pure")


# ---------------------------------------------------------------- IR builders


def function(name: str = "f", params: tuple[Type, ...] = (), result: Type = VOID) -> Function:
    return Function(name, FunctionType(params, result))


def block(fn: Function, name: str, *arg_types: Type) -> Block:
    args = [Argument(t, f"{name}.{i}") for i, t in enumerate(arg_types)]
    return fn.append_block(Block(name, args))


def emit(
    b: Block, op: OpDef, name: str | None = None, type: Type = VOID, **fields: Any
) -> Instruction:
    return b.append(Instruction(op, fields, type, name))


def br(b: Block, dest: Block, *args: Value) -> Instruction:
    return emit(b, BR, dest=BranchTarget(dest, list(args)))


def condbr(
    b: Block,
    cond: Value,
    then: Block,
    else_: Block,
    *,
    then_args: tuple[Value, ...] = (),
    else_args: tuple[Value, ...] = (),
) -> Instruction:
    return emit(
        b,
        CONDBR,
        cond=cond,
        then=BranchTarget(then, list(then_args)),
        **{"else": BranchTarget(else_, list(else_args))},
    )


def ret(b: Block, value: Value | None = None) -> Instruction:
    return emit(b, RET, **({"value": value} if value is not None else {}))


def add(b: Block, lhs: Value, rhs: Value, name: str | None = None) -> Instruction:
    return emit(b, ADD, name, INT, lhs=lhs, rhs=rhs)


def lit(x: int) -> LiteralValue:
    return LiteralValue(ScalarLiteral(x), INT)


def blocks(fn: Function) -> dict[str, Block]:
    return {b.name or "?": b for b in fn.blocks}


def gcd() -> Function:
    """entry → cond ⇄ body, cond → exit: a loop whose header is `cond`."""
    fn = function("gcd", (INT, INT), INT)
    entry, cond, body, exit_ = (
        block(fn, "entry", INT, INT),
        block(fn, "cond", INT, INT),
        block(fn, "body"),
        block(fn, "exit"),
    )
    a, b = entry.arguments
    br(entry, cond, a, b)
    x, y = cond.arguments
    z = add(cond, y, lit(0), "z")
    condbr(cond, z, body, exit_)
    r = add(body, x, y, "r")
    br(body, cond, y, r)
    ret(exit_, x)
    return fn


def nested() -> Function:
    """Two nested loops, each with a preheader and a separate latch."""
    fn = function("nested", (FLAG,))
    names = ["entry", "outer", "inner_pre", "inner", "inner_body", "outer_latch", "exit"]
    b = {n: block(fn, n) for n in names}
    c = b["entry"].add_argument(Argument(FLAG, "c"))
    br(b["entry"], b["outer"])
    condbr(b["outer"], c, b["inner_pre"], b["exit"])
    br(b["inner_pre"], b["inner"])
    condbr(b["inner"], c, b["inner_body"], b["outer_latch"])
    br(b["inner_body"], b["inner"])
    br(b["outer_latch"], b["outer"])
    ret(b["exit"])
    return fn


def diamond() -> Function:
    fn = function("diamond", (FLAG,), INT)
    entry, left, right, join = (
        block(fn, "entry", FLAG),
        block(fn, "left"),
        block(fn, "right"),
        block(fn, "join", INT),
    )
    c = entry.arguments[0]
    one = add(entry, lit(1), lit(0), "one")
    condbr(entry, c, left, right)
    two = add(left, one, one, "two")
    br(left, join, two)
    br(right, join, one)
    ret(join, join.arguments[0])
    return fn


# ---------------------------------------------------------------- CFG


def test_cfg_gcd() -> None:
    fn = gcd()
    bs = blocks(fn)
    cfg = ControlFlowGraph(fn)
    assert cfg.blocks == cfg.rpo
    assert cfg.blocks[0] is bs["entry"]
    assert set(cfg.blocks) == set(fn.blocks) == cfg.reachable
    assert cfg.postorder == cfg.rpo[::-1]
    assert cfg.successors(bs["cond"]) == [bs["body"], bs["exit"]]
    assert cfg.predecessors(bs["cond"]) == [bs["entry"], bs["body"]]
    assert cfg.back_edges == [(bs["body"], bs["cond"])]
    assert cfg.exits == [bs["exit"]]
    assert cfg.critical_edges == []


def test_cfg_duplicate_targets_and_critical_edges() -> None:
    fn = function()
    entry, a, join = block(fn, "entry", FLAG), block(fn, "a"), block(fn, "join", INT)
    c = entry.arguments[0]
    condbr(entry, c, a, join, else_args=(lit(1),))
    condbr(a, c, join, join, then_args=(lit(2),), else_args=(lit(3),))
    ret(join)
    cfg = ControlFlowGraph(fn)
    assert cfg.successors(a) == [join]  # duplicates removed
    assert cfg.predecessors(join) == [entry, a]
    # entry → join is critical; so is a → join, reached by two distinct edges.
    assert cfg.critical_edges == [(entry, join), (a, join)]


def test_cfg_block_without_terminator_and_empty_function() -> None:
    fn = function()
    entry = block(fn, "entry")
    add(entry, lit(1), lit(2))
    cfg = ControlFlowGraph(fn)
    assert cfg.successors(entry) == []
    assert cfg.exits == [entry]
    empty = ControlFlowGraph(function("decl"))
    assert empty.blocks == [] and empty.exits == [] and empty.reachable == set()
    assert DominatorTree(function("decl")).idom(entry) is None
    assert list(PostDominatorTree(function("decl")).preorder()) == []


def test_unreachable_block() -> None:
    fn = diamond()
    bs = blocks(fn)
    dead = block(fn, "dead")
    br(dead, bs["join"], lit(5))
    cfg = fn.analysis(ControlFlowGraph)
    assert dead not in cfg.reachable and dead not in cfg.blocks
    assert cfg.successors(dead) == [bs["join"]]
    assert cfg.predecessors(bs["join"]) == [bs["left"], bs["right"]]
    dom = fn.analysis(DominatorTree)
    assert not dom.is_reachable(dead)
    assert dom.idom(dead) is None
    assert dom.idom(bs["join"]) is bs["entry"]
    assert dom.dominates(dead, dead)
    assert not dom.dominates(bs["entry"], dead)
    assert not dom.dominates(dead, bs["join"])
    assert dead not in list(dom.preorder())
    assert not fn.analysis(PostDominatorTree).post_dominates(bs["join"], dead)
    assert fn.analysis(LoopInfo).loop_for(dead) is None


def test_long_chain_does_not_recurse() -> None:
    fn = function()
    chain = [block(fn, f"b{i}") for i in range(5000)]
    for a, b in itertools.pairwise(chain):
        br(a, b)
    ret(chain[-1])
    dom = DominatorTree(fn)
    assert dom.idom(chain[-1]) is chain[-2]
    assert dom.dominates(chain[0], chain[-1])
    assert PostDominatorTree(fn).post_dominates(chain[-1], chain[0])


# ---------------------------------------------------------------- dominance


def test_diamond_dominance() -> None:
    fn = diamond()
    bs = blocks(fn)
    entry, left, right, join = bs["entry"], bs["left"], bs["right"], bs["join"]
    dom = DominatorTree(fn)
    assert dom.idom(entry) is None
    assert dom.idom(left) is entry and dom.idom(right) is entry
    assert dom.idom(join) is entry
    assert set(dom.children(entry)) == {left, right, join}
    assert dom.children(left) == []
    assert dom.dominates(entry, join) and dom.dominates(join, join)
    assert not dom.dominates(left, join)
    assert dom.properly_dominates(entry, left) and not dom.properly_dominates(left, left)
    assert dom.dominance_frontier(left) == [join]
    assert dom.dominance_frontier(right) == [join]
    assert dom.dominance_frontier(entry) == []
    assert dom.dominance_frontier(join) == []
    assert next(dom.preorder()) is entry and set(dom.preorder()) == set(fn.blocks)
    assert dom.common_dominator(left, right) is entry
    assert dom.depth(entry) == 0 and dom.depth(join) == 1


def test_loop_dominance_frontier() -> None:
    fn = gcd()
    bs = blocks(fn)
    dom = DominatorTree(fn)
    assert dom.idom(bs["cond"]) is bs["entry"]
    assert dom.idom(bs["body"]) is bs["cond"]
    assert dom.idom(bs["exit"]) is bs["cond"]
    assert dom.dominance_frontier(bs["body"]) == [bs["cond"]]
    assert dom.dominance_frontier(bs["cond"]) == [bs["cond"]]
    assert dom.dominance_frontier(bs["entry"]) == []


def test_entry_in_a_loop_is_in_its_own_frontier() -> None:
    fn = function()
    entry, body, exit_ = block(fn, "entry", FLAG), block(fn, "body"), block(fn, "exit")
    c = entry.arguments[0]
    condbr(entry, c, body, exit_)
    br(body, entry, c)
    ret(exit_)
    dom = DominatorTree(fn)
    assert dom.dominance_frontier(body) == [entry]
    assert dom.dominance_frontier(entry) == [entry]
    loop = LoopInfo(fn).loop_for(body)
    assert loop is not None and loop.header is entry
    assert loop.preheader is None and loop.latches == [body]


def test_irreducible_cycle_is_not_a_loop() -> None:
    fn = function()
    entry, a, b = block(fn, "entry", FLAG), block(fn, "a"), block(fn, "b")
    c = entry.arguments[0]
    condbr(entry, c, a, b)
    br(a, b)
    br(b, a)
    dom = DominatorTree(fn)
    assert dom.idom(a) is entry and dom.idom(b) is entry
    assert len(ControlFlowGraph(fn).back_edges) == 1  # a DFS retreating edge
    assert LoopInfo(fn).loops == []


def test_value_dominates() -> None:
    fn = diamond()
    bs = blocks(fn)
    one = bs["entry"].instructions[0]
    two = bs["left"].instructions[0]
    left_br, right_br = bs["left"].terminator, bs["right"].terminator
    ret_ = bs["join"].terminator
    assert left_br is not None and right_br is not None and ret_ is not None
    dom = fn.analysis(DominatorTree)
    # Same block: earlier dominates later, not itself nor earlier ones.
    assert dom.value_dominates(two, left_br)  # a branch argument is used at the terminator
    assert not dom.value_dominates(two, two)
    assert not dom.value_dominates(left_br, two)
    # Across blocks.
    assert dom.value_dominates(one, two) and dom.value_dominates(one, right_br)
    assert not dom.value_dominates(two, ret_)
    assert not dom.value_dominates(two, right_br)
    # Arguments.
    c = bs["entry"].arguments[0]
    j = bs["join"].arguments[0]
    assert dom.value_dominates(c, ret_) and dom.value_dominates(j, ret_)
    assert not dom.value_dominates(j, two)
    # Values that are available everywhere.
    g = GlobalVariable("g", INT)
    assert dom.value_dominates(lit(3), one)
    assert dom.value_dominates(fn, one) and dom.value_dominates(g, one)
    assert not dom.value_dominates(Value(INT, "unresolved"), one)


def test_value_dominates_in_a_large_block_is_fast() -> None:
    fn = function("big", (INT,), INT)
    entry = block(fn, "entry", INT)
    v: Value = entry.arguments[0]
    for _ in range(10_000):
        v = add(entry, v, lit(1))
    ret(entry, v)
    dom = DominatorTree(fn)
    insts = entry.instructions
    assert all(
        dom.value_dominates(op, inst) for inst in insts for op in inst.operands
    )  # 20,000 queries; quadratic position lookup would take seconds
    assert not dom.value_dominates(insts[-2], insts[0])


# ---------------------------------------------------------------- post-dominance


def test_post_dominators_with_several_returns() -> None:
    fn = function()
    names = ["entry", "a", "b", "c", "d", "r1", "r2", "early"]
    bs = {n: block(fn, n) for n in names}
    flag = bs["entry"].add_argument(Argument(FLAG, "flag"))
    condbr(bs["entry"], flag, bs["a"], bs["early"])
    condbr(bs["a"], flag, bs["b"], bs["c"])
    br(bs["b"], bs["d"])
    br(bs["c"], bs["d"])
    condbr(bs["d"], flag, bs["r1"], bs["r2"])
    ret(bs["r1"])
    ret(bs["r2"])
    ret(bs["early"])
    pdom = fn.analysis(PostDominatorTree)
    assert pdom.ipdom(bs["b"]) is bs["d"] and pdom.ipdom(bs["c"]) is bs["d"]
    assert pdom.ipdom(bs["a"]) is bs["d"]
    # Paths from `d` and `entry` end at different returns: only the virtual exit joins them.
    assert pdom.ipdom(bs["d"]) is None and pdom.ipdom(bs["entry"]) is None
    assert pdom.ipdom(bs["r1"]) is None
    assert set(pdom.roots) == {bs["entry"], bs["d"], bs["r1"], bs["r2"], bs["early"]}
    assert pdom.post_dominates(bs["d"], bs["a"]) and pdom.post_dominates(bs["d"], bs["b"])
    assert pdom.post_dominates(bs["r1"], bs["r1"])
    assert not pdom.post_dominates(bs["r1"], bs["d"])
    assert not pdom.post_dominates(bs["d"], bs["entry"])
    assert pdom.properly_post_dominates(bs["d"], bs["c"])
    assert set(pdom.children(bs["d"])) == {bs["a"], bs["b"], bs["c"]}
    assert pdom.post_dominance_frontier(bs["b"]) == [bs["a"]]
    assert pdom.post_dominance_frontier(bs["a"]) == [bs["entry"]]
    assert set(pdom.preorder()) == set(fn.blocks)


def test_post_dominators_join_endless_loops_to_the_exit() -> None:
    fn = function()
    names = ["entry", "spin", "spin_latch", "done"]
    entry, spin, latch, done = (block(fn, n) for n in names)
    c = entry.add_argument(Argument(FLAG, "c"))
    condbr(entry, c, spin, done)
    br(spin, latch)
    br(latch, spin)
    ret(done)
    pdom = PostDominatorTree(fn)
    assert all(pdom.is_reachable(b) for b in fn.blocks)
    # `entry` may never reach `done`, so `done` does not post-dominate it.
    assert pdom.ipdom(entry) is None and not pdom.post_dominates(done, entry)
    assert pdom.ipdom(spin) is latch and pdom.ipdom(latch) is None
    assert set(pdom.roots) == {entry, latch, done}


# ---------------------------------------------------------------- loops


def test_gcd_loop() -> None:
    fn = gcd()
    bs = blocks(fn)
    info = fn.analysis(LoopInfo)
    assert len(info.loops) == 1 and info.top_level == info.loops
    loop = info.loops[0]
    assert loop.header is bs["cond"]
    assert loop.blocks == {bs["cond"], bs["body"]}
    assert loop.latches == [bs["body"]]
    assert loop.exiting_blocks == [bs["cond"]]
    assert loop.exit_blocks == [bs["exit"]]
    assert loop.preheader is bs["entry"]
    assert loop.parent is None and loop.subloops == [] and loop.depth == 1
    assert info.loop_for(bs["body"]) is loop and info.loop_for(bs["exit"]) is None
    assert info.depth(bs["entry"]) == 0 and info.is_header(bs["cond"])


def test_nested_loops() -> None:
    fn = nested()
    bs = blocks(fn)
    info = LoopInfo(fn)
    outer, inner = info.loops  # outer first
    assert info.top_level == [outer]
    assert outer.header is bs["outer"] and inner.header is bs["inner"]
    assert outer.blocks == {
        bs[n] for n in ["outer", "inner_pre", "inner", "inner_body", "outer_latch"]
    }
    assert inner.blocks == {bs["inner"], bs["inner_body"]}
    assert inner.parent is outer and outer.subloops == [inner]
    assert outer.depth == 1 and inner.depth == 2
    assert outer.latches == [bs["outer_latch"]] and inner.latches == [bs["inner_body"]]
    assert outer.exiting_blocks == [bs["outer"]] and outer.exit_blocks == [bs["exit"]]
    assert inner.exiting_blocks == [bs["inner"]] and inner.exit_blocks == [bs["outer_latch"]]
    assert outer.preheader is bs["entry"] and inner.preheader is bs["inner_pre"]
    assert info.loop_for(bs["inner_body"]) is inner
    assert info.loop_for(bs["outer_latch"]) is outer
    assert info.loop_for(bs["inner_pre"]) is outer
    assert bs["inner"] in outer and bs["exit"] not in outer
    assert info.depth(bs["inner_body"]) == 2


def test_back_edges_to_one_header_make_one_loop() -> None:
    fn = function()
    names = ["entry", "head", "a", "b", "exit"]
    bs = {n: block(fn, n) for n in names}
    c = bs["entry"].add_argument(Argument(FLAG, "c"))
    condbr(bs["entry"], c, bs["head"], bs["exit"])  # two successors: no preheader
    condbr(bs["head"], c, bs["a"], bs["exit"])
    condbr(bs["a"], c, bs["head"], bs["b"])
    br(bs["b"], bs["head"])
    ret(bs["exit"])
    info = LoopInfo(fn)
    assert len(info.loops) == 1
    loop = info.loops[0]
    assert loop.blocks == {bs["head"], bs["a"], bs["b"]}
    assert loop.latches == [bs["a"], bs["b"]]
    assert loop.exiting_blocks == [bs["head"]]
    assert loop.preheader is None


def test_self_loop() -> None:
    fn = function()
    entry, spin, done = block(fn, "entry", FLAG), block(fn, "spin"), block(fn, "done")
    c = entry.arguments[0]
    br(entry, spin)
    condbr(spin, c, spin, done)
    ret(done)
    (loop,) = LoopInfo(fn).loops
    assert loop.blocks == {spin} and loop.latches == [spin] and loop.preheader is entry


# ---------------------------------------------------------------- use-def


def test_users() -> None:
    fn = diamond()
    bs = blocks(fn)
    one, two = bs["entry"].instructions[0], bs["left"].instructions[0]
    g = GlobalVariable("g", INT)
    store = bs["right"].insert(0, Instruction(STORE, {"value": one, "pointer": g}))
    ud = fn.analysis(UseDefInfo)
    assert ud.users(one) == [two, store, bs["right"].terminator]
    assert ud.uses_count(one) == 4  # twice in `two`, once stored, once as a branch argument
    assert ud.users(two) == [bs["left"].terminator]
    j = bs["join"].arguments[0]
    assert ud.users(j) == [bs["join"].terminator] and ud.is_used(j)
    assert ud.users(g) == [store]
    c = bs["entry"].arguments[0]
    assert ud.users(c) == [bs["entry"].terminator]
    ret_ = bs["join"].terminator
    assert ret_ is not None and not ud.is_used(ret_) and ud.users(ret_) == []
    assert ud.uses_count(lit(1)) == 0  # literals are not tracked
    assert fn.analysis(UseDefInfo) is ud


def test_users_of_nested_and_function_values() -> None:
    m = Module()
    callee = m.add_function(function("callee", (INT,), INT))
    fn = m.add_function(function("caller", (INT,), INT))
    entry = block(fn, "entry", INT)
    x = entry.arguments[0]
    call = emit(entry, APPLY, "y", INT, callee=callee, args=[x], sig=INT)
    ret(entry, call)
    ud = UseDefInfo(fn)
    assert ud.users(callee) == [call] and ud.users(x) == [call]
    assert ud.users(call) == [entry.terminator]


# ---------------------------------------------------------------- side effects


def call(b: Block, callee: Value, *args: Value) -> Instruction:
    return emit(b, APPLY, None, VOID, callee=callee, args=list(args), sig=VOID)


def leaf(m: Module, name: str, *body: OpDef) -> Function:
    fn = m.add_function(function(name))
    entry = block(fn, "entry")
    g = GlobalVariable(name + ".g", INT)
    for op in body:
        emit(entry, op, **({"value": lit(1), "pointer": g} if op is STORE else {}))
    ret(entry)
    return fn


def caller(m: Module, name: str, *callees: Value) -> Function:
    fn = m.add_function(function(name))
    entry = block(fn, "entry")
    for c in callees:
        call(entry, c)
    ret(entry)
    return fn


def test_effects_propagate_through_a_call_chain() -> None:
    m = Module()
    c = leaf(m, "C", STORE)
    b = caller(m, "B", c)
    a = caller(m, "A", b)
    t = leaf(m, "T", TRAP)
    p = leaf(m, "P")
    u = caller(m, "U", p, t)
    fx = m.analysis(SideEffects)
    for fn in (a, b, c):
        assert fx.of(fn) == FunctionEffects(may_write_memory=True)
    assert fx.of(p) == NO_EFFECTS and fx.of(p).is_pure
    assert fx.of(u) == FunctionEffects(may_write_memory=True, may_trap=True)
    call_b = a.entry.instructions[0]
    assert fx.instruction_has_effects(call_b) and not fx.is_pure_call(call_b)
    call_p = u.entry.instructions[0]
    assert fx.is_pure_call(call_p) and not fx.instruction_has_effects(call_p)
    store = c.entry.instructions[0]
    assert fx.instruction_has_effects(store) and not fx.is_pure_call(store)
    assert not fx.instruction_has_effects(c.entry.instructions[-1])  # a terminator


def test_mutual_recursion_of_pure_functions_terminates() -> None:
    m = Module()
    f = m.add_function(function("even"))
    g = m.add_function(function("odd"))
    for fn, other in ((f, g), (g, f)):
        entry = block(fn, "entry")
        call(entry, other)
        call(entry, fn)
        ret(entry)
    h = caller(m, "h", f)
    fx = SideEffects(m)
    assert fx.of(f).is_pure and fx.of(g).is_pure and fx.of(h).is_pure
    assert fx.is_pure_call(h.entry.instructions[0])


def test_recursion_spreads_effects_around_the_cycle() -> None:
    m = Module()
    f = m.add_function(function("f"))
    g = m.add_function(function("g"))
    s = leaf(m, "s", STORE)
    for fn, callees in ((f, (g,)), (g, (f, s))):
        entry = block(fn, "entry")
        for c in callees:
            call(entry, c)
        ret(entry)
    fx = SideEffects(m)
    assert fx.of(f).may_write_memory and fx.of(g).may_write_memory


def test_conservative_callees() -> None:
    m = Module()
    ext = m.add_function(Function("ext", FunctionType((), VOID), declaration="extern"))
    pure = leaf(m, "pure")
    grad = m.add_function(
        Function("grad", FunctionType((), VOID), declaration=DerivativeDecl("gradient", pure))
    )
    calls_ext = caller(m, "calls_ext", ext)
    calls_grad = caller(m, "calls_grad", grad)
    indirect = m.add_function(function("indirect", (FunctionType((), VOID),)))
    entry = block(indirect, "entry", FunctionType((), VOID))
    call(entry, entry.arguments[0])
    ret(entry)
    foreign = leaf(Module("other"), "foreign")
    calls_foreign = caller(m, "calls_foreign", foreign)
    fx = m.analysis(SideEffects)
    assert fx.of(ext) == ALL_EFFECTS and fx.of(calls_ext) == ALL_EFFECTS
    assert fx.of(grad) == NO_EFFECTS and fx.of(calls_grad) == NO_EFFECTS
    assert fx.is_pure_call(calls_grad.entry.instructions[0])
    assert fx.of(indirect) == ALL_EFFECTS
    assert fx.of(calls_foreign) == ALL_EFFECTS
    assert fx.of(foreign) == ALL_EFFECTS  # not in this module: unknown


def test_function_combinators_are_calls() -> None:
    m = Module()
    s = leaf(m, "s", STORE)
    fn = m.add_function(function("r", (INT,)))
    entry = block(fn, "entry", INT)
    red = emit(entry, REDUCE, "y", INT, x=entry.arguments[0], combinator=s)
    by_name = emit(entry, REDUCE, "z", INT, x=entry.arguments[0], combinator="add")
    ret(entry)
    fx = SideEffects(m)
    assert fx.instruction_has_effects(red) and not fx.instruction_has_effects(by_name)
    assert fx.of(fn).may_write_memory


# ---------------------------------------------------------------- caching


def test_analysis_cache_and_invalidation() -> None:
    fn = diamond()
    m = Module()
    m.add_function(fn)
    dom = fn.analysis(DominatorTree)
    assert fn.analysis(DominatorTree) is dom
    assert fn.analysis(ControlFlowGraph) is dom.cfg  # analyses share the cached CFG
    fx = m.analysis(SideEffects)
    assert m.analysis(SideEffects) is fx
    extra = fn.append_block(Block("extra"))
    new = fn.analysis(DominatorTree)
    assert new is not dom and not new.is_reachable(extra)
    assert m.analysis(SideEffects) is not fx


@pytest.mark.parametrize("make", [gcd, nested, diamond])
def test_dominator_tree_matches_the_definition(make: Any) -> None:
    """idom computed by CHK agrees with dominance by path removal."""
    fn = make()
    cfg = ControlFlowGraph(fn)
    dom = DominatorTree(fn)

    def reachable_without(removed: Block) -> set[Block]:
        seen, work = set(), [fn.entry]
        while work:
            b = work.pop()
            if b is removed or b in seen:
                continue
            seen.add(b)
            work.extend(cfg.successors(b))
        return seen

    for a in cfg.blocks:
        avoided = reachable_without(a)
        for b in cfg.blocks:
            assert dom.dominates(a, b) == (a is b or b not in avoided), (a, b)


def random_function(seed: int, size: int = 12) -> Function:
    """A random CFG: each block returns, branches or branches conditionally."""
    rng = random.Random(seed)
    fn = function(f"r{seed}")
    bs = [block(fn, f"b{i}") for i in range(size)]
    c = bs[0].add_argument(Argument(FLAG, "c"))
    for b in bs:
        kind = rng.random()
        if kind < 0.15:
            ret(b)
        elif kind < 0.5:
            br(b, rng.choice(bs))
        else:
            condbr(b, c, rng.choice(bs), rng.choice(bs))
    return fn


@pytest.mark.parametrize("seed", range(40))
def test_random_cfgs_match_the_definitions(seed: int) -> None:
    fn = random_function(seed)
    cfg = ControlFlowGraph(fn)
    dom = DominatorTree(fn)

    def reaches(start: Block, removed: Block | None) -> set[Block]:
        seen: set[Block] = set()
        work = [start]
        while work:
            b = work.pop()
            if b is removed or b in seen:
                continue
            seen.add(b)
            work.extend(cfg.successors(b))
        return seen

    assert cfg.reachable == reaches(fn.entry, None)
    for a in cfg.blocks:
        avoided = reaches(fn.entry, a)
        for b in cfg.blocks:
            assert dom.dominates(a, b) == (a is b or b not in avoided)
        frontier = {
            y
            for y in cfg.blocks
            if not dom.properly_dominates(a, y)
            and any(dom.dominates(a, p) for p in cfg.predecessors(y))
        }
        assert set(dom.dominance_frontier(a)) == frontier
    info = LoopInfo(fn)
    for loop in info.loops:
        assert all(dom.dominates(loop.header, b) for b in loop.blocks)
        assert loop.latches and all(b in loop for b in loop.latches)
        if loop.parent is not None:
            assert loop.blocks < loop.parent.blocks
    pdom = PostDominatorTree(fn)
    assert all(pdom.is_reachable(b) for b in cfg.blocks)
