"""The language reference, docs/ir-reference.md, stays in step with the library.

- Every one of dlvm-ir's instructions has its own section, headed ### `name`.
- Every ```dlvm block that is a complete module parses, verifies and
  round-trips through the canonical printer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dlvm.ir as ir


def _repo_root() -> Path:
    for folder in Path(__file__).resolve().parents:
        if (folder / "docs").is_dir():
            return folder
    raise RuntimeError("no folder with docs/ above " + __file__)


REFERENCE = _repo_root() / "docs" / "ir-reference.md"
TEXT = REFERENCE.read_text(encoding="utf-8")

HEADING = re.compile(r"^### `([^`]+)`\s*$", re.MULTILINE)
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _blocks(tag: str) -> list[tuple[int, str]]:
    """(line number, text) of every fenced block with this tag."""
    return [
        (TEXT.count("\n", 0, m.start()) + 1, m.group(2))
        for m in FENCE.finditer(TEXT)
        if m.group(1) == tag
    ]


MODULES = [(line, text) for line, text in _blocks("dlvm") if text.lstrip().startswith("module")]


def test_every_instruction_has_a_section() -> None:
    headings = set(HEADING.findall(TEXT))
    missing = sorted({n for n, op in ir.OPS.items() if op.provider == "dlvm-ir"} - headings)
    assert not missing, f"{REFERENCE.name} has no '### `name`' section for: {', '.join(missing)}"


def test_no_section_for_an_unknown_instruction() -> None:
    # Headings in backquotes name instructions; an alias is documented in its instruction's section.
    unknown = sorted(h for h in set(HEADING.findall(TEXT)) if h not in ir.OPS)
    assert not unknown, f"sections for instructions that do not exist: {', '.join(unknown)}"


def test_there_are_module_examples() -> None:
    assert len(MODULES) >= 5


def test_every_dlvm_block_is_a_module() -> None:
    fragments = [line for line, text in _blocks("dlvm") if not text.lstrip().startswith("module")]
    assert not fragments, (
        f"```dlvm blocks at lines {fragments} are not complete modules; "
        "tag fragments ```dlvm-fragment or ```text"
    )


@pytest.mark.parametrize(("line", "text"), MODULES, ids=[f"line{n}" for n, _ in MODULES])
def test_module_example(line: int, text: str) -> None:
    name = f"{REFERENCE.name}:{line}"
    module = ir.parse(text, name)
    ir.verify(module)
    printed = ir.print_module(module)
    again = ir.parse(printed, f"<printed {name}>")
    ir.verify(again)
    assert ir.print_module(again) == printed
