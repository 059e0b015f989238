"""The thread pool that splits large kernels and GEMMs over the process's thread budget.

    i32 dlvm_parallel_for(ptr task, ptr closure, i64 total, i64 chunks, i64 threads)

runs `task(closure, begin, end)` over `chunks` pieces of [0, total) on up to
min(`threads`, budget) threads, the caller's included, and returns the first non-zero status.
It is native code, compiled once per process. Built so that the cores are never waited for:

- The caller claims chunks itself, like its workers; a job is done when every *chunk* has
  finished, not when every worker has reported. A worker that is descheduled (more runnable
  threads than cores, another process busy beside) and has not claimed a chunk by the time
  the others have claimed them all is simply not waited for: the caller runs its share.
  Chunks are claimed by a compare-and-swap on one word holding the job's generation and the
  next chunk, so a late worker can never take a chunk of the following job.
- A job wakes only the workers it needs (min(threads, chunks) − 1, by tickets), only
  those asleep (the others find the new job while they spin), and no more than the cores
  can run beside the caller and the spinning workers.
- Workers and the caller spin for a bounded time (`SPIN_NS`, tens of µs, measured on the
  clock, with the CPU's pause hint), then sleep on a condition variable; at most cores − 1
  workers spin at once, so that with more threads than cores the spinning ones do not take
  the cores from those with work. Nothing spins unboundedly, and nothing calls sched_yield,
  which under load hands the core to whatever else runs for a whole time slice.

These are the ideas of PyTorch's intra-op pool (the caller runs a share), numba's workqueue
(the caller and workers take chunks from one counter) and Eigen's non-blocking pool (bounded
spinning by a limited number of threads before a wait).

GEMMs (strategy "a"). numpy's OpenBLAS runs on one thread, and `dlvm_sgemm`/`dlvm_dgemm`
are this module's wrappers: a large product (over 2²¹ multiply-adds) is split over this pool
in blocks of 16 rows or columns of the output (along its larger dimension), each piece one
single-threaded OpenBLAS call, two pieces per core. The alternative, "b", gives OpenBLAS
the budget while a GEMM runs and this pool sleeps (`blas.set_gemm_strategy("openblas")`).
Measured on the MLP training step (784-512-512-10, batch 128, 2-core EPYC shared with other
work, benchmarks/results/llvm_cpu.md): idle at 2 threads "b" is 6–14 % faster (OpenBLAS
shares packed panels between its threads), but with one busy process beside it "b" takes
1.9–30× as long as "a" (8.7–148 ms against 4.6–4.9 ms), and with more threads than cores
it takes 90–800 ms against 3–4 ms. The causes: OpenBLAS's idle workers spin for ~130 ms
after each threaded call (unless OPENBLAS_THREAD_TIMEOUT was set before numpy loaded, too
late for a library), taking the cores from DLVM's kernels; and OpenBLAS joins on every one
of its workers, so a descheduled one stalls the GEMM. So "a" it is: one pool with the
properties above owns the cores.

GEMVs (batch-1 inference) are split the same way under strategy "a": `dlvm_sgemv`/
`dlvm_dgemv` give each thread one piece of the output elements (blocks of 64 rows of A, or
of its columns when transposed), each one single-threaded OpenBLAS call. Measured on the
2-core EPYC, idle, workers spinning (back-to-back calls), f32, split against whole: equal at
128×128, 4.8 against 5.5 µs at 256², 9.6 against 13.3 at 512², 14–16 against 22–23 at
784×512 — hence 2¹⁶ multiply-adds as the threshold, with a margin for a wake from sleep.
With another process busy beside, the pieces run in turn and the split costs up to 1.6×
(35 against 22 µs at 784×512); `threads.set_num_threads(1)` turns it off.

A call made while another runs (from a second Python thread, say, or a GEMM inside a job)
runs its chunks itself, in order. Since a job never waits for a worker that has not
claimed a chunk, a forked child, which has no workers, still runs every job.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from functools import cache
from types import ModuleType

import llvmlite.binding as llvm
from llvmlite import ir as ll

from ..codegen import jit
from ..codegen.emit import (
    alloca,
    call_pointer,
    declare,
    gep,
    global_variable,
    i32,
    i64,
    store_atomic,
)
from ..codegen.layout import F32, F64, I32, I64, PTR, VOID
from . import blas
from .cpus import usable_cpus

MAX_WORKERS = 256
SYNC_BYTES = 128  # room for a pthread mutex or condition variable on any libc
SPIN_NS = 20_000  # how long a worker or the caller spins before it sleeps (measured: 0, 20
# and 50 µs alike on the MLP step idle, 200 µs slower with more threads than cores)
GEMM_BLOCK = 16  # rows or columns of a GEMM's output per piece (a multiple of the kernels')
GEMM_MIN = 1 << 21  # m·n·k below which a GEMM runs on the calling thread
GEMM_CHUNKS_PER_THREAD = 2
GEMV_BLOCK = 64  # output elements of a GEMV per piece (rows of A, or columns when transposed)
GEMV_CHUNKS_PER_THREAD = 1  # a GEMV streams A once: finer pieces only add calls
GEMV_MIN = 1 << 16  # m·n below which a GEMV runs on the calling thread (see the docstring)
NO_TRANS = 111  # CBLAS's flags: 111 no transpose, 112 transpose, 113 conjugate transpose
CLOSED = (1 << 32) - 1  # a claim word's index while a job is being set up
LINE = 8  # i64s per cache line: each field on a line of its own
ROW_MAJOR = 101  # CBLAS's layout flag: the only one split (the pieces' offsets assume it)

ROUTINES = ("sgemm", "dgemm", "sgemv", "dgemv")

FIELDS = ["claim", "ticket", "generation", "finished", "task", "closure", "total", "chunks",
          "need", "status", "busy", "started", "sleepers", "caller_sleeping", "budget",
          "spin_ns", "gemm_split", "cores", "spinners", "ready"]


def direct_unless(b: ll.IRBuilder, split: ll.Value, blas: ll.Function, fn: ll.Function
                  ) -> None:
    """Unless `split`, call the library with the wrapper's own arguments and return; the
    builder continues where the product is split over the pool."""
    direct = b.append_basic_block("direct")
    parallel = b.append_basic_block("parallel")
    b.cbranch(split, parallel, direct)
    b.position_at_end(direct)
    b.call(blas, list(fn.args))
    b.ret_void()
    b.position_at_end(parallel)


def _field(b: ll.IRBuilder, state: ll.Value, name: str) -> ll.Value:
    return gep(b, I64, state, i64(FIELDS.index(name) * LINE))


def _load(b: ll.IRBuilder, p: ll.Value, ordering: str = "acquire") -> ll.Value:
    return b.load_atomic(p, ordering, 8, typ=I64)


def _pause(m: ll.Module) -> Callable[[ll.IRBuilder], None]:
    """The CPU's spin-wait hint (x86 `pause`, AArch64 `yield`), or nothing elsewhere."""
    triple = llvm.get_process_triple()
    if triple.startswith(("x86_64", "i686", "i386")):
        fn = declare(m, "llvm.x86.sse2.pause", VOID, [])
        return lambda b: b.call(fn, [])
    if triple.startswith(("aarch64", "arm64")):
        hint = declare(m, "llvm.aarch64.hint", VOID, [I32])
        return lambda b: b.call(hint, [i32(1)])
    return lambda b: None


