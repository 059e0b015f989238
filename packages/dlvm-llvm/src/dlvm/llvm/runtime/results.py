"""Results of compiled code as numpy arrays, without copies and without per-call set-up.

The entry function writes each result to 8-byte slots (`entry.py`): a scalar's value, or a
tensor's buffer, element address and sizes. A tensor whose buffer only the result holds
becomes an array over that buffer, which goes back to DLVM's pool when numpy drops it
(`Reclaimer`); any other (an argument's, a constant's, a global's, one buffer returned
twice) is copied. `ResultReader` does this for one build: what each slot holds is worked out
once, so a call reads its slots, checks the counts and makes the arrays.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..codegen.entry import Leaf

_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_free = _libc.free
_free.argtypes = [ctypes.c_void_p]

# An array over native memory is made by `np.ndarray(shape, dtype, buffer)` over a ctypes
# object at the element address: the cheapest way from an address to an ndarray that keeps
# its owner (the ctypes object, numpy's `base`) alive. The type's length is only an upper
# bound: numpy uses the elements of `shape`, nothing touches the rest.
_BOUND = 1 << 60
_word = ctypes.c_int64.from_address  # a buffer's header: count, size class, next free
_count = _word


SMALL_CLASSES = 6  # size classes below 4 KiB (64 << class bytes), freed to libc at once


class Reclaimer:
    """Buffers the compiled code handed to Python, back for reuse once numpy is done.

    A result is a pool buffer that leaves the pool with its array. Freeing it to libc when
    the array dies would hand large buffers back to the kernel, and the next call would
    fault a fresh one in page by page (for a 16 MB result that costs more than computing
    it). So a dead result's buffer waits here, and the next call on any thread puts it on
    that thread's free lists before it runs (Python holds the GIL for both steps, so native
    code never races with this). At most `limit` bytes wait; beyond that, libc frees them,
    and so it does small buffers at once (malloc gives those back without faults, and a call
    that finds nothing waiting skips the hand-over).
    """

    def __init__(self, limit: int = 1 << 31) -> None:
        self.pending: list[tuple[int, int]] = []  # (buffer, size class)
        self.bytes = 0
        self.limit = limit

    def put(self, buf: int) -> None:
        cls = _word(buf + 8).value
        size = 64 << cls if cls >= 0 else 0
        if cls < SMALL_CLASSES or self.bytes + size > self.limit:
            _free(buf)
            return
        self.pending.append((buf, cls))
        self.bytes += size

    def drain(self, words: memoryview, free_lists: int) -> None:
        """Put the waiting buffers on the free lists (slots from `free_lists` on) of the
        context whose memory `words` views."""
        pending, self.pending, self.bytes = self.pending, [], 0
        for buf, cls in pending:
            slot = free_lists + cls
            _word(buf + 16).value = words[slot]
            words[slot] = buf


RECLAIMER = Reclaimer()


class OwnedMemory(ctypes.c_char * _BOUND):  # type: ignore[misc]
    """The elements of a result's buffer, as numpy's `base` of the result's array: gives
    the buffer back when numpy no longer needs it."""

    __slots__ = ("buf",)

    def __del__(self) -> None:
        buf = getattr(self, "buf", 0)
        if not buf:
            return
        try:
            RECLAIMER.put(buf)
        except Exception:  # at interpreter exit the reclaimer may be gone
            _free(buf)


def owned_array(buf: int, data: int, shape: tuple[int, ...], dtype: np.dtype[Any]
                ) -> np.ndarray:
    """An array over `data` (in the buffer `buf`, which Python now owns)."""
    memory = OwnedMemory.from_address(data)
    memory.buf = buf
    return np.ndarray(shape, dtype, memory)


def copied_array(data: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """A copy of the array at `data` (memory Python does not own)."""
    size = math.prod(shape) * dtype.itemsize
    raw = (ctypes.c_char * size).from_address(data) if size else b""
    return np.frombuffer(bytes(raw), dtype).reshape(shape).copy()


def words(array: np.ndarray) -> memoryview:
    """An int64 array's elements as Python ints, read and written cheaply."""
    return array.data.cast("B").cast("q")


