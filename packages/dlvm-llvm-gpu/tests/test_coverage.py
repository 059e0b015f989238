"""The target coverage table: every instruction has a row, the GPU's lowering table and
the plan agree, and docs/target-coverage.md is current."""

from __future__ import annotations

from pathlib import Path

import pytest

import dlvm.ir as ir
from dlvm.ir.opdef import OPS
from dlvm.llvm_gpu import coverage
from dlvm.llvm_gpu.lowering import LOWERINGS, how_opcode_runs, lowering_of
from dlvm.llvm_gpu.plan import LaunchPlan

DOC = Path(__file__).resolve().parents[3] / "docs" / "target-coverage.md"


def test_every_instruction_has_a_row() -> None:
    assert sorted(name for _, name, *_ in coverage.rows()) == sorted(OPS)


def test_every_lowering_names_a_method_of_the_plan() -> None:
    for opcode, entry in LOWERINGS.items():
        assert callable(getattr(LaunchPlan, entry.method, None)), opcode


def test_an_instruction_without_an_entry_is_a_region_or_runs_on_the_host() -> None:
    module = ir.parse("""
func @f: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = tanh %x: <4 x f32>
    %r = random 4 from 0.0: f32 upto 1.0: f32
    %z = add %y: <4 x f32>, %r: <4 x f32>
    return %z: <4 x f32>
}
""")
    fn = module.function("f")
    assert fn is not None
    y, r, _, ret = fn.entry.instructions
    assert lowering_of(y).how == "kernel region" and lowering_of(r).how == "kernel region"
    assert lowering_of(ret).how == "walk" and how_opcode_runs("store") == "walk"
    assert how_opcode_runs("aPluginOpcodeWithoutRules") == "host"


@pytest.mark.skipif(not DOC.exists(), reason="docs/ is not part of an installed package")
def test_the_document_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == coverage.markdown(first_party_only=True), (
        "regenerate with: python -m dlvm.llvm_gpu.coverage --first-party > "
        "docs/target-coverage.md")
