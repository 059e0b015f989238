"""The thread pool that splits large kernels over the machine's cores.

    i32 dlvm_parallel_for(ptr task, ptr closure, i64 total, i64 chunks, i64 threads)

runs `task(closure, begin, end)` over `chunks` pieces of [0, total) on up to `threads`
threads (the caller's included) and returns the first non-zero status. It is native code,
compiled once per process: workers are pthreads waiting on a condition variable, chunks are
claimed with an atomic counter, and a call returns when every worker has finished the job
(so the next job can never meet a late worker). A call made while another runs — from a
second Python thread, say — runs its chunks itself, in order.

BLAS keeps its own threads; DLVM calls it between kernels, never from inside one, so the two
pools take turns on the cores instead of competing for them.
"""

from __future__ import annotations

import ctypes
import threading
from functools import cache
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir as ll

from .emit import (
    alloca,
    declare,
    gep,
    global_variable,
    i32,
    i64,
    internal_function,
    store_atomic,
)
from .layout import I32, I64, PTR, VOID

MAX_WORKERS = 256
SYNC_BYTES = 128  # room for a pthread mutex or condition variable on any libc
SPIN = 2_000  # checks, each after a sched_yield (about a millisecond on an idle core),
# before a worker or the caller sleeps

FIELDS = ["started", "generation", "task", "closure", "total", "chunks", "next", "active",
          "status", "busy", "limit"]


def _field(b: ll.IRBuilder, state: ll.Value, name: str) -> ll.Value:
    return gep(b, I64, state, i64(FIELDS.index(name)))


class spin:
    """Up to `SPIN` checks of `ready()`, yielding the core between them: to `done` as soon
    as it holds, else to `gave_up`. The caller positions the builder afterwards."""

    def __init__(self, b: ll.IRBuilder, ready: Any, done: ll.Block, gave_up: ll.Block
                 ) -> None:
        self.b, self.ready, self.done, self.gave_up = b, ready, done, gave_up

    def __enter__(self) -> None:
        b = self.b
        pre = b.block
        head = b.append_basic_block("spin")
        more = b.append_basic_block("spin.more")
        b.branch(head)
        b.position_at_end(head)
        count = b.phi(I64)
        count.add_incoming(i64(0), pre)
        b.cbranch(self.ready(), self.done, more)
        b.position_at_end(more)
        # give the core away while waiting: BLAS's threads may want it
        b.call(declare(b.module, "sched_yield", I32, []), [])
        nxt = b.add(count, i64(1))
        count.add_incoming(nxt, more)
        b.cbranch(b.icmp_signed("<", nxt, i64(SPIN)), head, self.gave_up)

    def __exit__(self, *exc: object) -> None:
        pass


