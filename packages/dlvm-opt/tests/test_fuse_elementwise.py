"""fuse-elementwise: regions, dot epilogues, trailing reductions, legality, idempotence."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.testing import mlp_cross_entropy
from dlvm.opt.testing import check_idempotent, check_preserves

HEADER = 'module "fuse"\nstage raw\n\n'


def run(text: str, pipeline: str = "fuse-elementwise") -> tuple[str, dict[str, int]]:
    module = ir.parse(HEADER + text)
    records = ir.run_passes(module, pipeline)
    return ir.print_module(module), dict(records[-1].stats)


def body(printed: str, name: str) -> str:
    """The printed function `@name`, from its attributes to its closing brace."""
    start = printed.index(f"func @{name}:")
    if printed.rfind("!kernel\n", 0, start) == start - len("!kernel\n"):
        start -= len("!kernel\n")
    return printed[start:printed.index("\n}", start) + 2]


DENSE = """
func @dense: (<2 x 4 x f32>, <4 x 3 x f32>, <1 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 4 x f32>, %w: <4 x 3 x f32>, %b: <1 x 3 x f32>):
    %z = dot %x: <2 x 4 x f32>, %w: <4 x 3 x f32>
    %t = transpose %w: <4 x 3 x f32>
    %a = add %z: <2 x 3 x f32>, %b: <1 x 3 x f32>
    %r = max %a: <2 x 3 x f32>, 0.0: f32
    return %r: <2 x 3 x f32>
}
"""


def test_a_dot_epilogue_is_one_kernel_called_right_after_the_dot() -> None:
    printed, stats = run(DENSE)
    assert body(printed, "dense") == """\
func @dense: (<2 x 4 x f32>, <4 x 3 x f32>, <1 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 4 x f32>, %w: <4 x 3 x f32>, %b: <1 x 3 x f32>):
    %z = dot %x: <2 x 4 x f32>, %w: <4 x 3 x f32>
    %r = apply @dense_kernel0(%z: <2 x 3 x f32>, %b: <1 x 3 x f32>) -> <2 x 3 x f32>
    %t = transpose %w: <4 x 3 x f32>
    return %r: <2 x 3 x f32>
}"""
    assert body(printed, "dense_kernel0") == """\
!kernel
func @dense_kernel0: (<2 x 3 x f32>, <1 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%z: <2 x 3 x f32>, %b: <1 x 3 x f32>):
    %a = add %z: <2 x 3 x f32>, %b: <1 x 3 x f32>
    %r = max %a: <2 x 3 x f32>, 0.0: f32
    return %r: <2 x 3 x f32>
}"""
    assert stats == {"kernels formed": 1, "instructions fused": 2}
    assert printed.index("func @dense:") < printed.index("func @dense_kernel0:")


SOFTMAX = """
func @lse: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x f32>) {
'entry(%x: <2 x 3 x f32>):
    %n = negate %x: <2 x 3 x f32>
    %e = exp %n: <2 x 3 x f32>
    %s = reduce %e: <2 x 3 x f32> by add init 0.0: f32 along 1
    %l = log %s: <2 x f32>
    %r = literal (%n: <2 x 3 x f32>, %l: <2 x f32>): (<2 x 3 x f32>, <2 x f32>)
    return %r: (<2 x 3 x f32>, <2 x f32>)
}
"""


def test_a_trailing_reduction_joins_and_several_outputs_make_a_tuple() -> None:
    printed, stats = run(SOFTMAX)
    assert body(printed, "lse") == """\
func @lse: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x f32>) {
'entry(%x: <2 x 3 x f32>):
    %0.0 = apply @lse_kernel0(%x: <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x f32>)
    %n = extract 0 from %0.0: (<2 x 3 x f32>, <2 x f32>)
    %s = extract 1 from %0.0: (<2 x 3 x f32>, <2 x f32>)
    %l = log %s: <2 x f32>
    %r = literal (%n: <2 x 3 x f32>, %l: <2 x f32>): (<2 x 3 x f32>, <2 x f32>)
    return %r: (<2 x 3 x f32>, <2 x f32>)
}"""
    assert body(printed, "lse_kernel0") == """\
