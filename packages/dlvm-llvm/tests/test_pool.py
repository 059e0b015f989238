"""The native thread pool: every chunk runs once, the first error comes back, jobs from
several Python threads at once, the thread budget caps every job, and GEMMs and GEMVs split
over the pool give BLAS's results with every transpose flag and awkward sizes."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from llvmlite import ir as ll

import dlvm.ir as ir
from dlvm.llvm.codegen import jit
from dlvm.llvm.codegen.emit import for_range, gep, i64
from dlvm.llvm.codegen.layout import I32, I64, PTR
from dlvm.llvm.runtime import blas, pool, threads


@pytest.fixture(autouse=True)
def restore_budget() -> Iterator[None]:
    yield
    threads.set_num_threads(None)


def native_tasks() -> dict[str, int]:
    """count(closure, begin, end): closure[i] += 1 for i in [begin, end) (atomically);
    fail(closure, begin, end): the first non-zero closure[i] of the range (0: success)."""
    m = ll.Module("pool.tests")
    count = ll.Function(m, ll.FunctionType(I32, [PTR, I64, I64]), "pool_test_count")
    b = ll.IRBuilder(count.append_basic_block("entry"))
    c, lo, hi = count.args
    with for_range(b, lo, hi) as i:
        b.atomic_rmw("add", gep(b, I64, c, i), i64(1), "monotonic")
    b.ret(ll.Constant(I32, 0))
    fail = ll.Function(m, ll.FunctionType(I32, [PTR, I64, I64]), "pool_test_fail")
    b = ll.IRBuilder(fail.append_basic_block("entry"))
    c, lo, hi = fail.args
    first = b.alloca(I64)
    b.store(i64(0), first)
    with for_range(b, lo, hi) as i:
        value = b.load(gep(b, I64, c, i), typ=I64)
        keep = b.icmp_signed("!=", b.load(first, typ=I64), i64(0))
        b.store(b.select(keep, b.load(first, typ=I64), value), first)
    b.ret(b.trunc(b.load(first, typ=I64), I32))
    engine = jit.Engine()
    engine.load(jit.emit(str(m), "obj", 2))  # type: ignore[arg-type]
    native_tasks.engine = engine  # type: ignore[attr-defined]
    return {"count": engine.address("pool_test_count"),
            "fail": engine.address("pool_test_fail")}


TASKS = native_tasks()
PARALLEL_FOR = pool.PARALLEL_FOR(pool.address())


def run_count(total: int, chunks: int, n: int) -> np.ndarray:
    hits = np.zeros(max(total, 1), np.int64)
    assert PARALLEL_FOR(TASKS["count"], hits.ctypes.data, total, chunks, n) == 0
    return hits[:total]


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_every_chunk_runs_exactly_once(n: int) -> None:
    threads.set_num_threads(n)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        total, chunks = int(rng.integers(0, 200)), int(rng.integers(1, 50))
        hits = run_count(total, chunks, n)
        assert (hits == 1).all(), (total, chunks)


def test_chunks_cover_the_range_in_the_pieces_asked_for() -> None:
    threads.set_num_threads(4)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    @ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    def record(closure: int, begin: int, end: int) -> int:
        with lock:
            seen.append((begin, end))
        return 0

    where = ctypes.cast(record, ctypes.c_void_p).value
    assert PARALLEL_FOR(where, None, 10, 4, 4) == 0
    assert sorted(seen) == [(0, 2), (2, 5), (5, 7), (7, 10)]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_the_first_error_comes_back_and_the_next_job_runs_clean(n: int) -> None:
    threads.set_num_threads(n)
    status = np.zeros(64, np.int64)  # chunk c of 64 over 64 elements begins at c
    status[37] = 5
    assert PARALLEL_FOR(TASKS["fail"], status.ctypes.data, 64, 64, n) == 5
    status[3] = 9  # two failing chunks: one of their statuses, never a mix of both
    assert PARALLEL_FOR(TASKS["fail"], status.ctypes.data, 64, 64, n) in (5, 9)
    assert PARALLEL_FOR(TASKS["fail"], status.ctypes.data, 64, 64, 1) == 9  # in order
    assert (run_count(100, 10, n) == 1).all()
    status[:] = 0
    assert PARALLEL_FOR(TASKS["fail"], status.ctypes.data, 64, 64, n) == 0


def test_jobs_from_several_python_threads_at_once() -> None:
    threads.set_num_threads(3)
    errors: list[str] = []

    def caller(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(1500):
            total, chunks = int(rng.integers(1, 300)), int(rng.integers(1, 40))
            hits = run_count(total, chunks, 3)
            if not (hits == 1).all():
                errors.append(f"total {total}, chunks {chunks}: {hits}")

    callers = [threading.Thread(target=caller, args=(s,)) for s in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert not errors, errors[:3]


def test_the_budget_caps_the_threads_a_job_asks_for() -> None:
    threads.set_num_threads(8)
    assert PARALLEL_FOR(TASKS["count"], np.zeros(64, np.int64).ctypes.data, 64, 64, 8) == 0
    assert pool.workers() >= 7  # seven workers exist now
    threads.set_num_threads(2)
    ids: set[int] = set()
    lock = threading.Lock()
    hits = [0]

    @ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    def who(closure: int, begin: int, end: int) -> int:
        with lock:
            ids.add(threading.get_native_id())
            hits[0] += 1
        return 0

    where = ctypes.cast(who, ctypes.c_void_p).value
    for _ in range(50):
        ids.clear()
        assert PARALLEL_FOR(where, None, 64, 64, 16) == 0
        assert len(ids) <= 2  # the caller and one worker, though the job asked for 16
    assert hits[0] == 50 * 64


def test_set_num_threads_reaches_openblas_and_the_getter() -> None:
    threads.set_num_threads(3)
    assert threads.get_num_threads() == 3
    if blas.available():
        assert blas.current_threads() == 1  # the pool splits GEMMs: OpenBLAS on one thread
        blas.set_gemm_strategy("openblas")
        try:
            assert blas.current_threads() == 3
        finally:
            blas.set_gemm_strategy("pool")
        assert blas.current_threads() == 1
    threads.set_num_threads(None)
    assert threads.get_num_threads() == threads.usable_cpus() or threads.ENV


def test_a_strategy_that_does_not_exist_is_refused() -> None:
    with pytest.raises(ValueError, match="GEMM strategy must be one of pool, openblas"):
        blas.set_gemm_strategy("mkl")


DOT = """
module "gemm"
stage raw

