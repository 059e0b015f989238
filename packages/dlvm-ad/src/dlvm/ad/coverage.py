"""Which instructions differentiate, in which mode, and what limits each rule has.

    python -m dlvm.ad.coverage                              # every installed instruction
    python -m dlvm.ad.coverage --first-party > docs/ad-coverage.md

The table is computed from the instruction and rule tables after loading the plugins, so
a plugin's instructions and rules show up too (noted with their distribution); the notes
below are the limits of the built-in rules, kept next to the code that has them.
"""

from __future__ import annotations

import argparse

from dlvm.ir.opdef import OPS, ensure_instructions
from dlvm.ir.plugin import FIRST_PARTY, registry

from .rules import ADJOINTS, NONDIFFERENTIABLE, TANGENTS, load_builtin_rules

# What the driver itself handles, so an instruction needs no rule.
BY_THE_DRIVER = {
    "branch": "control flow: the reverse CFG is built from the forward one",
    "conditional": "control flow: the branch taken is recorded on the tape",
    "branchEnum": "control flow: the case taken is recorded on the tape",
    "return": "control flow: each `return` seeds the reverse sweep",
    "createStack": "the tape's own instructions; differentiated again for higher orders",
    "destroyStack": "the tape's own instructions; differentiated again for higher orders",
    "push": "a pushed value's adjoint is popped from an adjoint stack",
    "pop": "a popped value's adjoint is pushed onto an adjoint stack",
}

# Why an instruction has no derivative, or where its rule stops.
NOTES = {
    "equal": "boolean result", "notEqual": "boolean result", "lessThan": "boolean result",
    "lessThanOrEqual": "boolean result", "greaterThan": "boolean result",
    "greaterThanOrEqual": "boolean result", "and": "boolean", "or": "boolean", "not": "boolean",
    "bitAnd": "integers", "bitOr": "integers", "bitXor": "integers", "bitNot": "integers",
    "shiftLeft": "integers", "shiftRight": "integers",
    "truncateDivide": "piecewise constant: zero derivative almost everywhere",
    "floorDivide": "piecewise constant: zero derivative almost everywhere",
    "modulo": "floats: x − y·trunc(x/y), differentiable between the jumps",
    "rank": "an integer describing the shape", "shape": "an integer describing the shape",
    "unitCount": "an integer describing the shape", "random": "a fresh draw, not a function "
    "of its operands' values in the differentiable sense",
    "digamma": "rule present but raises: its derivative, trigamma, has no instruction",
    "round": "zero derivative almost everywhere", "rint": "zero derivative almost everywhere",
    "ceil": "zero derivative almost everywhere", "floor": "zero derivative almost everywhere",
    "sign": "zero derivative almost everywhere",
    "min": "at a tie the adjoint goes to the first operand",
    "max": "at a tie the adjoint goes to the first operand",
    "reduce": "by add, multiply, max, min (ties split evenly); a function combinator has none",
    "scan": "by add only",
    "reduceWindow": "by add, max and min; the window shape must be static",
    "convolve": "static kernel shape; a dynamic spatial dimension only with stride 1",
    "bitCast": "only when the data type is kept (a reshape); reinterpreting bits has none",
    "dataTypeCast": "between float types; to or from a non-float type there is no derivative",
    "apply": "callees' derivatives generated on demand, recursion included; not through a "
    "function pointer",
    "builtin": "a host function: opaque to the compiler",
    "store": "storing a value that depends on the differentiated arguments is an error",
    "load": "loads read constants (memory is not differentiated)",
}
MEMORY_NOTE = "memory is not differentiated: values it holds are constants"


def rows(first_party_only: bool = False) -> list[tuple[str, str, str, str, str]]:
    """(category, opcode, adjoint, tangent, note) for every instruction, a plugin's included
    unless `first_party_only` (DLVM's own distributions only)."""
    load_builtin_rules()
    ensure_instructions()  # plugins define their instructions (and rules) when loaded
    providers = {e.name: e.plugin.distribution for e in registry().instructions()}
    out = []
    for name, op in OPS.items():
        provider = providers.get(name, op.provider)
        if provider not in FIRST_PARTY and first_party_only:
            continue
        if name in BY_THE_DRIVER:
            adjoint = tangent = "driver"
            note = BY_THE_DRIVER[name]
        elif name in NONDIFFERENTIABLE:
            adjoint = tangent = "constant"
            note = NOTES.get(name, "")
        else:
            adjoint = "yes" if name in ADJOINTS else "no"
            tangent = "yes" if name in TANGENTS else "no"
            note = NOTES.get(name, MEMORY_NOTE if op.category == "memory" else "")
        if provider not in FIRST_PARTY:
            where = provider if provider not in ("", "?") else "outside any plugin"
            note = "; ".join(filter(None, [f"from {where}", note]))
        out.append((op.category, name, adjoint, tangent, note))
    return sorted(out, key=lambda r: (r[0], r[1]))


def markdown(first_party_only: bool = False) -> str:
    lines = [
        "# Differentiation coverage",
        "",
        "Generated by `python -m dlvm.ad.coverage` from the rule tables of `dlvm.ad.rules`.",
        "*adjoint* is reverse mode (`[gradient …]`), *tangent* forward mode (`[tangent …]`);",
        "*constant*: the result carries no derivative; *driver*: handled by the",
        "differentiation driver, not by a rule. Every rule is checked against central finite",
        "differences in float64 (`dlvm.ad.testing`).",
        "",
        "| category | instruction | adjoint | tangent | notes |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {c} | `{n}` | {a} | {t} | {note} |"
              for c, n, a, t, note in rows(first_party_only)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dlvm.ad.coverage",
                                     description="Print the differentiation coverage table.")
    parser.add_argument("--first-party", action="store_true",
                        help="only DLVM's own instructions (what docs/ad-coverage.md shows)")
    print(markdown(parser.parse_args(argv).first_party), end="")


if __name__ == "__main__":
    main()
