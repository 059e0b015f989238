"""`ir.clone` copies a module whose parts still point at the user's source, so errors found
in a copy (which every target optimizes) name the user's file, line and column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir

SOURCE = """\
module "memory"
stage raw

var @total: f32

func @row: (<3 x 2 x f32>, i64) -> <2 x f32> {
'entry(%m: <3 x 2 x f32>, %i: i64):
    %r = extract %i: i64 from %m: <3 x 2 x f32>
    return %r: <2 x f32>
}
"""


@pytest.fixture
def module(tmp_path: Path) -> ir.Module:
    path = tmp_path / "memory.dl"
    path.write_text(SOURCE)
    return ir.parse_file(str(path))


def parts(module: ir.Module) -> list[object]:
    out: list[object] = [*module.globals]
    for fn in module.functions:
        out.append(fn)
        for block in fn.blocks:
            out.append(block)
            out.extend(block.instructions)
    return out


def test_every_part_of_a_copy_keeps_its_original_location(module: ir.Module) -> None:
    copy = ir.clone(module)
    originals, copies = parts(module), parts(copy)
    assert len(originals) == len(copies)
    for old, new in zip(originals, copies, strict=True):
        assert new is not old
        assert new.location == old.location  # type: ignore[attr-defined]
    extract = copy.functions[0].blocks[0].instructions[0]
    assert str(extract.location).endswith("memory.dl:8:10")


def test_a_part_without_a_source_stays_without_one_in_the_copy(module: ir.Module) -> None:
    """An instruction a pass built has no location; the copy must not invent one in its
    printed text."""
    fn = module.functions[0]
    ret = fn.blocks[0].instructions[-1]
    ret.location = None
    copy = ir.clone(module)
    assert copy.functions[0].blocks[0].instructions[-1].location is None


def test_a_run_time_error_in_a_copy_names_the_users_file(module: ir.Module) -> None:
    exe = ir.compile(ir.clone(module), target="interp")
    with pytest.raises(ir.ExecutionError, match=r"memory\.dl:8:10: 'extract': index 5 out of "
                       "bounds"):
        exe["row"](np.zeros((3, 2), np.float32), np.int64(5))


def test_a_diagnostic_found_in_a_copy_names_the_users_file(module: ir.Module) -> None:
    copy = ir.clone(module)
    copy.functions[0].blocks[0].instructions[-1].erase()  # the block loses its terminator
    with pytest.raises(ir.DiagnosticError) as caught:
        ir.verify(copy)
    assert "memory.dl:" in str(caught.value)
    assert "<copy of" not in str(caught.value)
