"""Finding an optimized BLAS for `dot`: the OpenBLAS that numpy's wheel carries.

numpy is a dependency already, and its wheels ship OpenBLAS built for every x86-64 and
AArch64 generation (DYNAMIC_ARCH) with a 64-bit integer interface and prefixed symbols
(`scipy_cblas_sgemm64_`). Using the library numpy has loaded means one BLAS and one thread
pool in the process: no second copy, no oversubscription between numpy and DLVM.

Compiled code calls `dlvm_sgemm`, `dlvm_dgemm` and, for a product with a single row or
column, `dlvm_sgemv` / `dlvm_dgemv` (CBLAS row-major signatures with i64 sizes; OpenBLAS's
gemm is several times slower than its gemv on one row); `register_symbols` points those
names at the library before code is loaded. Where numpy
brings no such library (a numpy built against another BLAS), `dot` runs a generated loop
nest, and `available()` says so.
"""

from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass
from functools import cache

import llvmlite.binding as llvm

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


def register_symbols() -> bool:
    """Make `dlvm_sgemm`/`dlvm_dgemm` resolvable by the JIT; False without a BLAS."""
    blas = find()
    if blas is None:
        return False
    for name in ("sgemm", "dgemm", "sgemv", "dgemv"):
        llvm.add_symbol(f"dlvm_{name}", getattr(blas, name))
    return True


def describe() -> str:
    blas = find()
    return f"OpenBLAS from numpy ({os.path.basename(blas.path)})" if blas else \
        "none found: dot runs a generated loop nest"