!kernel
func @lse_kernel0: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x f32>) {
'entry(%x: <2 x 3 x f32>):
    %n = negate %x: <2 x 3 x f32>
    %e = exp %n: <2 x 3 x f32>
    %s = reduce %e: <2 x 3 x f32> by add init 0.0: f32 along 1
    return (%n: <2 x 3 x f32>, %s: <2 x f32>): (<2 x 3 x f32>, <2 x f32>)
}"""
    assert stats == {"kernels formed": 1, "instructions fused": 3}


KEPT = {
    # add depends on exp through the transpose: one call cannot run both before and after it
    "through-outside-code": """
func @f: (<2 x 2 x f32>) -> <2 x 2 x f32> {
'entry(%x: <2 x 2 x f32>):
    %a = exp %x: <2 x 2 x f32>
    %t = transpose %a: <2 x 2 x f32>
    %c = add %a: <2 x 2 x f32>, %t: <2 x 2 x f32>
    return %c: <2 x 2 x f32>
}
""",
    # the reduced value is also used elsewhere, so the reduction does not join; exp is alone
    "shared-reduction-operand": """
func @f: (<3 x f32>) -> (<3 x f32>, f32) {
'entry(%x: <3 x f32>):
    %e = exp %x: <3 x f32>
    %s = reduce %e: <3 x f32> by add init 0.0: f32
    %r = literal (%e: <3 x f32>, %s: f32): (<3 x f32>, f32)
    return %r: (<3 x f32>, f32)
}
""",
    # a reduction by a function is a call, not a loop nest
    "function-combinator": """
func @plus: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %c = add %a: f32, %b: f32
    return %c: f32
}

func @f: (<3 x f32>) -> f32 {
'entry(%x: <3 x f32>):
    %e = exp %x: <3 x f32>
    %s = reduce %e: <3 x f32> by @plus: (f32, f32) -> f32 init 0.0: f32
    return %s: f32
}
""",
    # element-wise instructions in different blocks are different regions
    "across-blocks": """
func @f: (f32) -> f32 {
'entry(%x: f32):
    %a = exp %x: f32
    branch 'next()
'next():
    %b = negate %a: f32
    return %b: f32
}
""",
    # the result of a reduction is an input, never a way into a region
    "after-a-reduction": """
func @f: (<3 x f32>) -> f32 {
'entry(%x: <3 x f32>):
    %s = reduce %x: <3 x f32> by add init 0.0: f32
    %l = log %s: f32
    return %l: f32
}
""",
    # an existing kernel is not fused again
    "kernel": """
!kernel
func @k: (f32) -> f32 {
'entry(%x: f32):
    %a = exp %x: f32
    %b = negate %a: f32
    return %b: f32
}
""",
}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_unfusable_code_is_left_alone(case: str) -> None:
    module = ir.parse(HEADER + KEPT[case])
    before = ir.print_module(module)
    records = ir.run_passes(module, "fuse-elementwise")
    assert ir.print_module(module) == before
    assert not records[0].changed and not records[0].stats


def test_min_size_controls_which_regions_are_outlined() -> None:
    printed, _ = run(DENSE, "fuse-elementwise{min_size=3}")
    assert "!kernel" not in printed
    printed, stats = run(KEPT["after-a-reduction"], "fuse-elementwise{min_size=1}")
    assert "%l = apply @f_kernel0(%s: f32) -> f32" in printed
    assert "%s = reduce" in body(printed, "f")  # a lone reduction is not a kernel
    assert stats == {"kernels formed": 1, "instructions fused": 1}


def test_failures_stay_on_their_side_of_effects() -> None:
    printed, _ = run("""
var @out: <3 x f32>

func @f: (i64, i64, <3 x f32>) -> i64 {
'entry(%a: i64, %b: i64, %v: <3 x f32>):
    %q = divide %a: i64, %b: i64
    store %v: <3 x f32> to @out: *<3 x f32>
    %r = add %q: i64, 1: i64
    return %r: i64
}
""")
    assert body(printed, "f") == """\
