"""The coverage table: every instruction accounted for, and docs/ad-coverage.md up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlvm.ad import coverage
from dlvm.ir.opdef import OPS

DOC = Path(__file__).resolve().parents[3] / "docs" / "ad-coverage.md"


def test_every_instruction_has_a_row() -> None:
    assert sorted(name for _, name, *_ in coverage.rows()) == sorted(OPS)


def test_no_rule_without_a_reason() -> None:
    """An instruction with neither rule nor driver handling says why in its note."""
    for _, name, adjoint, tangent, note in coverage.rows():
        if "no" in (adjoint, tangent):
            assert note, name


@pytest.mark.skipif(not DOC.exists(), reason="docs/ is not part of an installed package")
def test_the_document_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == coverage.markdown(), (
        "regenerate with: python -m dlvm.ad.coverage > docs/ad-coverage.md")
