"""What a launch plan runs on: device memory, kernel modules, launches, GEMM.

Two devices implement `Device`: `CudaDevice` (`cuda.py`: an NVIDIA GPU through
cuda-python's driver API, cuBLAS for `dot`) and `HostDevice` (`emulate.py`: the same
kernels compiled for the CPU, block and thread indices as loop variables, so that a machine
without a GPU runs and tests every launch plan).

Memory is handed out as `Buffer`s from the device's pool (size classes, reused when a
buffer's last Python reference goes); a `DeviceArray` is a shaped, typed view of one.
"""

from __future__ import annotations

import contextlib
import ctypes
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlvm.ir.runtime import BFLOAT16


class GPUError(RuntimeError):
    """A failure of the GPU runtime (driver, launch, memory), with the driver's words."""


@dataclass(frozen=True)
class KernelArg:
    """One launch argument: a device address or a scalar, with its C type."""

    ctype: type  # ctypes.c_void_p for addresses, c_int64 / c_float / … for scalars
    value: int | float
    source: int = -1  # for a scalar: the call's argument it is (when recording), else -1
    dtype: str = ""  # for a scalar: its data type (numpy's name)


@dataclass
class PreparedLaunch:
    """A launch with its parameters packed once: `run()` issues it; `cells[i].value = x`
    changes argument i for the launches after (replays patch addresses this way)."""

    run: Callable[[], None]
    cells: list[Any]
    keep: Any = None  # the storage the cells live in


class Buffer:
    """A piece of device memory; back to its device's pool when the last reference goes."""

    __slots__ = ("__weakref__", "device", "nbytes", "ptr")

    def __init__(self, device: Device, ptr: int, nbytes: int) -> None:
        self.device = device
        self.ptr = ptr
        self.nbytes = nbytes

    def __del__(self) -> None:
        device = getattr(self, "device", None)
        if device is not None and self.ptr:
            with contextlib.suppress(Exception):  # a pool at interpreter exit may be gone
                device.release(self.ptr, self.nbytes)


class DeviceArray:
    """A C-contiguous array in device memory: `shape`, `dtype`, and the `buffer` holding it
    (at `offset` bytes). `.numpy()` copies it to the host; `__dlpack__` shares it."""

    __slots__ = ("buffer", "dtype", "offset", "shape")

    def __init__(self, buffer: Buffer, shape: tuple[int, ...], dtype: np.dtype[Any],
                 offset: int = 0) -> None:
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.offset = offset

    @property
    def ptr(self) -> int:
        return self.buffer.ptr + self.offset

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> Device:
        return self.buffer.device

    def numpy(self) -> np.ndarray:
        device = self.buffer.device
        if device.recorder is not None:  # a recorded call that reads device data
            device.recorder.fail("it reads device data on the host")
        return device.download(self)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def _scalar(self) -> np.ndarray:
        if self.shape:
            raise TypeError(f"only a scalar device array converts to a Python number, not one "
                            f"of shape {self.shape}")
        return self.numpy()

    def __bool__(self) -> bool:
        return bool(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __index__(self) -> int:
        return int(self._scalar())

    def __float__(self) -> float:
        return float(self._scalar())

    def reshape(self, shape: tuple[int, ...]) -> DeviceArray:
        """The same elements under another shape (no copy)."""
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape {self.shape} to {shape}")
        return DeviceArray(self.buffer, shape, self.dtype, self.offset)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.buffer.device.dlpack_device()

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        from .dlpack import export

        return export(self, stream=stream, max_version=max_version)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device.name})"


