"""Parse + verify + print of a generated module of N instructions.

    python benchmarks/parse_verify_print.py [--instructions 10000] [--repeat 5]

Reports the best time of each phase over the repeats. The target for
10,000 instructions is under one second for the three phases together.
"""

from __future__ import annotations

import argparse
import platform
import time

import dlvm.ir as ir

OPS = ["add", "multiply", "subtract", "maximum", "tanh", "exp", "dot", "select"]


def generate(n: int, per_function: int = 500) -> str:
    """A module of element-wise, dot and select chains over <64 x 64 x f32> tensors."""
    t = "<64 x 64 x f32>"
    lines = ['module "bench"', "stage raw", ""]
    count = 0
    f = 0
    while count < n:
        k = min(per_function, n - count)
        lines.append(f"func @f{f}: ({t}, {t}) -> {t} {{")
        lines.append(f"'entry(%x: {t}, %y: {t}):")
        prev, other = "%x", "%y"
        for i in range(k - 1):
            op = OPS[i % len(OPS)]
            name = f"%v{i}"
            if op in ("tanh", "exp"):
                body = f"{op} {prev}: {t}"
            elif op == "maximum":
                body = f"max {prev}: {t}, {other}: {t}"
            elif op == "select":
                lines.append(f"    %m{i} = greaterThan {prev}: {t}, 0.0: f32")
                count += 1
                body = f"select {prev}: {t}, {other}: {t} by %m{i}: <64 x 64 x bool>"
            else:
                body = f"{op} {prev}: {t}, {other}: {t}"
            lines.append(f"    {name} = {body}")
            other, prev = prev, name
        lines.append(f"    return {prev}: {t}")
        lines.append("}")
        lines.append("")
        count += k
        f += 1
    return "\n".join(lines)


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def python_speed() -> float:
    """Seconds for a fixed pure-Python loop: how fast this machine runs Python code, so that
    results recorded on different machines can be compared."""
    def loop() -> int:
        total = 0
        for i in range(2_000_000):
            total += i & 7
        return total

    return best(loop, 3)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    text = generate(args.instructions)
    t_parse, module = best(lambda: ir.parse(text, "bench.dl"), args.repeat)
    n = sum(len(b.instructions) for fn in module.functions for b in fn.blocks)
    t_verify, _ = best(lambda: ir.verify(module), args.repeat)
    t_print, printed = best(lambda: ir.print_module(module), args.repeat)
    assert printed == ir.print_module(ir.parse(printed)), "round trip failed"
    total = t_parse + t_verify + t_print
    print(f"machine: {platform.machine()} {platform.processor() or ''} "
          f"python {platform.python_version()}; 2M-iteration Python loop: "
          f"{python_speed() * 1e3:.0f} ms")
    print(f"instructions: {n}  text: {len(text) / 1e6:.2f} MB")
    print(f"parse   {t_parse * 1e3:8.1f} ms")
    print(f"verify  {t_verify * 1e3:8.1f} ms")
    print(f"print   {t_print * 1e3:8.1f} ms")
    print(f"total   {total * 1e3:8.1f} ms  ({'under' if total < 1 else 'OVER'} the 1 s target)")


if __name__ == "__main__":
    main()
