"""The coverage table: every instruction accounted for, a plugin's included, and
docs/ad-coverage.md up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

import dlvm.ir as ir
from dlvm.ad import coverage
from dlvm.ir import opdef, plugin
from dlvm.ir.opdef import OPS

DOC = Path(__file__).resolve().parents[3] / "docs" / "ad-coverage.md"


def test_every_instruction_has_a_row() -> None:
    assert sorted(name for _, name, *_ in coverage.rows()) == sorted(OPS)


def test_no_rule_without_a_reason() -> None:
    """An instruction with neither rule nor driver handling says why in its note."""
    for _, name, adjoint, tangent, note in coverage.rows():
        if "no" in (adjoint, tangent):
            assert note, name


def test_plugin_instructions_are_counted_after_loading_the_plugins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`rows()` loads the plugins itself; their instructions are marked with their
    distribution, and left out of the first-party table."""
    build = plugin.make_registry

    def make_registry(autoload: bool | None = None) -> plugin.Registry:
        with opdef.provided_by("dlvm-fake"):
            ir.define("fakeOp", "$x", lambda inst, m: inst.x.type, traits=("pure",),
                      category="fake")
        return build(autoload=False)

    monkeypatch.setattr(plugin, "make_registry", make_registry)
    monkeypatch.setattr(plugin, "_REGISTRY", None)
    monkeypatch.setattr(opdef, "_plugins_loaded", False)
    try:
        assert ("fake", "fakeOp", "no", "no", "from dlvm-fake") in coverage.rows()
        assert "fakeOp" not in {name for _, name, *_ in coverage.rows(first_party_only=True)}
    finally:
        OPS.pop("fakeOp", None)


@pytest.mark.skipif(not DOC.exists(), reason="docs/ is not part of an installed package")
def test_the_document_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == coverage.markdown(first_party_only=True), (
        "regenerate with: python -m dlvm.ad.coverage --first-party > docs/ad-coverage.md")
