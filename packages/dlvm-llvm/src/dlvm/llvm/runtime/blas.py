"""Finding an optimized BLAS for `dot`: the OpenBLAS that numpy's wheel carries.

numpy is a dependency already, and its wheels ship OpenBLAS built for every x86-64 and
AArch64 generation (DYNAMIC_ARCH) with a 64-bit integer interface and prefixed symbols
(`scipy_cblas_sgemm64_`). Using the library numpy has loaded means one BLAS and one thread
pool in the process: no second copy, no oversubscription between numpy and DLVM.

Compiled code calls `dlvm_sgemm`, `dlvm_dgemm` and, for a product with a single row or
column, `dlvm_sgemv` / `dlvm_dgemv` (CBLAS row-major signatures with i64 sizes; OpenBLAS's
gemm is several times slower than its gemv on one row); `pool.register_symbols` points those
names before code is loaded, all four at the thread pool's wrappers (`pool.py`), which split
a large product over the process's thread budget with OpenBLAS on one thread. Where numpy
brings no such library (a numpy built against another BLAS), `dot` runs a generated loop
nest, and `available()` says so.

`limit_threads` gives OpenBLAS its share of the budget through threadpoolctl: one thread
while DLVM's pool splits GEMMs (the default, "pool"), the whole budget when OpenBLAS does
("openblas", `set_gemm_strategy`). Either way numpy's own products in this process run with
that many threads too: there is one OpenBLAS in the process, and one owner of the cores.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


@dataclass(frozen=True)
class Blas:
    path: str
    sgemm: int
    dgemm: int
    sgemv: int
    dgemv: int
    set_threads: ctypes._CFuncPtr | None  # type: ignore[name-defined]
    get_threads: ctypes._CFuncPtr | None  # type: ignore[name-defined]


def candidates() -> list[str]:
    import numpy

    root = os.path.dirname(os.path.dirname(numpy.__file__))
    found = []
    for folder in ("numpy.libs", os.path.join("numpy", ".dylibs"), "numpy/.libs"):
        found += sorted(glob.glob(os.path.join(root, folder, "*openblas64*")))
    return found


@cache
def find() -> Blas | None:
    """numpy's ILP64 OpenBLAS, or None."""
    for path in candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_", "64_"), ("", "64_"), ("", "")):
            try:
                routines = [getattr(lib, f"{prefix}cblas_{r}{suffix}")
                            for r in ("sgemm", "dgemm", "sgemv", "dgemv")]
            except AttributeError:
                continue
            set_threads = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            get_threads = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            if get_threads is not None:
                get_threads.restype = ctypes.c_int
            if set_threads is not None:
                set_threads.argtypes = [ctypes.c_int]
            sgemm, dgemm, sgemv, dgemv = (ctypes.cast(r, ctypes.c_void_p).value or 0
                                          for r in routines)
            return Blas(path, sgemm, dgemm, sgemv, dgemv, set_threads, get_threads)
    return None


def available() -> bool:
    return find() is not None


STRATEGIES = ("pool", "openblas")
_strategy = "pool"
# told when the strategy changes (`threads` re-applies the budget: both shares change)
on_strategy_change: list[Callable[[], None]] = []


def gemm_strategy() -> str:
    return _strategy


def set_gemm_strategy(strategy: str) -> None:
    """Who runs a large GEMM on several threads: "pool" (DLVM's pool splits it, OpenBLAS
    on one thread; the default) or "openblas" (OpenBLAS's own threads, the budget's worth).
    For measuring one against the other; see `pool.py`."""
    global _strategy
    if strategy not in STRATEGIES:
        raise ValueError(f"GEMM strategy must be one of {', '.join(STRATEGIES)}, found "
                         f"{strategy!r}")
    _strategy = strategy
    for listener in on_strategy_change:
        listener()


@cache
def _controllers() -> list[Any]:
    """threadpoolctl's controllers of numpy's OpenBLAS (scanning the loaded libraries costs
    ~0.2 ms: done once)."""
    blas = find()
    if blas is None:
        return []
    from threadpoolctl import ThreadpoolController

    found = ThreadpoolController().select(user_api="blas").lib_controllers
    mine = os.path.realpath(blas.path)
    return [c for c in found if os.path.realpath(c.filepath) == mine]


def blas_threads(budget: int) -> int:
    """OpenBLAS's share of a budget under the current strategy."""
    return budget if _strategy == "openblas" else 1


def limit_threads(budget: int) -> None:
    """Set numpy's OpenBLAS to its share of `budget`. With the pthreads OpenBLAS,
    threadpoolctl lets only one thread set limits; giving that up at once lets the next
    call come from any thread."""
    for controller in _controllers():
        controller.set_num_threads(blas_threads(budget))
        clear = getattr(type(controller), "clear_controlling_thread", None)
        if clear is not None:
            clear(force=True)


def current_threads() -> int | None:
    """OpenBLAS's thread count now, or None without it."""
    found = _controllers()
    return found[0].get_num_threads() if found else None


def describe() -> str:
    blas = find()
    return f"OpenBLAS from numpy ({os.path.basename(blas.path)})" if blas else \
        "none found: dot runs a generated loop nest"
