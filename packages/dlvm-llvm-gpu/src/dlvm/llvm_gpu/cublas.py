"""cuBLAS through ctypes: the GEMM behind `dot` on an NVIDIA GPU.

cuda-bindings has no cuBLAS module, and nvmath-python would be one more dependency for two
functions, so the library (the `nvidia-cublas` wheel, found by cuda-pathfinder, or a system
CUDA install) is bound here directly. Only the classic `_v2` API is used: alpha and beta are
host pointers (the default pointer mode) and every call is ordered on the stream the handle
is bound to.

cuBLAS is column-major. A row-major matrix with leading dimension `ld` is, in the same
memory, the column-major transpose, so row-major C = op(A)·op(B) is computed as the
column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands swap places and m and n swap roles.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

import numpy as np

from dlvm.ir.runtime import BFLOAT16

from .device import GPUError

OP_N, OP_T = 0, 1  # cublasOperation_t

STATUS_NAMES = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}

_P = ctypes.c_void_p
_I = ctypes.c_int
_LL = ctypes.c_longlong
_BATCHED_ARGS = [_P, _I, _I, _I, _I, _I, _P, _P, _I, _LL, _P, _I, _LL, _P, _P, _I, _LL, _I]

_SIGNATURES: dict[str, list[Any]] = {
    "cublasCreate_v2": [ctypes.POINTER(ctypes.c_void_p)],
    "cublasDestroy_v2": [_P],
    "cublasSetStream_v2": [_P, _P],
    "cublasSetWorkspace_v2": [_P, _P, ctypes.c_size_t],
    "cublasSetMathMode": [_P, _I],
    "cublasGemmStridedBatchedEx": [_P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _LL, _P, _I, _I, _LL,
                                   _P, _P, _I, _I, _LL, _I, _I, _I],
    "cublasSgemmStridedBatched": _BATCHED_ARGS,
    "cublasDgemmStridedBatched": _BATCHED_ARGS,
}

# dtype -> (scalar ctypes type for alpha/beta, strided batched gemm symbol)
_ROUTINES: dict[np.dtype[Any], tuple[type, str]] = {
    np.dtype(np.float32): (ctypes.c_float, "cublasSgemmStridedBatched"),
    np.dtype(np.float64): (ctypes.c_double, "cublasDgemmStridedBatched"),
}


# cublasMath_t: the default, and TF32 tensor-core math for float32 GEMMs
DEFAULT_MATH, TF32_TENSOR_OP_MATH = 0, 3
CUDA_R_16F, CUDA_R_32F, CUDA_R_16BF = 2, 0, 14  # cudaDataType
COMPUTE_32F = 68  # cublasComputeType_t: accumulate in float32
GEMM_DEFAULT = -1  # cublasGemmAlgo_t


# the 16-bit types GemmEx takes: their cudaDataType and name
_HALVES = {np.dtype(np.float16): CUDA_R_16F, BFLOAT16: CUDA_R_16BF}
HALF_NAMES = {CUDA_R_16F: "f16", CUDA_R_16BF: "bf16"}
UNSUPPORTED = (8, 15)  # ARCH_MISMATCH, NOT_SUPPORTED: the caller launches its own kernel


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status, f"cuBLAS status {status}")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise GPUError(f"{what}: {status_name(status)}")


class Cublas:
    """The loaded library and one handle, created on first use (it needs a current CUDA
    context) and bound to one stream."""

    def __init__(self, lib: ctypes.CDLL, path: str) -> None:
        self.lib = lib
        self.path = path
        self._handle: int | None = None
        self._stream: int | None = None

    def handle(self) -> int:
        if self._handle is None:
            out = ctypes.c_void_p()
            _check(self.lib.cublasCreate_v2(ctypes.byref(out)), "cublasCreate_v2")
            self._handle = out.value or 0
        return self._handle

    def bind(self, stream: int) -> None:
        """Order every later call on `stream` (a raw CUstream address)."""
        if self._stream != stream:
            _check(self.lib.cublasSetStream_v2(self.handle(), stream or None),
                   "cublasSetStream_v2")
            self._stream = stream

    def set_workspace(self, ptr: int, nbytes: int) -> None:
        """Give cuBLAS its workspace (256-byte aligned device memory that outlives every
        graph that captured a call): without one it allocates per call, which a CUDA graph
        capture would record as memory nodes. `bind` resets it, so call this after."""
        _check(self.lib.cublasSetWorkspace_v2(self.handle(), ptr, nbytes),
               "cublasSetWorkspace_v2")

    def close(self) -> None:
        """Destroy the handle (the context it was created in must still be alive)."""
        if self._handle is not None:
            handle, self._handle, self._stream = self._handle, None, None
            _check(self.lib.cublasDestroy_v2(handle), "cublasDestroy_v2")

    @staticmethod
    def supports(dtype: Any) -> bool:
        """f32 and f64 (TF32 tensor cores for f32 only on request: they round the
        products); f16 and bf16 through `GemmEx`, f32 sums, tensor cores where the GPU has
        them."""
        dtype = np.dtype(dtype)
        return dtype in _ROUTINES or dtype in _HALVES

    def use_tensor_cores(self, on: bool) -> None:
        """TF32 tensor-core math for float32 GEMMs (10-bit mantissas in the products,
        float32 sums), or the default full-precision math."""
        _check(self.lib.cublasSetMathMode(self.handle(), TF32_TENSOR_OP_MATH if on else
                                          DEFAULT_MATH), "cublasSetMathMode")

    def gemm(self, dtype: Any, trans_a: bool, trans_b: bool, m: int, n: int, k: int,
             a: int, lda: int, b: int, ldb: int, c: int, ldc: int, batch: int = 1,
             alpha: float = 1.0, beta: float = 0.0) -> bool:
        """`batch` row-major products C(m×n) = alpha·op(A)·op(B) + beta·C on device
        addresses, each operand's matrices stored one after another; False when cuBLAS has
        no routine for `dtype`. One strided-batched call serves every batch size."""
        half = _HALVES.get(np.dtype(dtype))
        if half is not None:  # tensor cores: 16-bit products, float32 sums
            return self.gemm_half(half, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                                  batch, alpha, beta)
        routine = _ROUTINES.get(np.dtype(dtype))
        if routine is None:
            return False
        scalar, name = routine
        one, zero = scalar(alpha), scalar(beta)
        # cuBLAS is column-major: Cᵀ = op(B)ᵀ·op(A)ᵀ, so B comes first
        status = getattr(self.lib, name)(
            self.handle(), OP_T if trans_b else OP_N, OP_T if trans_a else OP_N, n, m, k,
            ctypes.byref(one), b, ldb, k * n, a, lda, m * k, ctypes.byref(zero),
            c, ldc, m * n, batch)
        _check(status, f"{name}(m={m}, n={n}, k={k}, batch={batch})")
        return True


    def gemm_half(self, data_type: int, trans_a: bool, trans_b: bool, m: int, n: int,
                  k: int, a: int, lda: int, b: int, ldb: int, c: int, ldc: int, batch: int,
                  alpha: float, beta: float) -> bool:
        """`gemm` on f16 or bf16 (`data_type`) through `GemmEx`, summing in f32; False
        where the GPU has no such routine (bf16 before sm_80)."""
        one, zero = ctypes.c_float(alpha), ctypes.c_float(beta)
        status = self.lib.cublasGemmStridedBatchedEx(
            self.handle(), OP_T if trans_b else OP_N, OP_T if trans_a else OP_N, n, m, k,
            ctypes.byref(one), b, data_type, ldb, k * n, a, data_type, lda, m * k,
            ctypes.byref(zero), c, data_type, ldc, m * n, batch, COMPUTE_32F, GEMM_DEFAULT)
        if status in UNSUPPORTED:
            return False
        _check(status, f"cublasGemmStridedBatchedEx({HALF_NAMES[data_type]}, m={m}, n={n}, "
                       f"k={k}, batch={batch})")
        return True


_LIBRARY: tuple[ctypes.CDLL, str] | None = None
_REASON = ""


def _open() -> tuple[ctypes.CDLL, str]:
    """The library from the nvidia-cublas wheel (or wherever cuda-pathfinder finds it),
    else from the system's search path."""
    errors = []
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        loaded = load_nvidia_dynamic_lib("cublas")
        if loaded.abs_path:
            return ctypes.CDLL(loaded.abs_path), loaded.abs_path
        # loaded earlier by someone else under a path it cannot tell: reuse the handle
        return ctypes.CDLL("libcublas", handle=loaded._handle_uint), "libcublas (preloaded)"
    except (ImportError, RuntimeError, OSError) as exc:
        errors.append(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
    name = ctypes.util.find_library("cublas")
    if name is not None:
        try:
            return ctypes.CDLL(name), name
        except OSError as exc:
            errors.append(str(exc))
    else:
        errors.append("not on the system library path")
    raise OSError("; ".join(errors))


def load() -> Cublas | None:
    """A `Cublas` with its own (not yet created) handle, or None when the library cannot
    be loaded: `reason()` then says why."""
    global _LIBRARY, _REASON
    if _LIBRARY is None and not _REASON:
        try:
            lib, path = _open()
            for symbol, argtypes in _SIGNATURES.items():
                function = getattr(lib, symbol)
                function.argtypes = argtypes
                function.restype = ctypes.c_int
            _LIBRARY = (lib, path)
        except (OSError, AttributeError) as exc:
            _REASON = f"cuBLAS cannot be loaded: {exc}"
    if _LIBRARY is None:
        return None
    return Cublas(*_LIBRARY)


def reason() -> str:
    """Why `load()` returns None ("" when it does not, or before the first `load()`)."""
    return _REASON
