"""Hypothesis strategies for random, well-formed DLVM programs with loops and branches.

    from dlvm.ir.strategies import loop_programs
    @given(loop_programs())
    def test_my_pass(text): check_preserves(text, "my-pass")

`branch_and_loop` builds a fixed skeleton from chains of steps that a test draws itself.

Needs `hypothesis` (the `testing` extra of dlvm-ir); the library itself never imports this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import strategies as st

UNARY = ["tanh", "sin"]
BINARY = ["add", "subtract", "multiply", "max"]


def statements(draw: st.DrawFn, values: list[str], prefix: str) -> tuple[list[str], str]:
    """0–3 random instructions (f64 arithmetic, or an integer division by %k converted to
    f64, which may fail and so must not be hoisted past a guard); the lines and the last
    f64 value. New values are appended to `values`."""
    lines = []
    for k in range(draw(st.integers(0, 3))):
        name = f"%{prefix}{k}"
        kind = draw(st.sampled_from(["unary", "binary", "binary", "intdiv"]))
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            lines.append(f"    {name} = {op} {draw(st.sampled_from(values))}: f64")
        elif kind == "binary":
            op = draw(st.sampled_from(BINARY))
            a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            lines.append(f"    {name} = {op} {a}: f64, {b}: f64")
        else:
            num = draw(st.sampled_from(["%n", "7: i64", "%i"] if "%s" in values else ["%n"]))
            num = num if ":" in num else f"{num}: i64"
            lines.append(f"    {name}q = divide {num}, %k: i64")
            lines.append(f"    {name} = dataTypeCast {name}q: i64 to f64")
        values.append(name)
    return lines, values[-1]


@st.composite
def loop_programs(draw: st.DrawFn) -> str:
    """`@f: (f64, f64, i64, i64) -> f64`, an outer loop counted to %n, optionally with an
    early return before it, a second back edge (`continue`), an inner loop (whose trip count
    may be 0) with a `break` out of both loops, and several returns after it."""
    early, cont, inner, brk, returns = (draw(st.booleans()) for _ in range(5))
    values = ["%x", "%y"]
    pre, _ = statements(draw, values, "p")
    out = ["func @f: (f64, f64, i64, i64) -> f64 {",
           "'entry(%x: f64, %y: f64, %n: i64, %k: i64):", *pre]
    if early:
        out += ["    %e = lessThan %x: f64, %y: f64",
                "    conditional %e: bool then 'early() else 'oh(0: i64, %x: f64)"]
    else:
        out += ["    branch 'oh(0: i64, %x: f64)"]
    outer = [*values, "%s"]
    oh, _ = statements(draw, outer, "h")
    out += ["'oh(%i: i64, %s: f64):", *oh, "    %ci = lessThan %i: i64, %n: i64",
            "    conditional %ci: bool then 'ob() else 'done(%s: f64)", "'ob():"]
    ob, t = statements(draw, outer, "b")
    out += [*ob, "    %i1 = add %i: i64, 1: i64"]
    if cont:
        out += ["    %c2 = lessThan %s: f64, %y: f64",
                f"    conditional %c2: bool then 'oh(%i1: i64, {t}: f64) else 'ob2()", "'ob2():"]
    if inner:
        out += [f"    branch 'ih(0: i64, {t}: f64)", "'ih(%j: i64, %u: f64):"]
        ih, _ = statements(draw, [*outer, "%u"], "q")
        out += [*ih, "    %cj = lessThan %j: i64, %i: i64",
                "    conditional %cj: bool then 'ib() else 'ix()", "'ib():"]
        ib, u2 = statements(draw, [*outer, "%u"], "r")
        out += [*ib, "    %j1 = add %j: i64, 1: i64"]
        if brk:
            out += [f"    %b = greaterThan {u2}: f64, 2.5: f64",
                    f"    conditional %b: bool then 'done({u2}: f64) else 'il()", "'il():"]
        out += [f"    branch 'ih(%j1: i64, {u2}: f64)", "'ix():",
                "    branch 'oh(%i1: i64, %u: f64)"]
    else:
        out += [f"    branch 'oh(%i1: i64, {t}: f64)"]
    out += ["'done(%r: f64):"]
    if returns:
        out += ["    %z = greaterThan %r: f64, %y: f64",
                "    conditional %z: bool then 'r1() else 'r2()", "'r1():", "    return %r: f64",
                "'r2():", "    %nr = negate %r: f64", "    return %nr: f64"]
    else:
        out += ["    return %r: f64"]
    if early:
        out += ["'early():", "    return %y: f64"]
    return "\n".join([*out, "}", ""])


def chain(steps: Mapping[str, Sequence[str]], prefix: str, start: str, names: list[str],
          vtype: str) -> tuple[list[str], str]:
    """The lines of `names`' steps applied one after another to `%start`; the last value.
    A step is lines with `{o}` (its result, also a prefix for its temporaries), `{c}` (the
    current value) and `{V}` (the value type)."""
    lines, cur = [], start
    for n, name in enumerate(names):
        out = f"{prefix}{n}"
        lines += ["    " + line.format(o=out, c=cur, V=vtype) for line in steps[name]]
        cur = out
    return lines, cur


def branch_and_loop(steps: Mapping[str, Sequence[str]], then: Sequence[str],
                    other: Sequence[str], body: Sequence[str], after: Sequence[str],
                    vtype: str = "<3 x f64>", declarations: Sequence[str] = ()) -> str:
    """`@f: (V, f64, i64) -> V`: chains on %x in either branch of `%k > 0`, a loop running a
    chain %n times (0 included), and a chain after it; `declarations` are appended."""
    v = vtype
    a, ra = chain(steps, "a", "x", list(then), v)
    b, rb = chain(steps, "b", "x", list(other), v)
    loop, rl = chain(steps, "l", "y", list(body), v)
    tail, rt = chain(steps, "t", "r", list(after), v)
    return "\n".join([
        'module "random"', "stage raw", "",
        f"func @f: ({v}, f64, i64) -> {v} {{",
        f"'entry(%x: {v}, %k: f64, %n: i64):",
        "    %c = greaterThan %k: f64, 0.0: f64",
        "    conditional %c: bool then 'a() else 'b()",
        "'a():", *a, f"    branch 'loop(0: i64, %{ra}: {v})",
        "'b():", *b, f"    branch 'loop(0: i64, %{rb}: {v})",
        f"'loop(%i: i64, %y: {v}):",
        "    %more = lessThan %i: i64, %n: i64",
        f"    conditional %more: bool then 'body() else 'done(%y: {v})",
        "'body():", *loop, "    %i2 = add %i: i64, 1: i64",
        f"    branch 'loop(%i2: i64, %{rl}: {v})",
        f"'done(%r: {v}):", *tail, f"    return %{rt}: {v}",
        "}", "", *declarations,
    ])
