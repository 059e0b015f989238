"""The host emulation of a GPU: launch plans run on the CPU, kernels compiled for the CPU.

A machine without a GPU still runs the `nvptx` target's launch plans — the same regions,
the same kernel generator with its index arithmetic and grid-stride loops, the same memory
pool and scheduling of launches — with the block and thread indices as loop variables
(`HostFlavour`), so CI tests everything but the PTX itself (which `ptxas` checks) and the
driver calls. Reductions use their barrier-free form. Device memory is host memory, so
arrays export to numpy through DLPack without a copy.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from dlvm.llvm.codegen import jit

from .device import Buffer, Device, DeviceArray, KernelArg, PreparedLaunch, size_class

_GRID = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class HostDevice(Device):
    name = "host emulation"
    arch = "host"

    def __init__(self) -> None:
        self.blocks: dict[int, np.ndarray] = {}  # address → the memory behind it
        self.free: dict[int, list[int]] = {}
        self.engine = jit.Engine()
        self.loaded: dict[str, dict[str, Any]] = {}
        self.launches = 0  # counted, for tests and statistics

    # ------------------------------------------------------------ memory

    def allocate(self, nbytes: int) -> Buffer:
        size = size_class(nbytes)
        free = self.free.get(size)
        if free:
            return Buffer(self, free.pop(), size)
        raw = np.zeros(size + 64, np.uint8)
        ptr = raw.ctypes.data
        ptr += (-ptr) % 64  # aligned as device memory is
        self.blocks[ptr] = raw
        return Buffer(self, ptr, size)

    def release(self, ptr: int, nbytes: int) -> None:
        self.free.setdefault(nbytes, []).append(ptr)

    def upload(self, array: np.ndarray) -> DeviceArray:
        a = np.asarray(array, order="C")
        out = self.empty(a.shape, a.dtype)
        if a.nbytes:
            ctypes.memmove(out.ptr, a.ctypes.data, a.nbytes)
        return out

    def download(self, array: DeviceArray) -> np.ndarray:
        out = np.empty(array.shape, array.dtype)
        if out.nbytes:
            ctypes.memmove(out.ctypes.data, array.ptr, out.nbytes)
        return out

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def fill_zero(self, ptr: int, nbytes: int) -> None:
        ctypes.memset(ptr, 0, nbytes)

    # ------------------------------------------------------------ code

    def load(self, code: Any, kernels: list[str]) -> dict[str, Any]:
        text = str(code)
        found = self.loaded.get(text)
        if found is None:
            self.engine.load(jit.emit(text, "obj"))  # type: ignore[arg-type]
            found = self.loaded[text] = {
                k: _GRID(self.engine.address(k + ".grid")) for k in kernels}
        return found

    def launch(self, kernel: Any, grid: int, block: int, shared: int,
               args: list[KernelArg]) -> None:
        slots = (ctypes.c_int64 * max(len(args), 1))()
        base = ctypes.addressof(slots)
        for k, a in enumerate(args):
            a.ctype.from_address(base + 8 * k).value = a.value
        kernel(base, grid, block)
        self.launches += 1

    def prepare_launch(self, kernel: Any, grid: int, block: int, shared: int,
                       args: list[KernelArg]) -> PreparedLaunch:
        slots = (ctypes.c_int64 * max(len(args), 1))()
        base = ctypes.addressof(slots)
        cells = []
        for k, a in enumerate(args):
            cell = a.ctype.from_address(base + 8 * k)
            cell.value = a.value
            cells.append(cell)

        def run() -> None:
            kernel(base, grid, block)
            self.launches += 1

        return PreparedLaunch(run, cells, slots)

    def capture_graph(self, issue: Callable[[], None]) -> Any:
        """A stand-in for a CUDA graph, so that replays take the same path here as on a
        GPU: launching it issues the captured work again (a replay's launches keep the
        addresses they had when captured, as a graph's nodes do)."""
        return EmulatedGraph(issue)

    def synchronize(self) -> None:
        """Launches run to completion when called: nothing to wait for."""


class EmulatedGraph:
    def __init__(self, issue: Callable[[], None]) -> None:
        self.launch = issue
