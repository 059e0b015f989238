"""matrix-chain-reordering: the optimal-order DP, the original's six-matrix chain, chains it
must leave alone, results preserved, idempotence."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.opt.testing import check_idempotent, check_preserves
from dlvm.opt.transforms.matrix_chain import optimal_order, tree_cost

PASS = "matrix-chain-reordering"

# The original's matrix_multiplication_reordering.dl: M1, M2 are arguments, M3…M6 splats
# defined in earlier blocks; the last block multiplies left to right.
SIX = """module "mmr"
stage raw

func @chain: (<30 x 35 x f64>, <35 x 15 x f64>) -> <30 x 25 x f64> {
'entry(%m1: <30 x 35 x f64>, %m2: <35 x 15 x f64>):
    %m3 = literal 1: <15 x 5 x f64>
    branch 'b1()
'b1():
    %m4 = literal 1: <5 x 10 x f64>
    branch 'b2()
'b2():
    %m5 = literal 1: <10 x 20 x f64>
    %m6 = literal 1: <20 x 25 x f64>
    branch 'b3()
'b3():
    %3.0 = dot %m1: <30 x 35 x f64>, %m2: <35 x 15 x f64>
    %a = dot %3.0: <30 x 15 x f64>, %m3: <15 x 5 x f64>
    %b = dot %a: <30 x 5 x f64>, %m4: <5 x 10 x f64>
    %c = dot %b: <30 x 10 x f64>, %m5: <10 x 20 x f64>
    %d = dot %c: <30 x 20 x f64>, %m6: <20 x 25 x f64>
    return %d: <30 x 25 x f64>
}
"""


def test_the_dynamic_program_on_the_textbook_chain() -> None:
    # CLRS 15.2: 30×35, 35×15, 15×5, 5×10, 10×20, 20×25 → 15125 scalar multiplications
    dims = [30, 35, 15, 5, 10, 20, 25]
    cost, tree = optimal_order(dims)
    assert cost == 15125
    assert tree == ((0, (1, 2)), ((3, 4), 5))
    assert tree_cost(tree, dims)[0] == cost


def all_trees(i: int, j: int) -> list:
    if i == j:
        return [i]
    return [(a, b) for k in range(i, j)
            for a, b in itertools.product(all_trees(i, k), all_trees(k + 1, j))]


@settings(max_examples=40, deadline=None)
@given(dims=st.lists(st.integers(1, 40), min_size=2, max_size=7))
def test_the_dynamic_program_finds_the_cheapest_tree(dims: list[int]) -> None:
    cost, tree = optimal_order(dims)
    n = len(dims) - 1
    assert cost == min(tree_cost(t, dims)[0] for t in all_trees(0, n - 1))
    assert tree_cost(tree, dims)[0] == cost


def test_the_six_matrix_chain() -> None:
    module = ir.parse(SIX)
    (record,) = ir.run_passes(module, PASS)
    last = module["chain"].blocks[-1]
    assert [ir.print_instruction(i).strip() for i in last.instructions] == [
        "%3.0 = dot %m2: <35 x 15 x f64>, %m3: <15 x 5 x f64>",
        "%3.1 = dot %m1: <30 x 35 x f64>, %3.0: <35 x 5 x f64>",
        "%3.2 = dot %m4: <5 x 10 x f64>, %m5: <10 x 20 x f64>",
        "%3.3 = dot %3.2: <5 x 20 x f64>, %m6: <20 x 25 x f64>",
        "%d = dot %3.1: <30 x 5 x f64>, %3.3: <5 x 25 x f64>",
        "return %d: <30 x 25 x f64>",
    ]
    assert record.changed
    assert record.stats["flops before"] == 2 * 40500
    assert record.stats["flops after"] == 2 * 15125
    assert record.stats["chains reordered"] == 1
    check_preserves(SIX, PASS, rtol=1e-9)
    check_idempotent(SIX, PASS)


def program(body: list[str], args: str, result: str) -> str:
    types = ", ".join(a.split(": ", 1)[1] for a in args.split("; "))
    return (f"func @f: ({types}) -> {result} {{\n'entry({', '.join(args.split('; '))}):\n"
            + "".join(f"    {b}\n" for b in body) + f"    return %r: {result}\n}}\n")


def unchanged(text: str) -> None:
    module = ir.parse(text)
    before = ir.print_module(module)
    (record,) = ir.run_passes(module, PASS)
    assert not record.changed
    assert ir.print_module(module) == before


def test_a_dynamic_dimension_skips_the_chain() -> None:
    unchanged(program(["%ab = dot %a: <_ x 100 x f32>, %b: <100 x 5 x f32>",
                       "%r = dot %ab: <_ x 5 x f32>, %c: <5 x 50 x f32>"],
                      "%a: <_ x 100 x f32>; %b: <100 x 5 x f32>; %c: <5 x 50 x f32>",
                      "<_ x 50 x f32>"))


def test_a_product_used_twice_ends_the_chain() -> None:
    # (a·b) is also returned, so it is a leaf: the chain is (ab)·c alone, two matrices
    unchanged(program(["%ab = dot %a: <10 x 100 x f32>, %b: <100 x 5 x f32>",
                       "%abc = dot %ab: <10 x 5 x f32>, %c: <5 x 50 x f32>",
                       "%r = literal (%ab: <10 x 5 x f32>, %abc: <10 x 50 x f32>): "
                       "(<10 x 5 x f32>, <10 x 50 x f32>)"],
                      "%a: <10 x 100 x f32>; %b: <100 x 5 x f32>; %c: <5 x 50 x f32>",
                      "(<10 x 5 x f32>, <10 x 50 x f32>)"))


def test_an_optimal_chain_and_batched_products_are_left_alone() -> None:
    unchanged(program(["%ab = dot %a: <10 x 100 x f32>, %b: <100 x 5 x f32>",
                       "%r = dot %ab: <10 x 5 x f32>, %c: <5 x 50 x f32>"],
                      "%a: <10 x 100 x f32>; %b: <100 x 5 x f32>; %c: <5 x 50 x f32>",
                      "<10 x 50 x f32>"))
    unchanged(program(["%ab = dot %a: <2 x 3 x 4 x f32>, %b: <2 x 4 x 5 x f32>",
                       "%r = dot %ab: <2 x 3 x 5 x f32>, %c: <2 x 5 x 1 x f32>"],
                      "%a: <2 x 3 x 4 x f32>; %b: <2 x 4 x 5 x f32>; %c: <2 x 5 x 1 x f32>",
                      "<2 x 3 x 1 x f32>"))


def test_a_right_leaning_chain_in_another_block_is_not_merged() -> None:
    """The inner product in the entry block stays a leaf of the chain in the next block."""
    text = """func @f: (<50 x 5 x f64>, <5 x 100 x f64>, <100 x 10 x f64>) -> <50 x 10 x f64> {
'entry(%a: <50 x 5 x f64>, %b: <5 x 100 x f64>, %c: <100 x 10 x f64>):
    %ab = dot %a: <50 x 5 x f64>, %b: <5 x 100 x f64>
    branch 'next()
'next():
    %r = dot %ab: <50 x 100 x f64>, %c: <100 x 10 x f64>
    return %r: <50 x 10 x f64>
}
"""
    unchanged(text)


def test_integer_chains_are_reordered_exactly() -> None:
    text = program(["%ab = dot %a: <2 x 30 x i64>, %b: <30 x 40 x i64>",
                    "%r = dot %ab: <2 x 40 x i64>, %c: <40 x 1 x i64>"],
                   "%a: <2 x 30 x i64>; %b: <30 x 40 x i64>; %c: <40 x 1 x i64>",
                   "<2 x 1 x i64>")
    _, after = check_preserves(text, PASS, rtol=0, atol=0)
    assert "%0.0 = dot %b: <30 x 40 x i64>, %c: <40 x 1 x i64>" in ir.print_module(after)


def test_after_differentiation() -> None:
    """A three-layer linear network's gradient: its products stay correct when reordered."""
    text = """module "net"
stage raw

func @net: (<8 x 64 x f64>, <64 x 2 x f64>, <2 x 64 x f64>, <64 x 3 x f64>) -> f64 {
'entry(%x: <8 x 64 x f64>, %w1: <64 x 2 x f64>, %w2: <2 x 64 x f64>, %w3: <64 x 3 x f64>):
    %h1 = dot %x: <8 x 64 x f64>, %w1: <64 x 2 x f64>
    %h2 = dot %h1: <8 x 2 x f64>, %w2: <2 x 64 x f64>
    %h3 = dot %h2: <8 x 64 x f64>, %w3: <64 x 3 x f64>
    %s = reduce %h3: <8 x 3 x f64> by add init 0.0: f64
    return %s: f64
}

[gradient @net wrt 0 seedable]
func @dnet: (<8 x 64 x f64>, <64 x 2 x f64>, <2 x 64 x f64>, <64 x 3 x f64>, f64) -> (<8 x 64 x f64>)
"""
    _, after = check_preserves(text, PASS, rtol=1e-9)
    assert "%h3 = dot %0.0: <8 x 2 x f64>, %0.1: <2 x 3 x f64>" in ir.print_module(after)
    _, after = check_preserves(text, f"differentiation,{PASS}", rtol=1e-9)
    check_idempotent(ir.print_module(after), PASS)