func @nn: (<{m} x {k} x {t}>, <{k} x {n} x {t}>) -> <{m} x {n} x {t}> {{
'entry(%a: <{m} x {k} x {t}>, %b: <{k} x {n} x {t}>):
    %c = dot %a: <{m} x {k} x {t}>, %b: <{k} x {n} x {t}>
    return %c: <{m} x {n} x {t}>
}}

func @tt: (<{k} x {m} x {t}>, <{n} x {k} x {t}>) -> <{m} x {n} x {t}> {{
'entry(%a: <{k} x {m} x {t}>, %b: <{n} x {k} x {t}>):
    %at = transpose %a: <{k} x {m} x {t}>
    %bt = transpose %b: <{n} x {k} x {t}>
    %c = dot %at: <{m} x {k} x {t}>, %bt: <{k} x {n} x {t}>
    return %c: <{m} x {n} x {t}>
}}

func @tn: (<{k} x {m} x {t}>, <{k} x {n} x {t}>) -> <{m} x {n} x {t}> {{
'entry(%a: <{k} x {m} x {t}>, %b: <{k} x {n} x {t}>):
    %at = transpose %a: <{k} x {m} x {t}>
    %c = dot %at: <{m} x {k} x {t}>, %b: <{k} x {n} x {t}>
    return %c: <{m} x {n} x {t}>
}}

func @nt: (<{m} x {k} x {t}>, <{n} x {k} x {t}>) -> <{m} x {n} x {t}> {{
'entry(%a: <{m} x {k} x {t}>, %b: <{n} x {k} x {t}>):
    %bt = transpose %b: <{n} x {k} x {t}>
    %c = dot %a: <{m} x {k} x {t}>, %bt: <{k} x {n} x {t}>
    return %c: <{m} x {n} x {t}>
}}
"""


@pytest.mark.skipif(not blas.available(), reason="numpy brings no OpenBLAS")
@pytest.mark.parametrize("shape", [(37, 250, 300), (300, 37, 260), (129, 129, 130)])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_gemms_split_over_the_pool_agree_with_numpy(shape: tuple[int, int, int], dtype: str,
                                                     n: int) -> None:
    m, k, nn = shape
    assert m * nn * k >= pool.GEMM_MIN  # large enough to split
    threads.set_num_threads(n)
    np_t = np.float32 if dtype == "f32" else np.float64
    exe = ir.compile(ir.parse(DOT.format(m=m, k=k, n=nn, t=dtype)), "llvm-cpu", cache=False)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np_t)
    b = rng.standard_normal((k, nn)).astype(np_t)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-4 if dtype == "f32" else 1e-10
    for name, x, y in (("nn", a, b), ("tt", a.T.copy(), b.T.copy()),
                       ("tn", a.T.copy(), b), ("nt", a, b.T.copy())):
        got = exe[name](x, y)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k, err_msg=name)


def gemv_wrapper(routine: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """The pool's dlvm_?gemv, callable: cblas_?gemv's row-major signature, i64 sizes."""
    ft = ctypes.c_float if routine == "sgemv" else ctypes.c_double
    i32, i64_, p = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    proto = ctypes.CFUNCTYPE(None, i32, i32, i64_, i64_, ft, p, i64_, p, i64_, ft, p, i64_)
    return proto(pool.blas_addresses()[routine])


@pytest.mark.skipif(not blas.available(), reason="numpy brings no OpenBLAS")
@pytest.mark.parametrize("shape", [(517, 300), (300, 517), (1000, 141)])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("strategy", ["pool", "openblas"])
def test_gemvs_split_over_the_pool_agree_with_numpy(shape: tuple[int, int], trans: bool,
                                                     dtype: str, n: int, strategy: str) -> None:
    """y = αop(A)x + βy with a padded lda, x and y strided, sizes not multiples of a block."""
    rows, cols = shape
    assert rows * cols >= pool.GEMV_MIN  # large enough to split
    assert (cols if trans else rows) % pool.GEMV_BLOCK != 0  # a short last piece
    threads.set_num_threads(n)
    blas.set_gemm_strategy(strategy)
    np_t = np.float32 if dtype == "f32" else np.float64
    rng = np.random.default_rng(2)
    lda = cols + 7
    store = rng.standard_normal((rows, lda)).astype(np_t)
    a = store[:, :cols]
    xs = rng.standard_normal(2 * (rows if trans else cols)).astype(np_t)
    ys = rng.standard_normal(3 * (cols if trans else rows)).astype(np_t)
    before = ys.copy()
    x, y0 = xs[::2], ys[::3].copy()
    alpha, beta = 0.75, -1.25
    op = a.T if trans else a
    want = alpha * (op.astype(np.float64) @ x.astype(np.float64)) + beta * y0
    gemv = gemv_wrapper("sgemv" if dtype == "f32" else "dgemv")
    try:
        gemv(blas.ROW_MAJOR, blas.TRANS if trans else blas.NO_TRANS, rows, cols, alpha,
             store.ctypes.data, lda, xs.ctypes.data, 2, beta, ys.ctypes.data, 3)
    finally:
        blas.set_gemm_strategy("pool")
    tol = 1e-4 if dtype == "f32" else 1e-10
    np.testing.assert_allclose(ys[::3], want, rtol=tol, atol=tol * rows)
    between = np.ones(ys.size, bool)  # the elements between y's stay as they were
    between[::3] = False
    np.testing.assert_array_equal(ys[between], before[between])


MLP = """
module "mlp"
stage raw