class Pool:
    """Builds the pool's functions into one module."""

    def __init__(self) -> None:
        m = self.m = ll.Module(name="dlvm.pool")
        n = len(FIELDS) * LINE
        self.state = global_variable(m, ll.ArrayType(I64, n), "dlvm.pool.state")
        self.state.initializer = ll.Constant(ll.ArrayType(I64, n), None)
        self.state.linkage = "internal"
        self.state.align = 64
        sync_t = ll.ArrayType(ll.IntType(8), SYNC_BYTES)
        self.mutex, self.work, self.done = (global_variable(m, sync_t, f"dlvm.pool.{x}")
                                            for x in ("mutex", "work", "done"))
        for g in (self.mutex, self.work, self.done):
            g.initializer = ll.Constant(sync_t, None)
            g.linkage = "internal"
            g.align = 64
        handles_t = ll.ArrayType(I64, MAX_WORKERS)
        self.handles = global_variable(m, handles_t, "dlvm.pool.handles")
        self.handles.initializer = ll.Constant(handles_t, None)
        self.handles.linkage = "internal"
        self.lock = declare(m, "pthread_mutex_lock", I32, [PTR])
        self.unlock = declare(m, "pthread_mutex_unlock", I32, [PTR])
        self.wait = declare(m, "pthread_cond_wait", I32, [PTR, PTR])
        self.signal = declare(m, "pthread_cond_signal", I32, [PTR])
        self.broadcast = declare(m, "pthread_cond_broadcast", I32, [PTR])
        self.clock = declare(m, "clock_gettime", I32, [I32, PTR])
        self.pause = _pause(m)
        self.task_t = ll.FunctionType(I32, [PTR, I64, I64])
        self.now = self.build_now()
        self.claim = self.build_claim()
        self.run = self.build_run()
        self.worker = self.build_worker()
        self.start = self.build_start()
        self.build_parallel_for()
        self.build_setters()
        for double in (False, True):
            self.build_gemm(double)
            self.build_gemv(double)

    def f(self, b: ll.IRBuilder, name: str) -> ll.Value:
        return _field(b, self.state, name)

    def function(self, name: str, ret: ll.Type, args: list[ll.Type], *, export: bool = False
                 ) -> tuple[ll.Function, ll.IRBuilder]:
        fn = ll.Function(self.m, ll.FunctionType(ret, args), name)
        if not export:
            fn.linkage = "internal"
        return fn, ll.IRBuilder(fn.append_basic_block("entry"))

    # ------------------------------------------------------------ helpers

    def build_now(self) -> ll.Function:
        """now(): CLOCK_MONOTONIC in ns."""
        fn, b = self.function("dlvm.pool.now", I64, [])
        ts = alloca(b, ll.ArrayType(I64, 2))
        b.call(self.clock, [i32(1), ts])
        sec = b.load(ts, typ=I64)
        nsec = b.load(gep(b, I64, ts, i64(1)), typ=I64)
        b.ret(b.add(b.mul(sec, i64(1_000_000_000)), nsec))
        return fn

    def spin(self, b: ll.IRBuilder, ready: Callable[[], ll.Value], done: ll.Block,
             gave_up: ll.Block) -> None:
        """Check `ready()` until it holds (to `done`) or `spin_ns` have passed (to
        `gave_up`); the builder is left nowhere."""
        t0 = b.call(self.now, [])
        limit = _load(b, self.f(b, "spin_ns"), "monotonic")
        head = b.append_basic_block("spin")
        more = b.append_basic_block("spin.more")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(ready(), done, more)
        b.position_at_end(more)
        self.pause(b)
        spent = b.sub(b.call(self.now, []), t0)
        b.cbranch(b.icmp_signed("<", spent, limit), head, gave_up)

    def build_claim(self) -> ll.Function:
        """claim(word, gen, limit): the next index of `word` (generation in the high 32
        bits, a count in the low) if its generation is `gen` and the count is below
        `limit`, else −1."""
        fn, b = self.function("dlvm.pool.claim", I64, [PTR, I64, I64])
        word, gen, limit = fn.args
        head = b.append_basic_block("try")
        fail = b.append_basic_block("fail")
        attempt = b.append_basic_block("attempt")
        got = b.append_basic_block("got")
        b.branch(head)
        b.position_at_end(head)
        w = _load(b, word)
        index = b.and_(w, i64(CLOSED))
        ok = b.and_(b.icmp_unsigned("==", b.lshr(w, i64(32)), gen),
                    b.icmp_signed("<", index, limit))
        b.cbranch(ok, attempt, fail)
        b.position_at_end(attempt)
        swapped = b.cmpxchg(word, w, b.add(w, i64(1)), "acq_rel", "acquire")
        b.cbranch(b.extract_value(swapped, 1), got, head)
        b.position_at_end(got)
        b.ret(index)
        b.position_at_end(fail)
        b.ret(i64(-1))
        return fn

    def build_run(self) -> ll.Function:
        """run(gen): run chunks of job `gen` until none is left to claim."""
        fn, b = self.function("dlvm.pool.run_chunks", VOID, [I64])
        (gen,) = fn.args
        head = b.append_basic_block("claim")
        work = b.append_basic_block("work")
        out = b.append_basic_block("out")
        b.branch(head)
        b.position_at_end(head)
        chunks = _load(b, self.f(b, "chunks"))
        c = b.call(self.claim, [self.f(b, "claim"), gen, chunks])
        b.cbranch(b.icmp_signed("<", c, i64(0)), out, work)
        b.position_at_end(work)
        # the job cannot end before this chunk does, so its fields stay
        chunks = _load(b, self.f(b, "chunks"))
        total = _load(b, self.f(b, "total"))
        begin = b.sdiv(b.mul(c, total), chunks)
        end = b.sdiv(b.mul(b.add(c, i64(1)), total), chunks)
        task = b.inttoptr(_load(b, self.f(b, "task")), PTR)
        closure = b.inttoptr(_load(b, self.f(b, "closure")), PTR)
        status = call_pointer(b, task, self.task_t, [closure, begin, end])
        with b.if_then(b.icmp_signed("!=", status, i32(0))):  # the first error wins
            b.cmpxchg(self.f(b, "status"), i64(0), b.zext(status, I64), "acq_rel", "acquire")
        finished = b.add(b.atomic_rmw("add", self.f(b, "finished"), i64(1), "seq_cst"),
                         i64(1))
        last = b.icmp_signed("==", finished, chunks)
        with b.if_then(b.and_(last, b.icmp_signed(
                "!=", _load(b, self.f(b, "caller_sleeping"), "seq_cst"), i64(0)))):
            b.call(self.lock, [self.mutex])
            b.call(self.broadcast, [self.done])
            b.call(self.unlock, [self.mutex])
        b.branch(head)
        b.position_at_end(out)
        b.ret_void()
        return fn

    # ------------------------------------------------------------ workers

    def build_worker(self) -> ll.Function:
        """worker(): wait for a job (spin, then sleep), take a ticket if the job still
        wants helpers, run chunks, repeat."""
        fn = ll.Function(self.m, ll.FunctionType(PTR, [PTR]), "dlvm.pool.worker")
        fn.linkage = "internal"
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        seen = alloca(b, I64)
        b.store(_load(b, self.f(b, "generation")), seen)
        loop = b.append_basic_block("loop")
        b.branch(loop)
        b.position_at_end(loop)
        caught = b.append_basic_block("caught")
        sleep = b.append_basic_block("sleep")

        def new_job() -> ll.Value:
            return b.icmp_signed("!=", _load(b, self.f(b, "generation")),
                                 b.load(seen, typ=I64))

        # at most `cores` − 1 workers spin at once: more would take the cores from the
        # threads that have work when there are more threads than cores
        spinning = b.atomic_rmw("add", self.f(b, "spinners"), i64(1), "acq_rel")
        may_spin = b.icmp_signed("<", spinning, b.sub(
            _load(b, self.f(b, "cores"), "monotonic"), i64(1)))
        spin_block = b.append_basic_block("spin.start")
        spun_caught = b.append_basic_block("spin.caught")
        spun_out = b.append_basic_block("spin.out")
        b.cbranch(may_spin, spin_block, spun_out)
        b.position_at_end(spin_block)
        self.spin(b, new_job, spun_caught, spun_out)
        b.position_at_end(spun_caught)
        b.atomic_rmw("sub", self.f(b, "spinners"), i64(1), "acq_rel")
        b.branch(caught)
        b.position_at_end(spun_out)
        b.atomic_rmw("sub", self.f(b, "spinners"), i64(1), "acq_rel")
        b.branch(sleep)
        b.position_at_end(sleep)
        b.call(self.lock, [self.mutex])
        b.atomic_rmw("add", self.f(b, "sleepers"), i64(1), "seq_cst")
        wait_head = b.append_basic_block("wait")
        wait_body = b.append_basic_block("wait.body")
        woke = b.append_basic_block("woke")
        b.branch(wait_head)
        b.position_at_end(wait_head)
        same = b.icmp_signed("==", _load(b, self.f(b, "generation"), "seq_cst"),
                             b.load(seen, typ=I64))
        b.cbranch(same, wait_body, woke)
        b.position_at_end(wait_body)
        b.call(self.wait, [self.work, self.mutex])
        b.branch(wait_head)
        b.position_at_end(woke)
        b.atomic_rmw("sub", self.f(b, "sleepers"), i64(1), "seq_cst")
        b.call(self.unlock, [self.mutex])
        b.branch(caught)
        b.position_at_end(caught)
        gen = _load(b, self.f(b, "generation"))
        b.store(gen, seen)
        need = _load(b, self.f(b, "need"))
        ticket = b.call(self.claim, [self.f(b, "ticket"), gen, need])
        with b.if_then(b.icmp_signed(">=", ticket, i64(0))):
            b.call(self.run, [gen])
        b.branch(loop)
        return fn

    def build_start(self) -> ll.Function:
        """start(n): create workers up to n − 1 (the caller is one); the first call sets up
        the mutex and condition variables."""
        m = self.m
        fn, b = self.function("dlvm.pool.start", VOID, [I64])
        (want,) = fn.args
        mutex_init = declare(m, "pthread_mutex_init", I32, [PTR, PTR])
        cond_init = declare(m, "pthread_cond_init", I32, [PTR, PTR])
        create = declare(m, "pthread_create", I32, [PTR, PTR, PTR, PTR])
        with b.if_then(b.icmp_signed("==", b.load(self.f(b, "ready"), typ=I64), i64(0))):
            b.call(mutex_init, [self.mutex, ll.Constant(PTR, None)])
            b.call(cond_init, [self.work, ll.Constant(PTR, None)])
            b.call(cond_init, [self.done, ll.Constant(PTR, None)])
            b.store(i64(1), self.f(b, "ready"))
        target = b.sub(want, i64(1))
        target = b.select(b.icmp_signed(">", target, i64(MAX_WORKERS)), i64(MAX_WORKERS),
                          target)
        head = b.append_basic_block("more")
        body = b.append_basic_block("create")
        made = b.append_basic_block("made")
        end = b.append_basic_block("started")
        b.branch(head)
        b.position_at_end(head)
        n = b.load(self.f(b, "started"), typ=I64)
        b.cbranch(b.icmp_signed("<", n, target), body, end)
        b.position_at_end(body)
        ok = b.call(create, [gep(b, I64, self.handles, n), ll.Constant(PTR, None), self.worker,
                             ll.Constant(PTR, None)])
        b.cbranch(b.icmp_signed("!=", ok, i32(0)), end, made)  # no more threads: use those
        b.position_at_end(made)
        b.store(b.add(n, i64(1)), self.f(b, "started"))
        b.branch(head)
        b.position_at_end(end)
        b.ret_void()
        return fn

    # ------------------------------------------------------------ the entry point

    def build_parallel_for(self) -> None:
        fn, b = self.function("dlvm_parallel_for", I32, [PTR, PTR, I64, I64, I64], export=True)
        task_p, closure_p, total, chunks, threads = fn.args
        budget = _load(b, self.f(b, "budget"), "monotonic")
        threads = b.select(b.and_(b.icmp_signed(">", budget, i64(0)),
                                  b.icmp_signed("<", budget, threads)), budget, threads)
        inline = b.append_basic_block("inline")
        parallel = b.append_basic_block("parallel")
        single = b.or_(b.icmp_signed("<=", chunks, i64(1)), b.icmp_signed("<=", threads, i64(1)))
        claimed = b.cmpxchg(self.f(b, "busy"), i64(0), i64(1), "acq_rel", "acquire")
        got = b.extract_value(claimed, 1)
        b.cbranch(b.or_(single, b.not_(got)), inline, parallel)
        b.position_at_end(inline)
        with b.if_then(got):  # claimed for a job run inline: give it back
            store_atomic(b, i64(0), self.f(b, "busy"), "release")
        b.ret(call_pointer(b, task_p, self.task_t, [closure_p, i64(0), total]))

        b.position_at_end(parallel)
        b.call(self.start, [threads])
        gen = b.add(_load(b, self.f(b, "generation"), "monotonic"), i64(1))
        gen = b.and_(gen, i64(CLOSED))
        # close the claim word first: a late worker of the last job can claim nothing now
        store_atomic(b, b.or_(b.shl(gen, i64(32)), i64(CLOSED)), self.f(b, "claim"), "seq_cst")
        helpers = b.sub(b.select(b.icmp_signed("<", chunks, threads), chunks, threads), i64(1))
        for name, value in (("task", b.ptrtoint(task_p, I64)),
                            ("closure", b.ptrtoint(closure_p, I64)), ("total", total),
                            ("chunks", chunks), ("need", helpers), ("status", i64(0)),
                            ("finished", i64(0)), ("ticket", b.shl(gen, i64(32)))):
            store_atomic(b, value, self.f(b, name), "release")
        store_atomic(b, b.shl(gen, i64(32)), self.f(b, "claim"), "release")
        store_atomic(b, gen, self.f(b, "generation"), "seq_cst")
        sleepers = _load(b, self.f(b, "sleepers"), "seq_cst")
        # wake as many as the job needs, and no more than the cores can run beside the
        # caller and the spinning workers (who take the job themselves): a thread woken
        # beyond them only takes a core from one with work
        cores = b.sub(b.sub(_load(b, self.f(b, "cores"), "monotonic"), i64(1)),
                      _load(b, self.f(b, "spinners"), "monotonic"))
        wake = b.select(b.icmp_signed("<", sleepers, helpers), sleepers, helpers)
        wake = b.select(b.icmp_signed("<", cores, wake), cores, wake)
        with b.if_then(b.icmp_signed(">", wake, i64(0))):
            b.call(self.lock, [self.mutex])
            head = b.append_basic_block("wake")
            body = b.append_basic_block("wake.one")
            woken = b.append_basic_block("woken")
            pre = b.block
            b.branch(head)
            b.position_at_end(head)
            k = b.phi(I64)
            k.add_incoming(i64(0), pre)
            b.cbranch(b.icmp_signed("<", k, wake), body, woken)
            b.position_at_end(body)
            b.call(self.signal, [self.work])
            k.add_incoming(b.add(k, i64(1)), body)
            b.branch(head)
            b.position_at_end(woken)
            b.call(self.unlock, [self.mutex])
        b.call(self.run, [gen])

        settled = b.append_basic_block("settled")
        sleep = b.append_basic_block("join.sleep")

        def all_finished() -> ll.Value:
            return b.icmp_signed(">=", _load(b, self.f(b, "finished"), "seq_cst"), chunks)

        self.spin(b, all_finished, settled, sleep)
        b.position_at_end(sleep)
        b.call(self.lock, [self.mutex])
        store_atomic(b, i64(1), self.f(b, "caller_sleeping"), "seq_cst")
        wait_head = b.append_basic_block("join")
        wait_body = b.append_basic_block("join.wait")
        joined = b.append_basic_block("joined")
        b.branch(wait_head)
        b.position_at_end(wait_head)
        b.cbranch(all_finished(), joined, wait_body)
        b.position_at_end(wait_body)
        b.call(self.wait, [self.done, self.mutex])
        b.branch(wait_head)
        b.position_at_end(joined)
        store_atomic(b, i64(0), self.f(b, "caller_sleeping"), "seq_cst")
        b.call(self.unlock, [self.mutex])
        b.branch(settled)
        b.position_at_end(settled)
        status = b.trunc(_load(b, self.f(b, "status")), I32)
        store_atomic(b, i64(0), self.f(b, "busy"), "release")
        b.ret(status)

    def build_setters(self) -> None:
        """dlvm_pool_configure(budget, spin_ns, gemm_split, cores); dlvm_pool_workers()
        (threads started)."""
        fn, b = self.function("dlvm_pool_configure", VOID, [I64, I64, I64, I64], export=True)
        for name, value in zip(("budget", "spin_ns", "gemm_split", "cores"), fn.args,
                               strict=True):
            store_atomic(b, value, self.f(b, name), "release")
        b.ret_void()
        fn, b = self.function("dlvm_pool_workers", I64, [], export=True)
        b.ret(_load(b, self.f(b, "started"), "monotonic"))

    # ------------------------------------------------------------ GEMM

    def build_gemm(self, double: bool) -> None:
        """dlvm_pool_?gemm: cblas_?gemm's row-major signature (i64 sizes); a large product
        is split over the pool in blocks of the output's rows or columns."""
        p = "d" if double else "s"
        ft = F64 if double else F32
        size = 8 if double else 4
        args = [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64]
        blas = declare(self.m, f"dlvm.blas.{p}gemm", VOID, args)
        # the closure: the 14 arguments as i64 (floats by their bits), then the split flag
        task, b = self.function(f"dlvm.pool.{p}gemm.task", I32, [PTR, I64, I64])
        closure, begin, end = task.args
        v = [b.load(gep(b, I64, closure, i64(k)), typ=I64) for k in range(15)]
        layout, ta, tb = (b.trunc(x, I32) for x in v[:3])
        m, n, k = v[3:6]
        bits = ll.IntType(64) if double else ll.IntType(32)
        alpha = b.bitcast(b.trunc(v[6], bits) if not double else v[6], ft)
        beta = b.bitcast(b.trunc(v[11], bits) if not double else v[11], ft)
        a, lda, bb, ldb, c, ldc, split_n = v[7], v[8], v[9], v[10], v[12], v[13], v[14]
        first = b.mul(begin, i64(GEMM_BLOCK))
        dim = b.select(b.icmp_signed("!=", split_n, i64(0)), n, m)
        last = b.mul(end, i64(GEMM_BLOCK))
        last = b.select(b.icmp_signed("<", last, dim), last, dim)
        width = b.sub(last, first)
        is_t_a = b.icmp_signed("==", v[1], i64(112))
        is_t_b = b.icmp_signed("==", v[2], i64(112))
        with b.if_else(b.icmp_signed("!=", split_n, i64(0))) as (cols, rows):
            with cols:  # columns first..last of op(B) and of C
                off = b.select(is_t_b, b.mul(first, ldb), first)
                pb = b.add(bb, b.mul(off, i64(size)))
                pc = b.add(c, b.mul(first, i64(size)))
                b.call(blas, [layout, ta, tb, m, width, k, alpha, b.inttoptr(a, PTR), lda,
                              b.inttoptr(pb, PTR), ldb, beta, b.inttoptr(pc, PTR), ldc])
            with rows:  # rows first..last of op(A) and of C
                off = b.select(is_t_a, first, b.mul(first, lda))
                pa = b.add(a, b.mul(off, i64(size)))
                pc = b.add(c, b.mul(b.mul(first, ldc), i64(size)))
                b.call(blas, [layout, ta, tb, width, n, k, alpha, b.inttoptr(pa, PTR), lda,
                              b.inttoptr(bb, PTR), ldb, beta, b.inttoptr(pc, PTR), ldc])
        b.ret(i32(0))

        fn, b = self.function(f"dlvm_pool_{p}gemm", VOID, args, export=True)
        layout, ta, tb, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc = fn.args
        budget = _load(b, self.f(b, "budget"), "monotonic")
        work = b.mul(b.mul(m, n), k)
        split = b.and_(b.icmp_signed(">", budget, i64(1)),
                       b.icmp_signed(">=", work, i64(GEMM_MIN)))
        split = b.and_(split, b.icmp_signed(
            "!=", _load(b, self.f(b, "gemm_split"), "monotonic"), i64(0)))
        split = b.and_(split, b.icmp_signed("==", layout, i32(ROW_MAJOR)))  # the offsets
        direct_unless(b, split, blas, fn)
        closure = alloca(b, ll.ArrayType(I64, 15))
        split_n = b.icmp_signed(">=", n, m)
        values = [b.zext(layout, I64), b.zext(ta, I64), b.zext(tb, I64), m, n, k,
                  b.zext(b.bitcast(alpha, bits), I64) if not double else b.bitcast(alpha, I64),
                  b.ptrtoint(a, I64), lda, b.ptrtoint(bb, I64), ldb,
                  b.zext(b.bitcast(beta, bits), I64) if not double else b.bitcast(beta, I64),
                  b.ptrtoint(c, I64), ldc, b.zext(split_n, I64)]
        # pieces per core, not per thread: a thinner piece packs the same panels again
        self.run_blocks(b, task, closure, values, b.select(split_n, n, m), GEMM_BLOCK,
                        GEMM_CHUNKS_PER_THREAD, budget)

    def run_blocks(self, b: ll.IRBuilder, task: ll.Function, closure: ll.Value,
                   values: list[ll.Value], dim: ll.Value, block: int, per_thread: int,
                   budget: ll.Value) -> None:
        """Store a BLAS call's arguments in its closure and run its blocks of `block`
        outputs (along `dim`) over the pool, in at most `per_thread` pieces per usable
        core; then return."""
        for j, value in enumerate(values):
            b.store(value, gep(b, I64, closure, i64(j)))
        blocks = b.sdiv(b.add(dim, i64(block - 1)), i64(block))
        cores = _load(b, self.f(b, "cores"), "monotonic")
        most = b.mul(b.select(b.icmp_signed("<", cores, budget), cores, budget),
                     i64(per_thread))
        chunks = b.select(b.icmp_signed("<", blocks, most), blocks, most)
        parallel_for = self.m.get_global("dlvm_parallel_for")
        b.call(parallel_for, [task, closure, blocks, chunks, budget])
        b.ret_void()

    # ------------------------------------------------------------ GEMV

    def build_gemv(self, double: bool) -> None:
        """dlvm_pool_?gemv: cblas_?gemv's row-major signature (i64 sizes); a large product
        is split over the pool in blocks of output elements: rows of A, or its columns when
        transposed. Each piece reads all of x, so only y's increment moves its offset."""
        p = "d" if double else "s"
        ft = F64 if double else F32
        size = 8 if double else 4
        bits = ll.IntType(64) if double else ll.IntType(32)
        args = [I32, I32, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64]
        blas = declare(self.m, f"dlvm.blas.{p}gemv", VOID, args)

        def to_i64(b: ll.IRBuilder, x: ll.Value) -> ll.Value:
            return b.bitcast(x, I64) if double else b.zext(b.bitcast(x, bits), I64)

        def from_i64(b: ll.IRBuilder, x: ll.Value) -> ll.Value:
            return b.bitcast(x if double else b.trunc(x, bits), ft)

        # the closure: the 12 arguments as i64 (floats by their bits)
        task, b = self.function(f"dlvm.pool.{p}gemv.task", I32, [PTR, I64, I64])
        closure, begin, end = task.args
        v = [b.load(gep(b, I64, closure, i64(j)), typ=I64) for j in range(12)]
        layout, trans = b.trunc(v[0], I32), b.trunc(v[1], I32)
        m, n, a, lda, x, incx, y, incy = v[2], v[3], v[5], v[6], v[7], v[8], v[10], v[11]
        alpha, beta = from_i64(b, v[4]), from_i64(b, v[9])
        transposed = b.icmp_signed("!=", trans, i32(NO_TRANS))
        first = b.mul(begin, i64(GEMV_BLOCK))
        dim = b.select(transposed, n, m)
        last = b.mul(end, i64(GEMV_BLOCK))
        last = b.select(b.icmp_signed("<", last, dim), last, dim)
        width = b.sub(last, first)
        py = b.inttoptr(b.add(y, b.mul(b.mul(first, incy), i64(size))), PTR)
        with b.if_else(transposed) as (cols, rows):
            with cols:  # columns first..last of A: y[first..last] = αA[:, first..last]ᵀx + βy
                pa = b.inttoptr(b.add(a, b.mul(first, i64(size))), PTR)
                b.call(blas, [layout, trans, m, width, alpha, pa, lda, b.inttoptr(x, PTR),
                              incx, beta, py, incy])
            with rows:  # rows first..last of A
                pa = b.inttoptr(b.add(a, b.mul(b.mul(first, lda), i64(size))), PTR)
                b.call(blas, [layout, trans, width, n, alpha, pa, lda, b.inttoptr(x, PTR),
                              incx, beta, py, incy])
        b.ret(i32(0))

        fn, b = self.function(f"dlvm_pool_{p}gemv", VOID, args, export=True)
        layout, trans, m, n, alpha, a, lda, x, incx, beta, y, incy = fn.args
        budget = _load(b, self.f(b, "budget"), "monotonic")
        split = b.and_(b.icmp_signed(">", budget, i64(1)),
                       b.icmp_signed(">=", b.mul(m, n), i64(GEMV_MIN)))
        split = b.and_(split, b.icmp_signed(
            "!=", _load(b, self.f(b, "gemm_split"), "monotonic"), i64(0)))
        # the offsets assume row major, a forward y and a known flag; anything else is
        # BLAS's to run (or to refuse) whole
        split = b.and_(split, b.icmp_signed("==", layout, i32(ROW_MAJOR)))
        split = b.and_(split, b.icmp_signed(">", incy, i64(0)))
        split = b.and_(split, b.icmp_unsigned("<", b.sub(trans, i32(NO_TRANS)), i32(3)))
        split = b.and_(split, b.icmp_signed(">", m, i64(0)))
        direct_unless(b, split, blas, fn)
        closure = alloca(b, ll.ArrayType(I64, 12))
        values = [b.zext(layout, I64), b.zext(trans, I64), m, n, to_i64(b, alpha),
                  b.ptrtoint(a, I64), lda, b.ptrtoint(x, I64), incx, to_i64(b, beta),
                  b.ptrtoint(y, I64), incy]
        self.run_blocks(b, task, closure, values,
                        b.select(b.icmp_signed("!=", trans, i32(NO_TRANS)), n, m), GEMV_BLOCK,
                        GEMV_CHUNKS_PER_THREAD, budget)