func @f: (i64, i64, <3 x f32>) -> i64 {
'entry(%a: i64, %b: i64, %v: <3 x f32>):
    %r = apply @f_kernel0(%a: i64, %b: i64) -> i64
    store %v: <3 x f32> to @out: *<3 x f32>
    return %r: i64
}"""


def test_regions_split_by_an_effect_between_two_failures() -> None:
    text = """
var @out: <3 x f32>

func @f: (i64, i64, <3 x f32>) -> i64 {
'entry(%a: i64, %b: i64, %v: <3 x f32>):
    %q = divide %a: i64, %b: i64
    %q2 = multiply %q: i64, 3: i64
    store %v: <3 x f32> to @out: *<3 x f32>
    %r = modulo %q2: i64, %b: i64
    %r2 = add %r: i64, 1: i64
    return %r2: i64
}
"""
    printed, stats = run(text)
    assert stats == {"kernels formed": 2, "instructions fused": 4}
    lines = body(printed, "f").splitlines()
    assert lines[2:5] == [
        "    %q2 = apply @f_kernel0(%a: i64, %b: i64) -> i64",
        "    store %v: <3 x f32> to @out: *<3 x f32>",
        "    %r2 = apply @f_kernel1(%q2: i64, %b: i64) -> i64",
    ]
    check_preserves(text, "fuse-elementwise")


def test_kernel_names_are_unique_in_the_module() -> None:
    printed, _ = run(DENSE.replace("@dense", "@f") + """
func @f_kernel0: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
""")
    assert "apply @f_kernel1(" in printed
    assert printed.count("func @f_kernel0:") == 1
    printed, _ = run(DENSE.replace("@dense", "@f") + "var @f_kernel0: f32\n")
    assert "apply @f_kernel1(" in printed


def test_uses_in_other_blocks_and_terminators_are_outputs() -> None:
    text = """