func @predict: (<784 x 512 x {t}>, <512 x {t}>, <512 x 512 x {t}>, <512 x {t}>,
                <512 x 10 x {t}>, <10 x {t}>, <1 x 784 x {t}>) -> <1 x 10 x {t}> {{
'entry(%w1: <784 x 512 x {t}>, %b1: <512 x {t}>, %w2: <512 x 512 x {t}>, %b2: <512 x {t}>,
       %w3: <512 x 10 x {t}>, %b3: <10 x {t}>, %x: <1 x 784 x {t}>):
    %z0 = dot %x: <1 x 784 x {t}>, %w1: <784 x 512 x {t}>
    %c0 = padShape %b1: <512 x {t}> at 0
    %a0 = add %z0: <1 x 512 x {t}>, %c0: <1 x 512 x {t}>
    %h0 = tanh %a0: <1 x 512 x {t}>
    %z1 = dot %h0: <1 x 512 x {t}>, %w2: <512 x 512 x {t}>
    %c1 = padShape %b2: <512 x {t}> at 0
    %a1 = add %z1: <1 x 512 x {t}>, %c1: <1 x 512 x {t}>
    %h1 = tanh %a1: <1 x 512 x {t}>
    %z2 = dot %h1: <1 x 512 x {t}>, %w3: <512 x 10 x {t}>
    %c2 = padShape %b3: <10 x {t}> at 0
    %a2 = add %z2: <1 x 10 x {t}>, %c2: <1 x 10 x {t}>
    return %a2: <1 x 10 x {t}>
}}

func @column: (<512 x 784 x {t}>, <784 x 1 x {t}>) -> <512 x 1 x {t}> {{
'entry(%w: <512 x 784 x {t}>, %x: <784 x 1 x {t}>):
    %y = dot %w: <512 x 784 x {t}>, %x: <784 x 1 x {t}>
    return %y: <512 x 1 x {t}>
}}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [1, 2])
def test_batch_one_mlp_on_llvm_cpu_equals_the_interpreter(dtype: str, n: int) -> None:
    """Batch-1 inference: every layer a GEMV (the first two large enough to split), and a
    matrix times a column (the untransposed GEMV)."""
    assert pool.GEMV_MIN <= 512 * 512
    threads.set_num_threads(n)
    np_t = np.float32 if dtype == "f32" else np.float64
    module = ir.parse(MLP.format(t=dtype))
    exe = ir.compile(module, "llvm-cpu", cache=False)
    oracle = ir.compile(module, "interp")
    rng = np.random.default_rng(3)
    params = [rng.standard_normal(s).astype(np_t) * 0.05
              for s in ((784, 512), (512,), (512, 512), (512,), (512, 10), (10,))]
    x = rng.standard_normal((1, 784)).astype(np_t)
    tol = 1e-5 if dtype == "f32" else 1e-12
    for _ in range(3):  # the pool's workers warm and asleep alike
        np.testing.assert_allclose(exe.call("predict", *params, x), oracle.call("predict", *params, x),
                                   rtol=tol, atol=tol)
    w = rng.standard_normal((512, 784)).astype(np_t)
    col = rng.standard_normal((784, 1)).astype(np_t)
    np.testing.assert_allclose(exe.call("column", w, col), oracle.call("column", w, col),
                               rtol=tol * 10, atol=tol * 10)
