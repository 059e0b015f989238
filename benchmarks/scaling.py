"""How the parser, the verifier, the printer, every pass and O1–O3 scale with module size.

    python benchmarks/scaling.py [--sizes 1000,10000,100000] [--json out.json] [--limit 300]

For each size N it generates modules of about N instructions, of six shapes:

- `straight`: one long function of element-wise operations, `dot`s (some in chains that
  `matrix-chain-reordering` reorders), normalizing reductions, transposes, compares and
  `select`s, with the redundancies the passes remove (`x + 0`, duplicates, foldable and splat
  literals, a few dead values). Operands are mostly the latest values (long chains) or the
  latest unused one, sometimes an older one (fan-out), now and then one from anywhere before;
- `gradient`: `straight` with a gradient declaration of its function, for `differentiation`;
- `adjoint`: the same for a function of N/3 instructions, whose gradient (the forward and the
  reverse sweep) has about N: `differentiation,O3`, the pipeline a training step goes through;
- `calls`: helpers (some with a branch), a chain of functions calling them and each other,
  and one long function calling a helper every few instructions (inlining splits its block);
- `loops`: one function of consecutive loops, each with a branch inside (block arguments,
  loop-invariant code, blocks to merge, loops without a preheader);
- `aliases`: N chained type aliases (`type $A1 = $A0`, …) and a function of N/10
  instructions whose uses are written with them.

It times parse, verify and print of each module, each pass alone on a fresh copy of each
module it applies to (without verification), and O1, O2 and O3 as `run_passes` runs them
(verifying after each pass that changed a module of up to 20,000 instructions, once at the
end for a larger one); up to 10,000 instructions, the fastest
of three runs. The table gives the seconds at each size and the growth exponent between
consecutive sizes: log(t2/t1) / log(n2/n1) over the instruction counts, about 1 for linear
time and 2 for quadratic. A measurement over `--limit` seconds is abandoned (shown as
`>limit`). The machine (CPU, cores, memory, Python and numpy versions, and the time of a fixed
Python loop, to compare machines) is printed and written to the JSON file with the times, wall
clock and CPU.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import itertools
import json
import math
import os
import platform
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir.core import (
    Argument,
    Block,
    DerivativeDecl,
    Function,
    GlobalVariable,
    Instruction,
    Module,
    Value,
    copy_field,
)

T = "<32 x 64 x f32>"
W = "<64 x 64 x f32>"
M1 = "<64 x 16 x f32>"
M2 = "<16 x 64 x f32>"
C = "<32 x 16 x f32>"
R = "<32 x f32>"
P = "<32 x 1 x f32>"
B = "<32 x 64 x bool>"
TT = "<64 x 32 x f32>"

PASSES = ["dce", "cse", "constant-fold", "algebra-simplify", "literal-broadcast-promotion",
          "matrix-chain-reordering", "inline", "cfg-simplify", "cfg-canonicalize", "licm",
          "fuse-elementwise"]
PIPELINES = ["O1", "O2", "O3"]


# ---------------------------------------------------------------- generated modules


class Emitter:
    """Lines of one function body, with a pool of recent values of type T to draw from."""

    def __init__(self, rng: random.Random, pool: list[str]) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.count = 0
        self.pool = list(pool)
        self.serial = 0
        self.unused: dict[str, None] = {}  # pooled values no instruction uses yet
        self.last_binary: tuple[str, str, str] | None = None

    def fresh(self) -> str:
        self.serial += 1
        return f"%v{self.serial}"

    def emit(self, text: str, name: str | None = None, pooled: bool = False) -> str:
        name = name or self.fresh()
        self.lines.append(f"    {name} = {text}")
        self.count += 1
        if pooled:
            self.pool.append(name)
            self.unused[name] = None
        return name

    def pick(self) -> str:
        """Mostly the latest value (chains) or the latest one not used yet, else a recent or
        an older one (fan-out), now and then one from anywhere before (a long-range use)."""
        r, pool = self.rng.random(), self.pool
        if r < 0.45:
            v = pool[-1]
        elif r < 0.75 and self.unused:
            v = next(reversed(self.unused))
        elif r < 0.92:
            v = pool[-1 - self.rng.randrange(min(8, len(pool)))]
        elif r < 0.99:
            v = pool[-1 - self.rng.randrange(min(300, len(pool)))]
        else:
            v = pool[self.rng.randrange(len(pool))]
        self.unused.pop(v, None)
        return v

    def step(self, weights: dict[str, int]) -> None:
        kind = self.rng.choices(list(weights), list(weights.values()))[0]
        getattr(self, "op_" + kind.replace("-", "_"))()

    def op_binary(self) -> None:
        op = self.rng.choice(["add", "subtract", "multiply", "max", "min"])
        a, b = self.pick(), self.pick()
        self.last_binary = (op, a, b)
        self.emit(f"{op} {a}: {T}, {b}: {T}", pooled=True)

    def op_unary(self) -> None:
        op = self.rng.choice(["tanh", "negate", "square", "sin", "exp"])
        self.emit(f"{op} {self.pick()}: {T}", pooled=True)

    def op_scale(self) -> None:
        self.emit(f"multiply {self.pick()}: {T}, {self.rng.choice(['0.5', '0.1', '2.0'])}: f32",
                  pooled=True)

    def op_dot(self) -> None:
        self.emit(f"dot {self.pick()}: {T}, %w{self.rng.randrange(2)}: {W}", pooled=True)

    def op_chain(self) -> None:
        """((a·w)·m1)·m2, which is cheaper as a·(w·(m1·m2))."""
        d1 = self.emit(f"dot {self.pick()}: {T}, %w0: {W}")
        d2 = self.emit(f"dot {d1}: {T}, %m1: {M1}")
        self.emit(f"dot {d2}: {C}, %m2: {M2}", pooled=True)

    def op_norm(self) -> None:
        """a − broadcast(row sums of a)."""
        a = self.pick()
        r = self.emit(f"reduce {a}: {T} by add init 0.0: f32 along 1")
        p = self.emit(f"padShape {r}: {R} at 1")
        self.emit(f"subtract {a}: {T}, {p}: {P}", pooled=True)

    def op_gram(self) -> None:
        """a · (bᵀ · c)."""
        t = self.emit(f"transpose {self.pick()}: {T}")
        g = self.emit(f"dot {t}: {TT}, {self.pick()}: {T}")
        self.emit(f"dot {self.pick()}: {T}, {g}: {W}", pooled=True)

    def op_select(self) -> None:
        m = self.emit(f"greaterThan {self.pick()}: {T}, 0.0: f32")
        self.emit(f"select {self.pick()}: {T}, {self.pick()}: {T} by {m}: {B}", pooled=True)

    def op_identity(self) -> None:
        if self.rng.random() < 0.5:
            self.emit(f"add {self.pick()}: {T}, 0.0: f32", pooled=True)
        else:
            self.emit(f"multiply 1.0: f32, {self.pick()}: {T}", pooled=True)

    def op_duplicate(self) -> None:
        if self.last_binary is None:
            return self.op_binary()
        op, a, b = self.last_binary
        self.emit(f"{op} {a}: {T}, {b}: {T}", pooled=True)

    def op_fold(self) -> None:
        k = self.emit("add 1.5: f32, 2.0: f32")
        self.emit(f"multiply {self.pick()}: {T}, {k}: f32", pooled=True)

    def op_splat(self) -> None:
        s = self.emit(f"literal 0.5: {T}")
        self.emit(f"multiply {self.pick()}: {T}, {s}: {T}", pooled=True)


STRAIGHT_MIX = {"binary": 30, "unary": 14, "scale": 6, "dot": 6, "chain": 2, "norm": 4,
                "gram": 2, "select": 4, "identity": 3, "duplicate": 3, "fold": 2, "splat": 2}


def straight(n: int, seed: int = 0, gradient: bool = False) -> str:
    """One function of about `n` instructions ending in a full reduction to f32."""
    sig = f"({T}, {T}, {W}, {W}, {M1}, {M2})"
    e = Emitter(random.Random(seed), ["%x", "%y"])
    while e.count < n - 2:
        e.step(STRAIGHT_MIX)
    s = e.emit(f"reduce {e.pool[-1]}: {T} by add init 0.0: f32")
    lines = ['module "straight"', "stage raw", "",
             f"func @f: {sig} -> f32 {{",
             f"'entry(%x: {T}, %y: {T}, %w0: {W}, %w1: {W}, %m1: {M1}, %m2: {M2}):",
             *e.lines, f"    return {s}: f32", "}", ""]
    if gradient:
        lines += ["[gradient @f wrt 0, 2]", f"func @df: {sig} -> ({T}, {W})", ""]
    return "\n".join(lines)


HELPERS = 32


def calls(n: int, seed: int = 0) -> str:
    """Helpers of a few instructions, some with a branch (inlined: in place, or by splitting
    the caller's block); a chain of functions that each call two helpers and the previous
    function (too large to inline once the helpers are in); and a `@main` of a quarter of
    the instructions that calls a helper every few instructions."""
    rng = random.Random(seed)
    out = ['module "calls"', "stage raw", ""]
    count = 0
    for j in range(HELPERS):
        e = Emitter(rng, ["%a", "%b"])
        for _ in range(5):
            e.step({"binary": 3, "unary": 2, "scale": 1})
        out += [f"func @h{j}: ({T}, {T}) -> {T} {{", f"'entry(%a: {T}, %b: {T}):", *e.lines,
                f"    return {e.pool[-1]}: {T}", "}", ""]
        out += [f"func @c{j}: ({T}, {T}) -> {T} {{", f"'entry(%a: {T}, %b: {T}):",
                f"    %s = reduce %a: {T} by add init 0.0: f32",
                f"    %p = greaterThan %s: f32, {j}.0: f32",
                "    conditional %p: bool then 'pos() else 'neg()",
                "'pos():", f"    %u = multiply %a: {T}, %b: {T}", f"    return %u: {T}",
                "'neg():", f"    %v = subtract %a: {T}, %b: {T}", f"    return %v: {T}",
                "}", ""]
        count += e.count + 1 + 7
    i = 0
    while count < n * 3 // 4:
        e = Emitter(rng, ["%x"])
        e.emit(f"dot %x: {T}, %w: {W}", pooled=True)
        for k in range(3):
            for _ in range(5):
                e.step({"binary": 4, "unary": 2, "scale": 1, "identity": 1, "duplicate": 1})
            if k < 2:
                h = rng.randrange(HELPERS)
                e.emit(f"apply @h{h}({e.pick()}: {T}, {e.pick()}: {T}) -> {T}", pooled=True)
            elif i > 0:
                e.emit(f"apply @g{i - 1}({e.pick()}: {T}, %w: {W}) -> {T}", pooled=True)
        out += [f"func @g{i}: ({T}, {W}) -> {T} {{", f"'entry(%x: {T}, %w: {W}):", *e.lines,
                f"    return {e.pool[-1]}: {T}", "}", ""]
        count += e.count + 1
        i += 1
    e = Emitter(rng, ["%x"])
    while count + e.count < n - 1:
        for _ in range(8):
            e.step({"binary": 4, "unary": 2, "scale": 1, "dot": 1, "identity": 1})
        helper = rng.choice(["h", "c"]) + str(rng.randrange(HELPERS))
        e.emit(f"apply @{helper}({e.pick()}: {T}, {e.pick()}: {T}) -> {T}", pooled=True)
    out += [f"func @main: ({T}, {W}) -> {T} {{", f"'entry(%x: {T}, %w0: {W}):",
            f"    %w1 = literal 0.5: {W}", *e.lines, f"    return {e.pool[-1]}: {T}", "}", ""]
    return "\n".join(out)


def loops(n: int) -> str:
    """One function of consecutive counted loops with a diamond inside. Even loops exit
    through two straight-line blocks (merged by cfg-simplify); odd ones branch straight into
    the next loop's header, which then has no preheader (cfg-canonicalize, licm)."""
    lines = ['module "loops"', "stage raw", "",
             f"func @loops: ({T}, {W}, i64) -> {T} {{",
             f"'entry(%x: {T}, %w: {W}, %n: i64):",
             f"    branch 'h0(%x: {T}, 0: i64)"]
    count, k = 1, 0
    while True:
        last = count >= n - 20
        lines += [
            f"'h{k}(%acc{k}: {T}, %i{k}: i64):",
            f"    %ws{k} = multiply %w: {W}, 0.5: f32",
            f"    %d{k} = dot %acc{k}: {T}, %ws{k}: {W}",
            f"    %e{k} = tanh %d{k}: {T}",
            f"    %c{k} = lessThan %i{k}: i64, 2: i64",
            f"    conditional %c{k}: bool then 'a{k}() else 'b{k}()",
            f"'a{k}():",
            f"    %t{k} = add %e{k}: {T}, %acc{k}: {T}",
            f"    branch 'j{k}(%t{k}: {T})",
            f"'b{k}():",
            f"    %u{k} = subtract %e{k}: {T}, %acc{k}: {T}",
            f"    %uu{k} = multiply %u{k}: {T}, 0.25: f32",
            f"    branch 'j{k}(%uu{k}: {T})",
            f"'j{k}(%r{k}: {T}):",
            f"    %one{k} = add 0: i64, 1: i64",
            f"    %inc{k} = add %i{k}: i64, %one{k}: i64",
            f"    %done{k} = greaterThanOrEqual %inc{k}: i64, %n: i64",
        ]
        count += 14
        if last:
            lines += [f"    conditional %done{k}: bool then 'x{k}() else 'h{k}(%r{k}: {T}, %inc{k}: i64)",
                      f"'x{k}():", f"    return %r{k}: {T}", "}", ""]
            return "\n".join(lines)
        if k % 2 == 0:
            lines += [
                f"    conditional %done{k}: bool then 'x{k}() else 'h{k}(%r{k}: {T}, %inc{k}: i64)",
                f"'x{k}():",
                f"    %s{k} = multiply %r{k}: {T}, 2.0: f32",
                f"    branch 'y{k}(%s{k}: {T})",
                f"'y{k}(%z{k}: {T}):",
                f"    branch 'h{k + 1}(%z{k}: {T}, 0: i64)",
            ]
            count += 3
        else:
            lines += [f"    conditional %done{k}: bool then 'h{k + 1}(%r{k}: {T}, 0: i64) "
                      f"else 'h{k}(%r{k}: {T}, %inc{k}: i64)"]
        k += 1


def aliases(n: int, seed: int = 0) -> str:
    """`type $A0 = T`, `type $Ai = $A(i-1)` for i < n, and a function of n/10 element-wise
    instructions whose operands are written with aliases from all along the chain."""
    rng = random.Random(seed)
    out = ['module "aliases"', "stage raw", "", f"type $A0 = {T}"]
    out += [f"type $A{i} = $A{i - 1}" for i in range(1, n)]
    out += ["", f"func @f: ($A{n - 1}, $A0) -> $A{n // 2} {{", f"'entry(%x: $A{n - 1}, %y: $A0):"]
    pool = ["%x", "%y"]
    for i in range(max(n // 10, 1)):
        a, b = pool[-1], pool[-1 - rng.randrange(min(8, len(pool)))]
        op = rng.choice(["add", "multiply", "subtract"])
        out.append(f"    %v{i} = {op} {a}: $A{rng.randrange(n)}, {b}: $A{rng.randrange(n)}")
        pool.append(f"%v{i}")
    out += [f"    return {pool[-1]}: $A{rng.randrange(n)}", "}", ""]
    return "\n".join(out)


SHAPES: dict[str, tuple[Callable[[int], str], list[str]]] = {
    "straight": (straight, [p for p in PASSES if p not in ("inline",)] + PIPELINES),
    "gradient": (lambda n: straight(n, gradient=True), ["differentiation"]),
    "adjoint": (lambda n: straight(n // 3, gradient=True), ["differentiation,O3"]),
    "calls": (calls, PASSES + PIPELINES),
    "loops": (loops, PASSES + PIPELINES),
    "aliases": (aliases, ["cse", "algebra-simplify", "O3"]),
}


# ---------------------------------------------------------------- copying a module


def copy_module(m: Module) -> Module:
    """A copy of `m` sharing its types and declarations (which no pass changes): fresh
    functions, blocks and instructions, so a pass can run on it as on the original. Faster
    than `ir.clone` (printing and parsing), which matters at 100,000 instructions."""
    new = Module(m.name, m.stage)
    for decl in m.type_decls.values():
        new.add_type(decl)
    values: dict[Value, Value] = {}
    for g in m.globals:
        values[g] = copy = GlobalVariable(g.name, g.value_type)
        copy.location = g.location
        new.add_global(copy)
    for fn in m.functions:
        values[fn] = copy = Function(fn.name, fn.type_, attributes=tuple(fn.attributes),
                                     declaration=fn.declaration)
        copy.location = fn.location
        new.add_function(copy)
    blocks: dict[Block, Block] = {}
    pairs: list[tuple[Instruction, Instruction]] = []
    for fn in m.functions:
        copy = values[fn]
        assert isinstance(copy, Function)
        if isinstance(fn.declaration, DerivativeDecl):
            d = fn.declaration
            copy.declaration = DerivativeDecl(d.kind, values.get(d.of, d.of), d.from_index,
                                              d.wrt, d.keeping, d.seedable, d.location)
        for block in fn.blocks:
            b = Block(block.name, [Argument(a.type, a.name) for a in block.arguments])
            b.location = block.location
            values.update(zip(block.arguments, b.arguments, strict=True))
            blocks[block] = b
            copy.append_block(b)
            for inst in block.instructions:
                values[inst] = c = Instruction(inst.op, {}, inst.type, inst.name, inst.location)
                pairs.append((inst, c))
                b.instructions.append(c)
                c.block = b
    for inst, c in pairs:  # once every value exists: uses may come before definitions
        c.fields = {k: copy_field(v, values, blocks) for k, v in inst.fields.items()}
    return new


# ---------------------------------------------------------------- timing


class Timeout(BaseException):
    """Raised in the measured code when time is up; not an `Exception`, so that no handler
    of the code under test takes it for one of its own errors."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `Timeout` in the measured code after `seconds` (0: no limit)."""
    def expire(signum: int, frame: Any) -> None:
        raise Timeout

    if seconds <= 0:
        yield
        return
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def timed(fn: Callable[[], Any], limit: float, repeat: int = 1) -> tuple[float, float] | None:
    """The wall-clock and CPU seconds of the fastest of `repeat` calls of `fn()`, each after a
    garbage collection, or None when one ran past `limit`."""
    best: tuple[float, float] | None = None
    for _ in range(repeat):
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        try:
            with time_limit(limit):
                fn()
        except Timeout:
            return None
        took = (time.perf_counter() - start, time.process_time() - cpu)
        best = took if best is None or took < best else best
    return best


def instruction_count(m: Module) -> int:
    return sum(len(b.instructions) for fn in m.functions for b in fn.blocks)


def measure(shape: str, n: int, limit: float, repeat: int,
            report: Callable[[dict[str, Any]], None]) -> None:
    """Time parse, verify and print of the module of `shape` and size `n`, then each of its
    passes and pipelines on a fresh copy of it (`repeat` times, keeping the fastest)."""
    make, phases = SHAPES[shape]
    text = make(n)
    parsed: list[Module] = []
    took = timed(lambda: parsed.append(ir.parse(text, f"{shape}.dl")), limit, repeat)
    if took is None:
        report({"shape": shape, "size": n, "phase": "parse", "seconds": None, "cpu": None})
        return
    module = parsed[-1]
    parsed.clear()
    row = {"shape": shape, "size": n, "instructions": instruction_count(module)}

    def emit(phase: str, took: tuple[float, float] | None) -> None:
        report({**row, "phase": phase, "seconds": took and took[0], "cpu": took and took[1]})

    emit("parse", took)
    emit("verify", timed(lambda: ir.verify(module), limit, repeat))
    emit("print", timed(lambda: ir.print_module(module), limit, repeat))
    for phase in phases:
        pipeline = phase in PIPELINES or "," in phase  # verified as by default
        best: tuple[float, float] | None = None
        for _ in range(repeat):
            run = functools.partial(ir.run_passes, copy_module(module), phase,
                                    verify_each=None if pipeline else False)
            took = timed(run, limit)
            del run
            if took is None:
                best = None
                break
            best = took if best is None or took < best else best
        emit(phase, best)


# ---------------------------------------------------------------- the machine


def python_speed() -> float:
    """Seconds for a fixed pure-Python loop (best of 3): how fast this machine runs Python."""
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i & 7
        best = min(best, time.perf_counter() - start)
    return best


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    memory = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
            memory = f"{kib / 2**20:.0f} GiB"
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": memory,
            "system": f"{platform.system()} {platform.machine()}",
            "python": platform.python_version(), "numpy": np.__version__,
            "python_loop_ms": round(python_speed() * 1e3)}


def announce_machine() -> dict[str, Any]:
    """`machine()`, printed as the first line of a benchmark's output."""
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}, {info['system']}, "
          f"Python {info['python']}, numpy {info['numpy']}; "
          f"2M-iteration Python loop: {info['python_loop_ms']} ms", flush=True)
    return info


def reporter(rows: list[dict[str, Any]], limit: float, phase_width: int
             ) -> Callable[[dict[str, Any]], None]:
    """Keeps each measured row and prints it to stderr as it comes (`>LIMIT` past the limit)."""
    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        s = row["seconds"]
        print(f"  {row['shape']:<9} {row['size']:>7} {row['phase']:<{phase_width}} "
              f"{'>' + format(limit, 'g') if s is None else format(s, '.3f')} s",
              file=sys.stderr, flush=True)
    return report


# ---------------------------------------------------------------- the table


def exponent(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["seconds"] is None or b["seconds"] is None or a["seconds"] <= 0:
        return "–"
    na, nb = a.get("instructions") or a["size"], b.get("instructions") or b["size"]
    return f"{math.log(b['seconds'] / a['seconds']) / math.log(nb / na):.2f}"


def table(rows: list[dict[str, Any]], sizes: list[int], limit: float) -> str:
    """One line per shape and phase: seconds at each size, growth exponents between them."""
    head = ["shape", "phase", *(f"{s:,}" for s in sizes),
            *(f"exp {a // 1000}k→{b // 1000}k" for a, b in itertools.pairwise(sizes))]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["shape"], r["phase"]) for r in rows))
    for shape, phase in keys:
        by_size = {r["size"]: r for r in rows if (r["shape"], r["phase"]) == (shape, phase)}
        cells = []
        for s in sizes:
            r = by_size.get(s)
            cells.append("" if r is None else f">{limit:g}" if r["seconds"] is None
                         else f"{r['seconds']:.3f}")
        exps = [exponent(by_size[a], by_size[b]) if a in by_size and b in by_size else ""
                for a, b in itertools.pairwise(sizes)]
        lines.append("| " + " | ".join([shape, phase, *cells, *exps]) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="comma-separated module sizes in instructions")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    ap.add_argument("--json", help="write the machine and every measurement to this file")
    ap.add_argument("--limit", type=float, default=300,
                    help="abandon a measurement after this many seconds (0: never)")
    ap.add_argument("--repeat", type=int, default=0,
                    help="keep the fastest of this many runs (default: 3 up to 10,000 "
                         "instructions, else 1)")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    shapes = args.shapes.split(",")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    info = announce_machine()
    rows: list[dict[str, Any]] = []
    report = reporter(rows, args.limit, 28)

    for shape in shapes:  # load every pass and warm the caches before timing
        measure(shape, 200, 0, 1, lambda row: None)
    start = time.perf_counter()
    for n in sizes:
        repeat = args.repeat or (3 if n <= 10_000 else 1)
        for shape in shapes:
            measure(shape, n, args.limit, repeat, report)
    print(table(rows, sizes, args.limit))
    print(f"total {time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
                       "machine": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