def build() -> str:
    """The pool's LLVM IR."""
    return str(Pool().m)


_lock = threading.Lock()
_engines: list[object] = []
_budget = 0  # what the native pool is told once it is loaded (0: every thread it is asked)
_spin_ns = SPIN_NS
_configure: Callable[[int, int, int, int], None] | None = None
# where the budget comes from when the pool loads before anyone set it (`threads` puts its
# get_num_threads here, which reads DLVM_NUM_THREADS)
budget_source: Callable[[], int] = usable_cpus


@cache
def _compiled() -> dict[str, int]:
    """Compile the pool (once per process) and make its symbols resolvable."""
    global _configure
    with _lock:
        lib = blas.find()
        for r in ROUTINES:  # a product without OpenBLAS is a loop nest: never called
            llvm.add_symbol(f"dlvm.blas.{r}", getattr(lib, r) if lib else 0)
        obj = _object_code(jit)
        engine = jit.Engine()
        engine.load(obj)  # type: ignore[arg-type]
        _engines.append(engine)
        names = ("dlvm_parallel_for", *(f"dlvm_pool_{r}" for r in ROUTINES),
                 "dlvm_pool_configure", "dlvm_pool_workers")
        found = {name: engine.address(name) for name in names}
        llvm.add_symbol("dlvm_parallel_for", found["dlvm_parallel_for"])
        _configure = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 4)(
            found["dlvm_pool_configure"])
    if not _budget:
        budget = budget_source()
        set_budget(budget)
        blas.limit_threads(budget)
    else:
        _push()
    return found