class Device(ABC):
    """A place where kernels run and arrays live."""

    name: str
    #: the GPU architecture kernels are compiled for ("sm_90"), or "host" for emulation
    arch: str
    #: the `replay.Recorder` of the call being recorded, which host reads make unreplayable
    recorder: Any = None

    # ------------------------------------------------------------ memory

    @abstractmethod
    def allocate(self, nbytes: int) -> Buffer:
        """At least `nbytes` of device memory (from the pool when one is free)."""

    @abstractmethod
    def release(self, ptr: int, nbytes: int) -> None:
        """Return memory to the pool (called by `Buffer` when it dies)."""

    @abstractmethod
    def upload(self, array: np.ndarray) -> DeviceArray:
        """A device copy of a host array."""

    @abstractmethod
    def download(self, array: DeviceArray) -> np.ndarray:
        """A host copy of a device array (waits for the work that writes it)."""

    @abstractmethod
    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device-to-device copy of `nbytes` between addresses."""

    @abstractmethod
    def fill_zero(self, ptr: int, nbytes: int) -> None:
        """Set `nbytes` at `ptr` to zero bytes."""

    def empty(self, shape: tuple[int, ...], dtype: Any) -> DeviceArray:
        dtype = np.dtype(dtype)
        nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
        return DeviceArray(self.allocate(nbytes), shape, dtype)

    # ------------------------------------------------------------ code

    @abstractmethod
    def load(self, code: Any, kernels: list[str]) -> dict[str, Any]:
        """Load compiled code (PTX text on a GPU, an LLVM module's text on the host) and
        return a handle for each named kernel."""

    @abstractmethod
    def launch(self, kernel: Any, grid: int, block: int, shared: int,
               args: list[KernelArg]) -> None:
        """Run `kernel` on a 1-D grid of `grid` blocks of `block` threads (asynchronously
        on a GPU: errors of the kernel itself show at the next synchronization)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for every launch and copy issued so far, then run the deferred checks."""

    def prepare_launch(self, kernel: Any, grid: int, block: int, shared: int,
                       args: list[KernelArg]) -> PreparedLaunch:
        """`launch` with the parameters packed once, to be issued many times (devices pack
        them in their own form; this generic one repacks on each launch)."""
        cells = [a.ctype(a.value) for a in args]

        def run() -> None:
            self.launch(kernel, grid, block, shared,
                        [KernelArg(type(c), c.value) for c in cells])

        return PreparedLaunch(run, cells)

    def make_current(self) -> None:  # noqa: B027 (most devices have nothing to do)
        """Make the device usable from the calling thread (a GPU's context)."""

    def capture_graph(self, issue: Callable[[], None]) -> Any:
        """The work `issue()` issues, captured: an object whose `launch()` issues it all
        again in one call; None where the device has no such thing (replays then issue
        their launches one by one)."""
        return None

    # ------------------------------------------------------------ error words

    def check_status(self, buffer: Buffer, on_error: Callable[[int], Exception]) -> None:
        """Read the int32 error word at `buffer` now (a synchronization on a GPU) and raise
        `on_error(word)` when it is not zero."""
        word = int(self.download(DeviceArray(buffer, (), np.dtype(np.int32))))
        if word:
            raise on_error(word)

    def defer_check(self, buffer: Buffer, on_error: Callable[[int], Exception]) -> None:
        """`check_status` when the device next synchronizes (at the latest when results
        come back); at once where launches run to completion as they are issued."""
        self.check_status(buffer, on_error)

    # ------------------------------------------------------------ libraries

    def gemm(self, dtype: np.dtype[Any], trans_a: bool, trans_b: bool, m: int, n: int,
             k: int, a: int, lda: int, b: int, ldb: int, c: int, ldc: int,
             batch: int = 1) -> bool:
        """`batch` row-major products C(m×n) = op(A)·op(B) on addresses (each operand's
        matrices one after another), when the device has a GEMM library for `dtype` (True),
        else False so that the caller launches a generated kernel."""
        return False

    def dlpack_device(self) -> tuple[int, int]:
        """The (device type, device id) pair of DLPack: (2, id) for CUDA, (1, 0) for CPU."""
        return (1, 0)


def c_type(dtype: np.dtype[Any]) -> type:
    """The ctypes type of a scalar launch argument of `dtype`."""
    return {
        np.dtype(np.bool_): ctypes.c_uint8, np.dtype(np.int8): ctypes.c_int8,
        np.dtype(np.int16): ctypes.c_int16, np.dtype(np.int32): ctypes.c_int32,
        np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint8): ctypes.c_uint8,
        np.dtype(np.float16): ctypes.c_uint16, BFLOAT16: ctypes.c_uint16,
        np.dtype(np.float32): ctypes.c_float,
        np.dtype(np.float64): ctypes.c_double,
    }[np.dtype(dtype)]


def size_class(nbytes: int) -> int:
    """The pool's size class of a request: powers of two from 256 bytes."""
    return max(256, 1 << (max(nbytes, 1) - 1).bit_length())
