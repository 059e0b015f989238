"""`CudaDevice`: an NVIDIA GPU through cuda-python's driver API.

The driver API (not the runtime API, not cuda.core) because it maps 1:1 onto the C API that
PTX modules and launches need, and it is stable across cuda-bindings releases. The device
works in the PRIMARY context, so torch and cupy in the same process share its memory, and
issues everything on one non-blocking stream of its own: kernels, copies and cuBLAS calls
are ordered among themselves, and memory returned to the pool can be reused by later work
on that stream without waiting.

cuda-bindings returns errors as values; `check` turns them into `GPUError`s carrying the
CUresult's name and the driver's description.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import threading
from typing import Any

import numpy as np

from . import cublas
from .device import (
    Buffer,
    Device,
    DeviceArray,
    GPUError,
    KernelArg,
    PreparedLaunch,
    size_class,
)

try:
    from cuda.bindings import driver as cu
except ImportError as _exc:  # the device is then unavailable; `available` says why
    cu = None
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None

_JIT_LOG_BYTES = 16384
WORKSPACE_BYTES = 32 << 20  # cuBLAS's workspace on sm_90 and later (an eighth before)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _describe(err: Any) -> str:
    """"CUDA_ERROR_X: description" for a CUresult."""
    name = getattr(err, "name", str(err))
    try:
        status, text = cu.cuGetErrorString(err)
        ok = status == cu.CUresult.CUDA_SUCCESS
        detail = text.decode(errors="replace") if ok and text else ""
    except Exception:  # the description is a nicety, the name suffices
        detail = ""
    return f"{name}: {detail}" if detail else name


def check(result: tuple[Any, ...], what: str) -> Any:
    """The outputs of a driver call (None, one value, or a tuple), or a GPUError naming the
    call, the CUresult and the driver's words."""
    err, *out = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise GPUError(f"{what}: {_describe(err)}")
    if not out:
        return None
    return out[0] if len(out) == 1 else tuple(out)


_AVAILABLE: dict[int, tuple[bool, str]] = {}


def _probe(ordinal: int) -> tuple[bool, str]:
    if cu is None:
        return False, f"cuda-bindings is not installed: {_one_line(str(_IMPORT_ERROR))}"
    try:
        (err,) = cu.cuInit(0)
    except RuntimeError as exc:  # cuda.pathfinder's DynamicLibNotFoundError: no libcuda
        return False, f"no NVIDIA driver: {_one_line(str(exc))}"
    if err != cu.CUresult.CUDA_SUCCESS:
        return False, f"cuInit failed: {_one_line(_describe(err))}"
    err, count = cu.cuDeviceGetCount()
    if err != cu.CUresult.CUDA_SUCCESS:
        return False, f"cuDeviceGetCount failed: {_one_line(_describe(err))}"
    if count == 0:
        return False, "no CUDA device: the driver found none"
    if not 0 <= ordinal < count:
        return False, f"no CUDA device {ordinal}: the driver found {count}"
    err, dev = cu.cuDeviceGet(ordinal)
    if err != cu.CUresult.CUDA_SUCCESS:
        return False, f"cuDeviceGet({ordinal}) failed: {_one_line(_describe(err))}"
    err, name = cu.cuDeviceGetName(256, dev)
    if err != cu.CUresult.CUDA_SUCCESS:
        return False, f"cuDeviceGetName failed: {_one_line(_describe(err))}"
    return True, name.split(b"\0", 1)[0].decode(errors="replace")


def available(ordinal: int = 0) -> tuple[bool, str]:
    """(True, device name) when CUDA device `ordinal` can be used, else (False, why in one
    line). Never raises, so that callers can choose a device (or skip tests) with it; the
    answer is cached, as it cannot change within a process."""
    if ordinal not in _AVAILABLE:
        try:
            answer = _probe(ordinal)
        except Exception as exc:  # promised never to raise
            answer = (False, f"CUDA probe failed: {type(exc).__name__}: {_one_line(str(exc))}")
        _AVAILABLE[ordinal] = answer
    return _AVAILABLE[ordinal]


