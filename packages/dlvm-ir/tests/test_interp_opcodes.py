"""Every registered instruction is run by at least one interpreter test.

The modules are the string constants of the `test_interp_*.py` files (read with
`ast`, so nothing is executed); a new instruction without an interpreter test
makes `test_every_instruction_has_an_interpreter_test` fail.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import dlvm.ir as ir

HERE = Path(__file__).parent


def _module_texts(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and "func @" in node.value and "'entry" in node.value]


@functools.cache
def interp_test_modules() -> dict[str, list[str]]:
    files = sorted(HERE.glob("test_interp_*.py"))
    return {f.name: _module_texts(f) for f in files}


@functools.cache
def opcodes_used() -> frozenset[str]:
    used: set[str] = set()
    for texts in interp_test_modules().values():
        for text in texts:
            module = ir.parse(text)
            for fn in module.functions:
                used.update(inst.opcode for inst in fn.instructions())
    return frozenset(used)


def test_the_test_modules_are_found() -> None:
    modules = interp_test_modules()
    assert {"test_interp_elementwise.py", "test_interp_tensor.py", "test_interp_aggregate.py",
            "test_interp_control.py", "test_interp_memory.py"} <= set(modules)
    assert all(modules[name] for name in modules if name != Path(__file__).name)


@pytest.mark.parametrize("name", sorted(n for n, op in ir.OPS.items() if op.provider == "dlvm-ir"))
def test_every_instruction_has_an_interpreter_test(name: str) -> None:
    assert name in opcodes_used(), f"no test_interp_*.py module runs '{name}'"


def test_every_instruction_has_interpreter_semantics() -> None:
    missing = sorted(name for name, op in ir.OPS.items()
                     if op.evaluate is None and op.provider == "dlvm-ir")
    assert missing == []