func @f: (<3 x f32>, f32) -> <3 x f32> {
'entry(%x: <3 x f32>, %y: f32):
    %a = exp %x: <3 x f32>
    %b = multiply %a: <3 x f32>, %y: f32
    %c = lessThan %y: f32, 1.0: f32
    conditional %c: bool then 'left(%b: <3 x f32>) else 'right()
'left(%p: <3 x f32>):
    %s = add %p: <3 x f32>, %a: <3 x f32>
    %t = tanh %s: <3 x f32>
    return %t: <3 x f32>
'right():
    return %a: <3 x f32>
}
"""
    printed, stats = run(text)
    assert "apply @f_kernel0(%x: <3 x f32>, %y: f32) -> (<3 x f32>, <3 x f32>)" in printed
    assert "%t = apply @f_kernel1(%p: <3 x f32>, %a: <3 x f32>) -> <3 x f32>" in printed
    assert stats == {"kernels formed": 2, "instructions fused": 4}
    check_preserves(text, "fuse-elementwise")
    check_idempotent(text, "fuse-elementwise")


# ---------------------------------------------------------------- whole programs

MLP = mlp_cross_entropy(header=False)

LOOP = """
func @power: (<3 x f32>, i64) -> <3 x f32> {
'entry(%x: <3 x f32>, %n: i64):
    branch 'loop(0: i64, %x: <3 x f32>)
'loop(%i: i64, %acc: <3 x f32>):
    %s = sin %acc: <3 x f32>
    %m = multiply %s: <3 x f32>, %x: <3 x f32>
    %a = add %m: <3 x f32>, 0.25: f32
    %i2 = add %i: i64, 1: i64
    %c = lessThan %i2: i64, %n: i64
    conditional %c: bool then 'loop(%i2: i64, %a: <3 x f32>) else 'exit()
'exit():
    %r = sqrt %acc: <3 x f32>
    return %r: <3 x f32>
}
"""

PROGRAMS = {"dense": DENSE, "softmax": SOFTMAX, "mlp": MLP, "loop": LOOP,
            **{f"kept-{k}": v for k, v in KEPT.items()}}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_keep_their_results_and_fusion_is_idempotent(name: str) -> None:
    text = HEADER + PROGRAMS[name]
    pipeline = "differentiation,fuse-elementwise" if "[gradient" in text else "fuse-elementwise"
    check_preserves(text, pipeline)
    check_idempotent(text, pipeline)


def test_the_mlp_gradient_fuses_its_epilogues_and_reductions() -> None:
    module = ir.parse(HEADER + MLP)
    records = ir.run_passes(module, "differentiation,fuse-elementwise,fuse-elementwise")
    fused, again = records[1], records[2]
    assert fused.stats["kernels formed"] >= 10 and not again.changed
    printed = ir.print_module(module)
    forward = body(printed, "loss").splitlines()
    # bias add + tanh: one kernel, called right after the dot (and the padShape it needs)
    assert forward[2:5] == [
        "    %z1 = dot %x: <_ x 4 x f64>, %w1: <4 x 5 x f64>",
        "    %bb1 = padShape %b1: <5 x f64> at 0",
        "    %h = apply @loss_kernel0(%z1: <_ x 5 x f64>, %bb1: <1 x 5 x f64>) -> <_ x 5 x f64>",
    ]
    # the shifted exponentials are summed in their kernel
    assert "    %s = reduce %e: <_ x 3 x f64> by add init 0.0: f64 along 1" in \
        body(printed, "loss_kernel1")
    kernels = [f for f in module.functions if "kernel" in f.attributes]
    assert all(len(k.blocks) == 1 for k in kernels)
    assert all(k.name.startswith(("loss_kernel", "dloss_kernel")) for k in kernels)


# ---------------------------------------------------------------- random programs

Op = tuple[int, int, int]
UNARY = ("negate", "tanh", "sin", "exp")
BINARY = ("add", "multiply", "subtract", "max", "divide")


class Shapes:
    """The four shapes a random program uses: a matrix, a row, a column and a scalar."""

    def __init__(self, dynamic: bool) -> None:
        n = "_" if dynamic else "2"
        self.t, self.row, self.col = f"<{n} x 3 x f32>", "<1 x 3 x f32>", f"<{n} x 1 x f32>"
        self.dims = {self.t: (2, 3), self.row: (1, 3), self.col: (2, 1)}

    def broadcast(self, a: str, b: str) -> str:
        if a == "f32" or b == "f32":
            return b if a == "f32" else a
        d = tuple(max(x, y) for x, y in zip(self.dims[a], self.dims[b], strict=True))
        return next(t for t, dt in self.dims.items() if dt == d)


def emit(ops: list[Op], pool: list[tuple[str, str]], lines: list[str], prefix: str,
         s: Shapes) -> None:
    """Append element-wise code mixed with dots, reductions, shape casts and calls."""
    for n, (kind, i, j) in enumerate(ops):
        name = f"%{prefix}{n}"
        x, y = pool[i % len(pool)], pool[j % len(pool)]
        mats = [v for v, t in pool if t == s.t]
        m = mats[i % len(mats)]
        if kind == 0:
            lines.append(f"{name} = {UNARY[j % len(UNARY)]} {x[0]}: {x[1]}")
            pool.append((name, x[1]))
        elif kind in (1, 2):
            op = BINARY[(i + j + kind) % len(BINARY)]
            lines.append(f"{name} = {op} {x[0]}: {x[1]}, {y[0]}: {y[1]}")
            pool.append((name, s.broadcast(x[1], y[1])))
        elif kind == 3:
            lines.append(f"{name} = dot {m}: {s.t}, %w: <3 x 3 x f32>")
            pool.append((name, s.t))
        elif kind == 4:
            axis, t = (1, s.col) if j % 2 else (0, s.row)
            reduced = s.t.replace(" x 3", "") if axis == 1 else "<3 x f32>"
            lines.append(f"{name}r = reduce {m}: {s.t} by add init 0.0: f32 along {axis}")
            lines.append(f"{name} = padShape {name}r: {reduced} at {axis}")
            pool.append((name, t))
        elif kind == 5:
            t = s.broadcast(x[1], y[1])
            lines.append(f"{name}m = greaterThan {x[0]}: {x[1]}, {y[0]}: {y[1]}")
            lines.append(f"{name} = select {x[0]}: {x[1]}, {y[0]}: {y[1]} by "
                         f"{name}m: {t.replace('f32', 'bool')}")
            pool.append((name, t))
        elif kind == 6:
            lines.append(f"{name} = apply @g({m}: {s.t}) -> {s.t}")
            pool.append((name, s.t))
        else:
            lines.append(f"{name} = reduce {m}: {s.t} by max init -inf: f32")
            pool.append((name, "f32"))


def random_program(entry: list[Op], left: list[Op], right: list[Op], join: list[Op],
                   dynamic: bool) -> str:
    """@f(%x, %y, %w): a diamond of random code returning two of its last values."""
    s = Shapes(dynamic)
    pool = [("%x", s.t), ("%y", "f32"), ("1.5", "f32"), ("0.5", s.row)]
    lines: list[str] = []
    emit(entry, pool, lines, "e", s)
    lines += ["%c = lessThan %y: f32, 1.0: f32", "conditional %c: bool then 'l() else 'r()"]
    for side, ops in (("l", left), ("r", right)):
        side_pool, side_lines = list(pool), [f"'{side}():"]
        emit(ops, side_pool, side_lines, side, s)
        out = [v for v, t in side_pool if t == s.t][-1]
        lines += [*side_lines, f"branch 'join({out}: {s.t})"]
    lines.append(f"'join(%j: {s.t}):")
    pool.append(("%j", s.t))
    emit(join, pool, lines, "j", s)
    (a, ta), (b, tb) = [v for v in pool if v[1] == s.t][-1], pool[-1]
    lines += [f"%out = literal ({a}: {ta}, {b}: {tb}): ({ta}, {tb})",
              f"return %out: ({ta}, {tb})"]
    return HEADER + f"""func @g: ({s.t}) -> {s.t} {{
'entry(%v: {s.t}):
    %r = negate %v: {s.t}
    return %r: {s.t}
}}