class ResultSlots:
    """A context's result slots: written by a call, read right after (calls on a context
    are serial, so one set is reused)."""

    def __init__(self, slots: int = 64) -> None:
        self.array = np.zeros(slots, np.int64)
        self.size = slots
        self.address = self.array.ctypes.data
        self.ints = words(self.array)
        self.typed: dict[np.dtype[Any], np.ndarray] = {}

    def scalar(self, slot: int, dtype: np.dtype[Any]) -> np.ndarray:
        """The scalar in `slot` (its value in the slot's first bytes) as a 0-d array."""
        view = self.typed.get(dtype)
        if view is None:
            view = self.typed[dtype] = self.array.view(np.uint8).view(dtype)
        return np.array(view[slot * 8 // dtype.itemsize])


class ResultReader:
    """Reads the results of one build from its slots (see the module docstring)."""

    def __init__(self, leaves: list[Leaf], dtypes: list[np.dtype[Any]]) -> None:
        # (slot, rank, dtype) per result, in order
        self.plan = [(leaf.slot, leaf.type.rank, dtype)
                     for leaf, dtype in zip(leaves, dtypes, strict=True)]
        self.tensor_slots = [leaf.slot for leaf in leaves if leaf.type.rank]
        # the commonest result, one tensor, read without loops (its shape the type's, when
        # the build is for sizes that fix it)
        self.single = self.plan[0] if len(self.plan) == 1 and self.plan[0][1] else None
        shape = leaves[0].type.shape if self.single is not None else (None,)
        self.single_shape = None if None in shape else tuple(int(d) for d in shape)  # type: ignore[arg-type]

    def read(self, slots: ResultSlots, release: Callable[[int, int], None], ctx: int
             ) -> tuple[np.ndarray, ...]:
        """The results of the call just made on the context at `ctx` (whose slots are
        `slots`); `release` drops a reference to a buffer, as native code does."""
        if self.single is not None:
            return (self.read_one(slots, release, ctx),)
        if not self.plan:
            return ()
        ints = slots.ints
        # Python may own a buffer only if the results hold its only reference, counted over
        # all results before any is made (one buffer returned twice is held twice)
        bufs = [ints[s] for s in self.tensor_slots]
        if not all(bufs) or len(set(bufs)) != len(bufs) or any(
                _count(buf).value != 1 for buf in bufs):
            return self.read_shared(slots, release, ctx)
        out = []
        for slot, rank, dtype in self.plan:
            if rank:
                out.append(owned_array(ints[slot], ints[slot + 1],
                                       tuple(ints[slot + 2:slot + 2 + rank]), dtype))
            else:
                out.append(slots.scalar(slot, dtype))
        return tuple(out)

    def read_one(self, slots: ResultSlots, release: Callable[[int, int], None], ctx: int
                 ) -> np.ndarray:
        """`read` of a build whose one result is a tensor (`single`)."""
        ints = slots.ints
        slot, rank, dtype = self.single  # type: ignore[misc]
        buf = ints[slot]
        if buf and _count(buf).value == 1:
            memory = OwnedMemory.from_address(ints[slot + 1])
            memory.buf = buf
            return np.ndarray(self.single_shape or tuple(ints[slot + 2:slot + 2 + rank]), dtype,
                              memory)
        return self.read_shared(slots, release, ctx)[0]

    def read_shared(self, slots: ResultSlots, release: Callable[[int, int], None], ctx: int
                    ) -> tuple[np.ndarray, ...]:
        """`read` where some buffer is shared, returned twice, or missing."""
        ints = slots.ints
        counts: dict[int, int] = {}
        for s in self.tensor_slots:
            counts[ints[s]] = counts.get(ints[s], 0) + 1
        # decided on the counts before any reference is released: copying one result drops
        # its reference, and a later result of the same buffer must not then look unshared
        ours = {buf for buf, n in counts.items()
                if buf and _count(buf).value == n}
        out: list[np.ndarray] = []
        for slot, rank, dtype in self.plan:
            if rank == 0:
                out.append(slots.scalar(slot, dtype))
                continue
            buf, data = ints[slot], ints[slot + 1]
            shape = tuple(ints[slot + 2:slot + 2 + rank])
            if not buf:  # a value that was never defined
                out.append(np.zeros(shape, dtype))
            elif buf in ours:
                if counts[buf] > 1:  # each array holds one of the buffer's references
                    counts[buf] -= 1
                    out.append(copied_array(data, shape, dtype))
                    release(ctx, buf)
                else:
                    out.append(owned_array(buf, data, shape, dtype))
            else:
                # not ours alone (an argument's, a constant's, a global's): copy it, and
                # drop the reference the result held (a count below zero marks memory
                # nobody counts)
                out.append(copied_array(data, shape, dtype))
                if _count(buf).value > 0:
                    release(ctx, buf)
        return tuple(out)
