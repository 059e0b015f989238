"""Properties of instructions are traits on their `OpDef`, read by every package that needs
them (a fusion rule, a legality check), not opcode sets repeated in each."""

from __future__ import annotations

import pytest

from dlvm.ir.opdef import OPS, TRAITS, ensure_instructions, lookup


@pytest.fixture(autouse=True, scope="module")
def instructions() -> None:
    ensure_instructions()


def traits(name: str) -> frozenset[str]:
    op = lookup(name)
    assert op is not None, name
    return frozenset(op.traits)


@pytest.mark.parametrize("name", ["reduce", "unbroadcast"])
def test_folds_along_dimensions_are_reductions(name: str) -> None:
    assert "reduction" in traits(name)


@pytest.mark.parametrize("name", ["reduceWindow", "scan", "add", "dot"])
def test_windows_scans_and_the_rest_are_not(name: str) -> None:
    assert "reduction" not in traits(name)


@pytest.mark.parametrize("name", ["divide", "truncateDivide", "floorDivide", "modulo", "power"])
def test_integer_division_and_power_may_trap_on_integers(name: str) -> None:
    assert "may_trap_on_integers" in traits(name)
    assert "may_trap" not in traits(name)  # floats never trap: unused ones may go


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "min", "lessThan"])
def test_other_arithmetic_never_traps(name: str) -> None:
    assert not traits(name) & {"may_trap", "may_trap_on_integers"}


def test_every_trait_in_use_is_a_known_one() -> None:
    used = {t for op in OPS.values() for t in op.traits}
    assert used <= TRAITS, used - TRAITS
