"""How a plugin gives its instruction native code on the LLVM targets.

An instruction without a lowering rule still runs on `llvm-cpu`: native code calls back
into Python, which evaluates its numpy semantics (`fallback.py`), and on `nvptx` it runs on
the host. Two decorators give it native code instead:

- `scalar_rule(opcode)`, for an element-wise instruction: the LLVM value of one element of
  the result from its operands' elements. It joins the table `SCALAR` that every kernel is
  built from, so the instruction fuses with its neighbours into one loop on the CPU and runs
  inside the kernels of the GPU target.
- `lowering_rule(opcode)`, for any instruction, on `llvm-cpu`: the whole instruction,
  written against the function being lowered (`FunctionLowering`).

DLVM's own rules cannot be replaced; a plugin's rule can (the last registration counts),
so importing a rule module twice is harmless.

A plugin names the module that holds its rules where it defines the instruction,
`define(..., llvm_rules="my_plugin.lowering")`: the LLVM targets import it when they first
compile code that uses the instruction, so a `dlvm` command that compiles nothing never
loads LLVM for it.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

from dlvm.ir import OPS, Module

from .function import Lowerer
from .lowering import LOWER
from .regions import lower_single
from .scalar import SCALAR, Rule

BUILTIN_SCALAR = frozenset(SCALAR)
BUILTIN_LOWER = frozenset(LOWER)  # `lowering` has imported every module of DLVM's rules


def scalar_rule(*opcodes: str) -> Callable[[Rule], Rule]:
    """Register `rule(e, inst, args) -> ll.Value` as the scalar body of the element-wise
    instructions `opcodes` (see `ScalarEmitter` for what `e` offers)."""
    check_opcodes("scalar rule", opcodes, BUILTIN_SCALAR)
    for op in opcodes:
        opdef = OPS.get(op)
        if opdef is not None and "elementwise" not in opdef.traits:
            raise ValueError(f"a scalar rule for '{op}': the instruction is not element-wise "
                            "(give it a lowering_rule instead)")

    def register(rule: Rule) -> Rule:
        for op in opcodes:
            SCALAR[op] = rule
            LOWER[op] = lower_single  # outside a fused kernel: a loop of its own
        return rule

    return register


def lowering_rule(*opcodes: str) -> Callable[[Lowerer], Lowerer]:
    """Register `rule(fl, inst) -> ll.Value | None` as the lowering of the instructions
    `opcodes` on `llvm-cpu` (the value of the result; None for an instruction without one)."""
    check_opcodes("lowering rule", opcodes, BUILTIN_LOWER)

    def register(rule: Lowerer) -> Lowerer:
        for op in opcodes:
            LOWER[op] = rule
        return rule

    return register


def check_opcodes(what: str, opcodes: tuple[str, ...], builtin: frozenset[str]) -> None:
    if not opcodes:
        raise ValueError(f"a {what} needs the opcodes it lowers")
    for op in opcodes:
        if op in builtin:
            raise ValueError(f"a {what} for '{op}': DLVM's own rule cannot be replaced")


RULES_MODULE = "llvm_rules"  # the `define` keyword naming the module of an instruction's rules


def opcodes_of(module: Module) -> set[str]:
    return {inst.opcode for fn in module.functions for block in fn.blocks
            for inst in block.instructions}


def load_plugin_rules(module: Module) -> None:
    """Import the rule modules that the plugin instructions `module` uses name (each once:
    Python keeps imported modules)."""
    for op in sorted(opcodes_of(module) - BUILTIN_LOWER):
        opdef = OPS.get(op)
        where = opdef.extra.get(RULES_MODULE) if opdef is not None else None
        if isinstance(where, str) and where not in sys.modules:
            importlib.import_module(where)


def plugin_rules_key(module: Module) -> str:
    """What code compiled for `module` depends on among plugins' rules, for the code cache:
    for each opcode it uses that DLVM does not lower itself, where its rules are written (a
    hash of their source), or that it has none (it calls back into Python)."""
    opcodes = sorted(opcodes_of(module) - BUILTIN_LOWER)
    parts = [f"{op}={rule_source(SCALAR.get(op))}/{rule_source(LOWER.get(op))}"
             for op in opcodes]
    return ";".join(parts)


def rule_source(rule: Any) -> str:
    if rule is None:
        return "none"
    if rule is lower_single:
        return "kernel"
    return f"{rule.__module__}.{rule.__qualname__}@{source_hash(rule.__module__)}"


@cache
def source_hash(module_name: str) -> str:
    """A hash of a module's source (an edited rule must not load code built from the old)."""
    path = getattr(sys.modules.get(module_name), "__file__", None)
    try:
        with open(path or "", "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return "unknown"