@st.composite
def chains(draw: st.DrawFn) -> str:
    """A random product tree over 3–6 random static matrices, in a branch."""
    n = draw(st.integers(3, 6))
    dims = draw(st.lists(st.integers(1, 9), min_size=n + 1, max_size=n + 1))
    tree = draw(st.sampled_from(all_trees(0, n - 1)))
    lines: list[str] = []

    def emit(t: object) -> tuple[str, int, int]:
        if isinstance(t, int):
            return f"%m{t}", dims[t], dims[t + 1]
        (a, ar, ac), (b, _, bc) = emit(t[0]), emit(t[1])  # type: ignore[index]
        name = f"%p{len(lines)}"
        lines.append(f"    {name} = dot {a}: <{ar} x {ac} x f64>, {b}: <{ac} x {bc} x f64>")
        return name, ar, bc

    top, rows, cols = emit(tree)
    args = ", ".join(f"%m{i}: <{dims[i]} x {dims[i + 1]} x f64>" for i in range(n))
    types = ", ".join(f"<{dims[i]} x {dims[i + 1]} x f64>" for i in range(n))
    r = f"<{rows} x {cols} x f64>"
    return "\n".join([
        f"func @f: ({types}, f64) -> {r} {{", f"'entry({args}, %k: f64):",
        "    %c = greaterThan %k: f64, 1.0: f64",
        f"    conditional %c: bool then 'body() else 'exit(zero: {r})",
        "'body():", *lines, f"    branch 'exit({top}: {r})",
        f"'exit(%r: {r}):", f"    return %r: {r}", "}", ""])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=chains(), seed=st.integers(0, 2**16))
def test_random_chains(text: str, seed: int) -> None:
    _, after = check_preserves(text, PASS, seed=seed, trials=2, rtol=1e-9)
    check_idempotent(text, PASS)
    dots = [i for i in after["f"].instructions() if i.opcode == "dot"]
    assert len(dots) == text.count(" = dot ")
    flops = sum(int(np.prod([*i.lhs.type.shape, i.rhs.type.shape[1]])) for i in dots)
    before = sum(int(np.prod([*i.lhs.type.shape, i.rhs.type.shape[1]]))
                 for i in ir.parse(text)["f"].instructions() if i.opcode == "dot")
    assert flops <= before
