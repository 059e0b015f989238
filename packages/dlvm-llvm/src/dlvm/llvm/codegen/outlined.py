"""Loops split over the thread pool: a task function of its own, and the call that runs it
on the calling thread, or through `dlvm_parallel_for` when the work pays for waking the pool.

Used by the lowerings whose loop nests are not element-wise kernels (`convolve`'s copy into
columns, `reduceWindow`); `regions.py` does the same for kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir as ll

from .emit import declare, gep, i64, internal_function
from .function import FunctionLowering
from .layout import I32, I64, PTR

PARALLEL_MIN = 1 << 16  # work below which a loop stays on the calling thread (by default)
CHUNKS_PER_THREAD = 4


class Outlined:
    """A task function `i32 (ptr closure, i64 begin, i64 end)`. Its closure holds first the
    arguments of each call (of `arg_types`), then values of the caller that it reads
    (constants stay constants, so the body folds them)."""

    def __init__(self, fl: FunctionLowering, stem: str, arg_types: Sequence[ll.Type],
                 values: Sequence[ll.Value]) -> None:
        self.fl = fl
        self.arg_count = len(arg_types)
        self.values = list({id(v): v for v in values if not isinstance(v, ll.Constant)}.values())
        self.fn, self.b = internal_function(fl.unit.llmod, fl.unit.fresh(stem), I32,
                                            [PTR, I64, I64])
        closure = self.fn.args[0]
        self.args = [self.b.load(gep(self.b, I64, closure, i64(j)), typ=a)
                     for j, a in enumerate(arg_types)]
        self.inner = {id(v): self.b.load(gep(self.b, I64, closure, i64(self.arg_count + j)),
                                         typ=v.type)
                      for j, v in enumerate(self.values)}

    def get(self, v: ll.Value) -> ll.Value:
        return v if isinstance(v, ll.Constant) else self.inner[id(v)]

    def call(self, args: Sequence[ll.Value], total: ll.Value, work: ll.Value,
             minimum: int = PARALLEL_MIN) -> None:
        """Run the task over [0, total) with `args`: on the pool when `work` (elements
        written or folded) is large enough to pay for waking it."""
        fl, b = self.fl, self.fl.b
        closure = fl.result_slot(ll.ArrayType(I64, self.arg_count + len(self.values)))
        for j, v in enumerate([*args, *self.values]):
            b.store(v, gep(b, I64, closure, i64(j)))
        threads = fl.unit.threads
        if threads <= 1:
            fl.check(b.call(self.fn, [closure, i64(0), total]))
            return
        parallel_for = declare(fl.unit.llmod, "dlvm_parallel_for", I32,
                               [PTR, PTR, I64, I64, I64])
        status = fl.result_slot(I32)
        with b.if_else(b.icmp_signed(">=", work, i64(minimum))) as (split, alone):
            with split:
                most = i64(threads * CHUNKS_PER_THREAD)
                chunks = b.select(b.icmp_signed("<", total, most), total, most)
                b.store(b.call(parallel_for, [self.fn, closure, total, chunks, i64(threads)]),
                        status)
            with alone:
                b.store(b.call(self.fn, [closure, i64(0), total]), status)
        fl.check(b.load(status, typ=I32))