def build() -> str:
    """The pool's LLVM IR."""
    m = ll.Module(name="dlvm.pool")
    state = global_variable(m, ll.ArrayType(I64, len(FIELDS)), "dlvm.pool.state")
    state.initializer = ll.Constant(ll.ArrayType(I64, len(FIELDS)), None)
    state.linkage = "internal"
    sync_t = ll.ArrayType(ll.IntType(8), SYNC_BYTES)
    mutex, work, done = (global_variable(m, sync_t, f"dlvm.pool.{n}")
                         for n in ("mutex", "work", "done"))
    for g in (mutex, work, done):
        g.initializer = ll.Constant(sync_t, None)
        g.linkage = "internal"
        g.align = 64
    threads_t = ll.ArrayType(I64, MAX_WORKERS)
    handles = global_variable(m, threads_t, "dlvm.pool.handles")
    handles.initializer = ll.Constant(threads_t, None)
    handles.linkage = "internal"

    lock = declare(m, "pthread_mutex_lock", I32, [PTR])
    unlock = declare(m, "pthread_mutex_unlock", I32, [PTR])
    wait = declare(m, "pthread_cond_wait", I32, [PTR, PTR])
    broadcast = declare(m, "pthread_cond_broadcast", I32, [PTR])
    signal = declare(m, "pthread_cond_signal", I32, [PTR])
    mutex_init = declare(m, "pthread_mutex_init", I32, [PTR, PTR])
    cond_init = declare(m, "pthread_cond_init", I32, [PTR, PTR])
    create = declare(m, "pthread_create", I32, [PTR, PTR, PTR, PTR])
    task_t = ll.FunctionType(I32, [PTR, I64, I64])

    def atomic_load(b: ll.IRBuilder, p: ll.Value) -> ll.Value:
        return b.load_atomic(p, "acquire", 8, typ=I64)

    # run_chunks(): claim chunks until none is left
    run, b = internal_function(m, "dlvm.pool.run_chunks", VOID, [])
    head = b.append_basic_block("claim")
    work_block = b.append_basic_block("work")
    out = b.append_basic_block("out")
    b.branch(head)
    b.position_at_end(head)
    c = b.atomic_rmw("add", _field(b, state, "next"), i64(1), "acq_rel")
    chunks = atomic_load(b, _field(b, state, "chunks"))
    b.cbranch(b.icmp_signed("<", c, chunks), work_block, out)
    b.position_at_end(work_block)
    total = atomic_load(b, _field(b, state, "total"))
    begin = b.sdiv(b.mul(c, total), chunks)
    end = b.sdiv(b.mul(b.add(c, i64(1)), total), chunks)
    task = b.inttoptr(atomic_load(b, _field(b, state, "task")), PTR)
    closure = b.inttoptr(atomic_load(b, _field(b, state, "closure")), PTR)
    from .emit import call_pointer

    status = call_pointer(b, task, task_t, [closure, begin, end])
    with b.if_then(b.icmp_signed("!=", status, i32(0))):
        b.atomic_rmw("or", _field(b, state, "status"), b.zext(status, I64), "acq_rel")
    b.branch(head)
    b.position_at_end(out)
    b.ret_void()

    # worker(arg): wait for a new generation, run chunks, report done
    worker = ll.Function(m, ll.FunctionType(PTR, [PTR]), "dlvm.pool.worker")
    worker.linkage = "internal"
    b = ll.IRBuilder(worker.append_basic_block("entry"))
    seen = alloca(b, I64)
    b.store(i64(0), seen)
    loop = b.append_basic_block("loop")
    b.branch(loop)
    b.position_at_end(loop)
    # spin a while first: a job that follows soon (the next kernel of a call, the next
    # call of a training loop) starts without a sleep and a wake-up
    spun = b.append_basic_block("spun")
    caught = b.append_basic_block("caught")
    with spin(b, lambda: b.icmp_signed("!=", atomic_load(b, _field(b, state, "generation")),
                                       b.load(seen, typ=I64)), caught, spun):
        pass
    b.position_at_end(caught)
    b.store(atomic_load(b, _field(b, state, "generation")), seen)
    work_now = b.append_basic_block("work")
    b.branch(work_now)
    b.position_at_end(spun)
    b.call(lock, [mutex])
    wait_head = b.append_basic_block("wait")
    wait_body = b.append_basic_block("sleep")
    go = b.append_basic_block("go")
    b.branch(wait_head)
    b.position_at_end(wait_head)
    gen = atomic_load(b, _field(b, state, "generation"))
    b.cbranch(b.icmp_signed("==", gen, b.load(seen, typ=I64)), wait_body, go)
    b.position_at_end(wait_body)
    b.call(wait, [work, mutex])
    b.branch(wait_head)
    b.position_at_end(go)
    b.store(gen, seen)
    b.call(unlock, [mutex])
    b.branch(work_now)
    b.position_at_end(work_now)
    b.call(run, [])
    b.call(lock, [mutex])
    left = b.sub(b.atomic_rmw("sub", _field(b, state, "active"), i64(1), "acq_rel"), i64(1))
    with b.if_then(b.icmp_signed("==", left, i64(0))):
        b.call(signal, [done])
    b.call(unlock, [mutex])
    b.branch(loop)

    # start(threads): create workers up to threads − 1 (the caller is one)
    start, b = internal_function(m, "dlvm.pool.start", VOID, [I64])
    (want,) = start.args
    started_p = _field(b, state, "started")
    with b.if_then(b.icmp_signed("==", b.load(_field(b, state, "limit"), typ=I64), i64(0))):
        b.call(mutex_init, [mutex, ll.Constant(PTR, None)])
        b.call(cond_init, [work, ll.Constant(PTR, None)])
        b.call(cond_init, [done, ll.Constant(PTR, None)])
        b.store(i64(1), _field(b, state, "limit"))
    target = b.sub(want, i64(1))
    target = b.select(b.icmp_signed(">", target, i64(MAX_WORKERS)), i64(MAX_WORKERS), target)
    head = b.append_basic_block("more")
    body = b.append_basic_block("create")
    end_b = b.append_basic_block("started")
    b.branch(head)
    b.position_at_end(head)
    n = b.load(started_p, typ=I64)
    b.cbranch(b.icmp_signed("<", n, target), body, end_b)
    b.position_at_end(body)
    ok = b.call(create, [gep(b, I64, handles, n), ll.Constant(PTR, None), worker,
                         ll.Constant(PTR, None)])
    with b.if_then(b.icmp_signed("!=", ok, i32(0))):
        b.branch(end_b)  # no more threads: run with those there are
    b.store(b.add(n, i64(1)), started_p)
    b.branch(head)
    b.position_at_end(end_b)
    b.ret_void()

    # the entry point
    fn = ll.Function(m, ll.FunctionType(I32, [PTR, PTR, I64, I64, I64]), "dlvm_parallel_for")
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    task_p, closure_p, total, chunks, threads = fn.args
    inline = b.append_basic_block("inline")
    parallel = b.append_basic_block("parallel")
    single = b.or_(b.icmp_signed("<=", chunks, i64(1)), b.icmp_signed("<=", threads, i64(1)))
    claimed = b.cmpxchg(_field(b, state, "busy"), i64(0), i64(1), "acq_rel", "acquire")
    got = b.extract_value(claimed, 1)
    b.cbranch(b.or_(single, b.not_(got)), inline, parallel)
    b.position_at_end(inline)
    with b.if_then(b.and_(b.not_(single), got)):  # claimed for nothing: give it back
        store_atomic(b, i64(0), _field(b, state, "busy"), "release")
    status = call_pointer(b, task_p, task_t, [closure_p, i64(0), total])
    b.ret(status)
    b.position_at_end(parallel)
    b.call(start, [threads])
    b.call(lock, [mutex])
    store_atomic(b, b.ptrtoint(task_p, I64), _field(b, state, "task"), "release")
    store_atomic(b, b.ptrtoint(closure_p, I64), _field(b, state, "closure"), "release")
    store_atomic(b, total, _field(b, state, "total"), "release")
    store_atomic(b, chunks, _field(b, state, "chunks"), "release")
    store_atomic(b, i64(0), _field(b, state, "status"), "release")
    store_atomic(b, b.load(_field(b, state, "started"), typ=I64),
                 _field(b, state, "active"), "release")
    store_atomic(b, i64(0), _field(b, state, "next"), "release")
    generation = b.add(b.load(_field(b, state, "generation"), typ=I64), i64(1))
    store_atomic(b, generation, _field(b, state, "generation"), "release")
    b.call(broadcast, [work])
    b.call(unlock, [mutex])
    b.call(run, [])
    settled = b.append_basic_block("settled")
    slow = b.append_basic_block("slow")
    with spin(b, lambda: b.icmp_signed("==", atomic_load(b, _field(b, state, "active")),
                                       i64(0)), settled, slow):
        pass
    b.position_at_end(slow)
    b.call(lock, [mutex])
    wait_head = b.append_basic_block("join")
    wait_body = b.append_basic_block("join.sleep")
    joined = b.append_basic_block("joined")
    b.branch(wait_head)
    b.position_at_end(wait_head)
    b.cbranch(b.icmp_signed(">", atomic_load(b, _field(b, state, "active")), i64(0)),
              wait_body, joined)
    b.position_at_end(wait_body)
    b.call(wait, [done, mutex])
    b.branch(wait_head)
    b.position_at_end(joined)
    b.call(unlock, [mutex])
    b.branch(settled)
    b.position_at_end(settled)
    status = b.trunc(atomic_load(b, _field(b, state, "status")), I32)
    store_atomic(b, i64(0), _field(b, state, "busy"), "release")
    b.ret(status)
    return str(m)


_lock = threading.Lock()


@cache
def address() -> int:
    """Compile the pool (once per process) and make `dlvm_parallel_for` resolvable."""
    from . import jit

    with _lock:
        obj = jit.emit(build(), "obj", 2)
        engine = jit.Engine()
        engine.load(obj)  # type: ignore[arg-type]
        _engines.append(engine)
        where = engine.address("dlvm_parallel_for")
        llvm.add_symbol("dlvm_parallel_for", where)
        return where


_engines: list[object] = []
PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