def _push() -> None:
    if _configure is not None:
        _configure(_budget, _spin_ns, int(blas.gemm_strategy() == "pool"), usable_cpus())


def _object_code(jit: ModuleType) -> bytes:
    """The pool's object code, from the disk cache when an earlier process compiled it
    (compiling it costs a tenth of a second or more at every start)."""
    text = build()
    key = jit.cache_key(text, "thread pool", "opt=2")
    disk = jit.DiskCache()
    found = disk.get(key)
    if found is not None:
        return found[0]
    obj: bytes = jit.emit(text, "obj", 2)
    disk.put(key, obj, {"what": "the thread pool"})
    return obj


def address() -> int:
    """The address of `dlvm_parallel_for` (compiled on first use, then resolvable by name)."""
    return _compiled()["dlvm_parallel_for"]


def register_symbols() -> bool:
    """Make `dlvm_sgemm`/`dlvm_dgemm`/`dlvm_sgemv`/`dlvm_dgemv` (the splitting wrappers,
    which call the library whole under the "openblas" strategy) resolvable by the JIT;
    False without a BLAS."""
    if blas.find() is None:
        return False
    for name, where in blas_addresses().items():
        llvm.add_symbol(f"dlvm_{name}", where)
    return True


def blas_addresses() -> dict[str, int]:
    """The splitting GEMM and GEMV wrappers, by BLAS routine name ("sgemm", ... "dgemv")."""
    found = _compiled()
    return {r: found[f"dlvm_pool_{r}"] for r in ROUTINES}


def set_budget(n: int, spin_ns: int | None = None) -> None:
    """Cap every job (kernels and GEMMs) at `n` threads; `spin_ns`: how long idle threads
    spin before they sleep. Applied at once if the pool is loaded, else when it loads."""
    global _budget, _spin_ns
    _budget = n
    if spin_ns is not None:
        _spin_ns = spin_ns
    _push()


def workers() -> int:
    """Worker threads started so far (the caller of a job is not one)."""
    if _configure is None:
        return 0
    return int(ctypes.CFUNCTYPE(ctypes.c_int64)(_compiled()["dlvm_pool_workers"])())


PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