class CudaDevice(Device):
    """One NVIDIA GPU: a memory pool of size classes, PTX modules, launches on one stream,
    and cuBLAS for GEMM."""

    def __init__(self, ordinal: int = 0, tensor_cores: bool = False) -> None:
        ok, why = available(ordinal)
        if not ok:
            raise GPUError(why)
        self.ordinal = ordinal
        self.tensor_cores = tensor_cores  # TF32 for f32 GEMMs (f16/bf16 always use GemmEx)
        self._device = check(cu.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
        self._context = check(cu.cuDevicePrimaryCtxRetain(self._device),
                              "cuDevicePrimaryCtxRetain")
        self._local = threading.local()
        self._make_current()
        self._stream = check(
            cu.cuStreamCreate(int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        name = check(cu.cuDeviceGetName(256, self._device), "cuDeviceGetName")
        self.name = name.split(b"\0", 1)[0].decode(errors="replace")
        major = self._attribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.arch = f"sm_{major}{minor}"
        self._free: dict[int, list[int]] = {}
        self._modules: dict[str, Any] = {}
        self._functions: dict[tuple[str, str], Any] = {}
        # host arrays whose asynchronous uploads may still read them
        self._pending: list[np.ndarray] = []
        # error words of replayed launches, read at the next synchronization
        self._checks: list[tuple[Buffer, Any]] = []
        self._blas: cublas.Cublas | None = None
        self._blas_workspace: Buffer | None = None
        self.blas_reason = ""

    def __repr__(self) -> str:
        return f"CudaDevice({self.ordinal}: {self.name}, {self.arch})"

    # ------------------------------------------------------------ context and stream

    def make_current(self) -> None:
        self._make_current()

    def _make_current(self) -> None:
        """Make the primary context current in the calling thread (once per thread: the
        driver keeps the current context per thread)."""
        if getattr(self._local, "current", False):
            return
        check(cu.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        self._local.current = True

    def _attribute(self, attribute: Any) -> int:
        return int(check(cu.cuDeviceGetAttribute(attribute, self._device),
                         f"cuDeviceGetAttribute({attribute.name})"))

    @property
    def stream_handle(self) -> int:
        """The raw CUstream address: the stream DLPack consumers and producers order on."""
        return int(self._stream)

    def dlpack_device(self) -> tuple[int, int]:
        return (2, self.ordinal)

    def synchronize(self) -> None:
        self._make_current()
        try:
            check(cu.cuStreamSynchronize(self._stream),
                  "cuStreamSynchronize (a kernel or copy issued earlier failed)")
        finally:
            self._pending.clear()
        checks, self._checks = self._checks, []
        for buffer, on_error in checks:  # every word is read; the first error is raised
            Device.check_status(self, buffer, on_error)

    def check_status(self, buffer: Buffer, on_error: Any) -> None:
        self.synchronize()  # the deferred checks first: their errors happened earlier
        Device.check_status(self, buffer, on_error)

    def defer_check(self, buffer: Buffer, on_error: Any) -> None:
        self._checks.append((buffer, on_error))

    # ------------------------------------------------------------ memory

    def _malloc(self, nbytes: int) -> int:
        try:
            return int(check(cu.cuMemAlloc(nbytes), f"cuMemAlloc({nbytes})"))
        except GPUError:
            # memory cached in the pool's free lists may be what is missing
            if not any(self._free.values()):
                raise
            self.trim()
            return int(check(cu.cuMemAlloc(nbytes), f"cuMemAlloc({nbytes})"))

    def allocate(self, nbytes: int) -> Buffer:
        size = size_class(nbytes)
        free = self._free.get(size)
        if free:
            return Buffer(self, free.pop(), size)
        self._make_current()
        return Buffer(self, self._malloc(size), size)

    def release(self, ptr: int, nbytes: int) -> None:
        # stream order makes reuse safe: later work on the stream runs after earlier work
        self._free.setdefault(size_class(nbytes), []).append(ptr)

    def trim(self) -> None:
        """Give the pool's free memory back to the driver (after the work that may still
        use it)."""
        self.synchronize()
        free, self._free = self._free, {}
        for pointers in free.values():
            for ptr in pointers:
                check(cu.cuMemFree(ptr), "cuMemFree")

    def upload(self, array: np.ndarray) -> DeviceArray:
        host = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        if host.dtype.hasobject:
            raise TypeError(f"cannot upload an array of {host.dtype} to a GPU")
        out = self.empty(host.shape, host.dtype)
        if host.nbytes:
            self._make_current()
            check(cu.cuMemcpyHtoDAsync(out.ptr, host.ctypes.data, host.nbytes, self._stream),
                  f"cuMemcpyHtoDAsync({host.nbytes} bytes)")
            self._pending.append(host)  # alive until the next synchronize
        return out

    def download(self, array: DeviceArray) -> np.ndarray:
        out = np.empty(array.shape, array.dtype)
        if out.nbytes:
            self._make_current()
            check(cu.cuMemcpyDtoHAsync(out.ctypes.data, array.ptr, out.nbytes, self._stream),
                  f"cuMemcpyDtoHAsync({out.nbytes} bytes)")
        self.synchronize()
        return out

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self._make_current()
            check(cu.cuMemcpyDtoDAsync(dst, src, nbytes, self._stream),
                  f"cuMemcpyDtoDAsync({nbytes} bytes)")

    def fill_zero(self, ptr: int, nbytes: int) -> None:
        if nbytes:
            self._make_current()
            check(cu.cuMemsetD8Async(ptr, 0, nbytes, self._stream),
                  f"cuMemsetD8Async({nbytes} bytes)")

    # ------------------------------------------------------------ code

    def load(self, code: str | bytes, kernels: list[str]) -> dict[str, Any]:
        """CUfunctions for `kernels` of a PTX text (or a cubin/fatbin as bytes). A module is
        loaded once per distinct text: the driver's JIT of PTX is the slow part."""
        image = code.encode() + b"\0" if isinstance(code, str) else bytes(code)
        key = hashlib.sha256(image).hexdigest()
        self._make_current()
        module = self._modules.get(key)
        if module is None:
            module = self._load_module(image)
            self._modules[key] = module
        out = {}
        for kernel in kernels:
            function = self._functions.get((key, kernel))
            if function is None:
                function = check(cu.cuModuleGetFunction(module, kernel.encode()),
                                 f"cuModuleGetFunction({kernel!r})")
                self._functions[key, kernel] = function
            out[kernel] = function
        return out

    def _load_module(self, image: bytes) -> Any:
        log = bytearray(_JIT_LOG_BYTES)
        options = [cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER,
                   cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        err, module = cu.cuModuleLoadDataEx(image, len(options), options, [log, len(log)])
        if err != cu.CUresult.CUDA_SUCCESS:
            text = bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip()
            message = f"cuModuleLoadDataEx ({self.arch}): {_describe(err)}"
            raise GPUError(f"{message}\nJIT log:\n{text}" if text else message)
        return module

    def launch(self, kernel: Any, grid: int, block: int, shared: int,
               args: list[KernelArg]) -> None:
        # kernelParams as `void**`: one pointer per argument, to storage of its C type; the
        # driver copies the values out before cuLaunchKernel returns
        if grid == 0:  # an empty tensor: nothing to run (the driver rejects a 0 grid)
            return
        storage = [arg.ctype(arg.value) for arg in args]
        params = (ctypes.c_void_p * max(len(storage), 1))(
            *[ctypes.addressof(value) for value in storage])
        self._make_current()
        check(cu.cuLaunchKernel(kernel, grid, 1, 1, block, 1, 1, shared, self._stream,
                                ctypes.addressof(params) if storage else None, 0),
              f"cuLaunchKernel(grid={grid}, block={block}, shared={shared})")

    def prepare_launch(self, kernel: Any, grid: int, block: int, shared: int,
                       args: list[KernelArg]) -> PreparedLaunch:
        storage = [arg.ctype(arg.value) for arg in args]
        params = (ctypes.c_void_p * max(len(storage), 1))(
            *[ctypes.addressof(value) for value in storage])
        address = ctypes.addressof(params) if storage else None
        stream, launch, success = self._stream, cu.cuLaunchKernel, cu.CUresult.CUDA_SUCCESS

        def run() -> None:
            if grid:
                (err,) = launch(kernel, grid, 1, 1, block, 1, 1, shared, stream, address, 0)
                if err != success:
                    raise GPUError(f"cuLaunchKernel(grid={grid}, block={block}): "
                                   f"{_describe(err)}")

        return PreparedLaunch(run, storage, params)

    # ------------------------------------------------------------ CUDA graphs

    def capture_graph(self, issue: Any) -> Any:
        """The work `issue()` puts on the stream, captured as an instantiated CUDA graph
        (thread-local capture mode; `issue` must not allocate, synchronize or read back).
        Raises GPUError when the driver refuses, leaving the stream usable."""
        self._make_current()
        self._cublas()  # its workspace must exist before the capture
        check(cu.cuStreamBeginCapture(
            self._stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture")
        try:
            issue()
        finally:
            err, graph = cu.cuStreamEndCapture(self._stream)
        if err != cu.CUresult.CUDA_SUCCESS or not int(graph):
            raise GPUError(f"cuStreamEndCapture: {_describe(err)}")
        try:
            return GraphExec(check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate"),
                             self._stream)
        finally:
            cu.cuGraphDestroy(graph)

    # ------------------------------------------------------------ libraries

    def gemm(self, dtype: np.dtype[Any], trans_a: bool, trans_b: bool, m: int, n: int,
             k: int, a: int, lda: int, b: int, ldb: int, c: int, ldc: int,
             batch: int = 1) -> bool:
        if not cublas.Cublas.supports(dtype):
            return False
        blas = self._cublas()
        if blas is None:
            return False
        self._make_current()
        return blas.gemm(dtype, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, batch)

    def _cublas(self) -> cublas.Cublas | None:
        """The handle bound to this device's stream, made on first use; None (and
        `blas_reason` says why) when cuBLAS cannot be loaded or initialised."""
        if self._blas is None and not self.blas_reason:
            blas = cublas.load()
            if blas is None:
                self.blas_reason = cublas.reason()
                return None
            self._make_current()
            try:
                blas.bind(self.stream_handle)
                major = int(self.arch.removeprefix("sm_")) // 10
                self._blas_workspace = self.allocate(WORKSPACE_BYTES if major >= 9 else
                                                     WORKSPACE_BYTES // 8)
                blas.set_workspace(self._blas_workspace.ptr, self._blas_workspace.nbytes)
                blas.use_tensor_cores(self.tensor_cores)
            except GPUError as exc:
                self.blas_reason = f"cuBLAS cannot be initialised: {exc}"
                return None
            self._blas = blas
        return self._blas


class GraphExec:
    """An instantiated CUDA graph, launched on the stream it was captured from, destroyed
    with its last reference."""

    def __init__(self, handle: Any, stream: Any) -> None:
        self.handle = handle
        self.stream = stream

    def launch(self) -> None:
        (err,) = cu.cuGraphLaunch(self.handle, self.stream)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise GPUError(f"cuGraphLaunch: {_describe(err)}")

    def __del__(self) -> None:
        if cu is not None:
            with contextlib.suppress(Exception):
                cu.cuGraphExecDestroy(self.handle)
