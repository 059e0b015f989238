"""Copies of modules that still point at the user's source.

Targets optimize a copy of the module they are given (the caller's module stays as it is).
The copy is made through the canonical text form, so the parser would locate its parts in
that printed text, which nobody has seen. `carry_locations` gives every part of the copy the
location of the part it copies instead, so that verifier diagnostics, pass diagnostics and
run-time errors of compiled code name the user's file, line and column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .core import Module


def carry_locations(original: Module, copy: Module) -> None:
    """Give each global, function, block and instruction of `copy` (printed from
    `original` and parsed again) the source location of its original, None included: a
    part built by a pass has no source, and a location in the printed copy would name a
    text nobody wrote."""
    for old_global, new_global in _pairs(original.globals, copy.globals):
        new_global.location = old_global.location
    for old_fn, new_fn in _pairs(original.functions, copy.functions):
        new_fn.location = old_fn.location
        for old_block, new_block in _pairs(old_fn.blocks, new_fn.blocks):
            new_block.location = old_block.location
            for old_inst, new_inst in _pairs(old_block.instructions, new_block.instructions):
                new_inst.location = old_inst.location


def _pairs(old: Sequence[Any], new: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Parts in the same position of the original and the copy (the printer writes them in
    order, so the counts agree; where they would not, nothing is paired)."""
    return list(zip(old, new, strict=True)) if len(old) == len(new) else []
