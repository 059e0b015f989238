"""The interpreter's memory blocks (`dlvm.ir.runtime.Memory`): cells made as they are written,
kept values, copies between ranges, and the limits on what a value may hold."""

from __future__ import annotations

import numpy as np
import pytest

from dlvm.ir.runtime import (
    MAX_ARRAY_ELEMENTS,
    ExecutionError,
    Memory,
    Pointer,
    held_elements,
    sum_dtype,
    zero_value,
)
from dlvm.ir.types import F32, ArrayType, TensorType, TupleType


def block(count: int, *values: float) -> Memory:
    """`count` float cells, the first ones written with `values`."""
    m = Memory(count, np.float32(0))
    for i, v in enumerate(values):
        m.write(i, np.float32(v))
    return m


def cells(m: Memory, n: int) -> list[float]:
    return [float(m.read(i)) for i in range(n)]


def test_a_block_of_any_count_is_made_at_once_and_reads_zero() -> None:
    m = Memory(2**62, np.zeros(3, np.float32))
    assert m.read(2**62 - 1).tolist() == [0, 0, 0] and m.written == {}
    with pytest.raises(ExecutionError, match=f"pointer index {2**62} out of bounds"):
        m.read(2**62)


@pytest.mark.parametrize("count", [-1, -(2**63)])
def test_a_negative_count_is_refused(count: int) -> None:
    with pytest.raises(ExecutionError, match=f"allocation of a negative count {count}$"):
        Memory(count, None)


def test_a_cell_keeps_its_own_read_only_copy_of_what_was_stored() -> None:
    m = Memory(2, np.zeros(2, np.float32))
    x = np.array([1, 2], np.float32)
    Pointer(m, 1).store(x)
    x[:] = 9
    kept = Pointer(m, 1).load()
    assert kept.tolist() == [1, 2] and not kept.flags.writeable
    assert Pointer(m).load().tolist() == [0, 0]


def test_an_element_pointer_writes_only_its_cell() -> None:
    m = Memory(3, (np.float32(0), np.float32(0)))
    Pointer(m, 2, (1,)).store(np.float32(5))
    assert [tuple(map(float, m.read(i))) for i in range(3)] == [(0, 0), (0, 0), (0, 5)]


@pytest.mark.parametrize("start, target_start, expected", [
    (0, 2, [1, 2, 1, 2, 3]),  # forward overlap: every cell read before any is written
    (2, 0, [3, 0, 0, 0, 0]),  # backward overlap, from cells never written (zero)
    (1, 1, [1, 2, 3, 0, 0]),
])
def test_a_copy_within_a_block_reads_every_cell_before_writing(
        start: int, target_start: int, expected: list[float]) -> None:
    m = block(5, 1, 2, 3)
    m.copy_cells(start, m, target_start, 3)
    assert cells(m, 5) == expected


def test_a_copy_from_cells_never_written_makes_the_destination_read_zero() -> None:
    src, dst = block(10**12), block(10**12, 4, 5)
    src.write(10**12 - 1, np.float32(7))
    src.copy_cells(0, dst, 0, 10**12)
    assert cells(dst, 2) == [0, 0] and list(dst.written) == [10**12 - 1]


def test_a_freed_block_drops_its_cells_and_refuses_access() -> None:
    m = block(4, 1, 2)
    m.free()
    assert m.freed and m.written == {}
    for access in (lambda: m.read(0), lambda: m.write(1, np.float32(1))):
        with pytest.raises(ExecutionError, match="use of deallocated memory"):
            access()


def test_sums_of_narrow_floats_accumulate_in_double() -> None:
    assert [sum_dtype(np.dtype(t)) for t in (np.float16, np.float32, np.float64, np.int8,
                                              np.int64, np.bool_)] == [
        np.float64, np.float64, np.float64, np.int8, np.int64, np.bool_]


def test_array_values_are_limited_by_their_elements_not_their_nesting() -> None:
    scalar = TensorType((), F32)
    rows = ArrayType(4096, TensorType((1000,), F32))  # a tensor is one element
    assert held_elements(rows) == 4096
    assert held_elements(TupleType((rows, scalar))) == 4097
    assert held_elements(ArrayType(4096, rows)) == MAX_ARRAY_ELEMENTS
    assert [len(r) for r in zero_value(ArrayType(3, ArrayType(2, scalar)))] == [2, 2, 2]
    for too_big in (ArrayType(4097, ArrayType(4096, scalar)),
                    ArrayType(MAX_ARRAY_ELEMENTS + 1, scalar)):
        with pytest.raises(ExecutionError, match="use a tensor type"):
            zero_value(too_big)
