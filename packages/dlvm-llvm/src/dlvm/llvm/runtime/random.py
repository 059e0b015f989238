"""`random`: numpy's generator, called back from native code.

The interpreter draws `random` tensors from `numpy.random.default_rng(seed)`; compiled code
calls back into Python for them, so that both targets draw the same numbers from the same
seed. `random` is not a hot path of any model (initialization happens once), and the values
of a program must not depend on the target that runs it.
"""

from __future__ import annotations

import ctypes
import itertools
import weakref
from typing import Any

import llvmlite.binding as llvm
import numpy as np

# int dlvm_random(i64 generator, ptr out, i64 count, i64 dtype code, double lo, double hi)
RANDOM = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_double, ctypes.c_double)
DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.bool_]
_generators: dict[int, np.random.Generator] = {}
_ids = itertools.count(1)


def dtype_code(dtype: Any) -> int:
    return [np.dtype(d) for d in DTYPES].index(np.dtype(dtype))


def _draw(generator: int, out: int, count: int, code: int, lo: float, hi: float) -> int:
    """Fill `count` elements at `out`; 1 if the generator is gone, 2 if numpy refuses."""
    rng = _generators.get(generator)
    if rng is None:
        return 1
    dtype = np.dtype(DTYPES[code])
    try:
        if dtype.kind == "f":
            values = rng.uniform(lo, hi, size=count)
        else:
            values = rng.integers(int(lo), int(hi), size=count, endpoint=False)
    except (ValueError, OverflowError):
        return 2
    if count:
        target = np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(out),
                               dtype)
        target[:] = values.astype(dtype)
    return 0


_callback = RANDOM(_draw)
llvm.add_symbol("dlvm_random", ctypes.cast(_callback, ctypes.c_void_p).value or 0)


def register_generator(owner: object, seed: int) -> int:
    """A generator for `owner` (an executable), forgotten when it is."""
    n = next(_ids)
    _generators[n] = np.random.default_rng(seed)
    weakref.finalize(owner, _generators.pop, n, None)
    return n
