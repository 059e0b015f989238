"""Work that must grow linearly with the code: counted, not timed (the times belong to
benchmarks/scaling.py). Each test builds a long function of the shape that once made a pass
quadratic and counts the operation that was repeated per instruction."""

from __future__ import annotations

import pytest

import dlvm.ir as ir
from dlvm.ir.core import IndexedList
from dlvm.opt.transforms import fuse_elementwise

T = "<4 x f32>"


def chain_with_fan_out(n: int) -> str:
    """`%v(i) = op(%v(i-1), %v0)`: one long region, every instruction also using the first."""
    lines = [f"func @f: ({T}) -> {T} {{", f"'entry(%x: {T}):", f"    %v0 = tanh %x: {T}"]
    for i in range(1, n):
        op = ("add", "multiply", "subtract")[i % 3]
        lines.append(f"    %v{i} = {op} %v{i - 1}: {T}, %v0: {T}")
    lines += [f"    return %v{n - 1}: {T}", "}"]
    return "\n".join(lines)


def test_fusing_a_long_chain_finds_each_region_a_few_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Growing one region instruction by instruction must not walk the region each time."""
    n = 3_000
    module = ir.parse(chain_with_fan_out(n))
    finds = 0
    find = fuse_elementwise.BlockGraph.find

    def counted(self: fuse_elementwise.BlockGraph, i: int) -> int:
        nonlocal finds
        finds += 1
        return find(self, i)

    monkeypatch.setattr(fuse_elementwise.BlockGraph, "find", counted)
    records = ir.run_passes(module, "fuse-elementwise")
    assert records[0].stats["instructions fused"] == n
    assert finds <= 6 * n


def test_optimizing_a_long_block_rebuilds_positions_rarely(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep of rewrites inserts an instruction before each of many all along one block
    (`x / 2 → x · 0.5`): positions are worked out anew about once per √n insertions, not
    once per insertion."""
    n = 4_000
    lines = [f"func @f: ({T}) -> {T} {{", f"'entry(%x: {T}):", f"    %v0 = tanh %x: {T}"]
    for i in range(1, n):
        lines.append(f"    %z{i} = divide %v{i - 1}: {T}, 2.0: f32")
        lines.append(f"    %v{i} = multiply %z{i}: {T}, %v0: {T}")
    lines += [f"    return %v{n - 1}: {T}", "}"]
    module = ir.parse("\n".join(lines))
    assert isinstance(module["f"].blocks[0].instructions, IndexedList)
    rebuilds = 0
    rebuild = IndexedList._rebuild

    def counted(self: IndexedList) -> bool:
        nonlocal rebuilds
        rebuilds += 1
        return rebuild(self)

    monkeypatch.setattr(IndexedList, "_rebuild", counted)
    records = ir.run_passes(module, "algebra-simplify")
    assert records[0].stats["rewrites (divide-power-of-two)"] == n - 1
    assert rebuilds <= 3 * n / (2 * n) ** 0.5