func @f: ({s.t}, f32, <3 x 3 x f32>) -> ({ta}, {tb}) {{
'entry(%x: {s.t}, %y: f32, %w: <3 x 3 x f32>):
""" + "\n".join(line if line.startswith("'") else "    " + line for line in lines) + "\n}\n"


ops = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 30), st.integers(0, 30)),
               max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=ops, left=ops, right=ops, join=ops, dynamic=st.booleans())
def test_random_programs_keep_their_results(entry: list[Op], left: list[Op], right: list[Op],
                                            join: list[Op], dynamic: bool) -> None:
    text = random_program(entry, left, right, join, dynamic)
    check_preserves(text, "fuse-elementwise", trials=2, dynamic=2)
    check_idempotent(text, "fuse-elementwise")


SHARED_STEP = """
func @update: (<4 x 3 x f32>, <4 x 3 x f32>, <3 x f32>, <3 x f32>, f32) -> (<4 x 3 x f32>, <3 x f32>) {
'entry(%w: <4 x 3 x f32>, %gw: <4 x 3 x f32>, %b: <3 x f32>, %gb: <3 x f32>, %t: f32):
    %t1 = add %t: f32, 1.0: f32
    %c = exp %t1: f32
    %sw = multiply %gw: <4 x 3 x f32>, %c: f32
    %w2 = subtract %w: <4 x 3 x f32>, %sw: <4 x 3 x f32>
    %sb = multiply %gb: <3 x f32>, %c: f32
    %b2 = subtract %b: <3 x f32>, %sb: <3 x f32>
    %r = literal (%w2: <4 x 3 x f32>, %b2: <3 x f32>): (<4 x 3 x f32>, <3 x f32>)
    return %r: (<4 x 3 x f32>, <3 x f32>)
}
"""


def test_a_shared_scalar_does_not_chain_tensors_of_other_shapes_into_one_kernel() -> None:
    """Updates of differently shaped tensors by one step size (an optimizer's) are separate
    kernels: one region would have no common iteration space."""
    printed, _ = run(SHARED_STEP)
    kernels = [body(printed, f"update_kernel{k}") for k in range(printed.count("!kernel"))]
    assert len(kernels) >= 2
    for kernel in kernels:
        shapes = {s for s in ("<4 x 3 x f32>", "<3 x f32>") if "subtract %" in kernel
                  and s in kernel.split("->")[1]}
        assert len(shapes) <= 1, kernel
    check_preserves(HEADER + SHARED_STEP, "fuse-elementwise")
