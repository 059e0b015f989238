"""Replayed launch lists: a call's device work recorded once, then issued without the IR.

The first call of a function with a given *signature* — the shapes and data types of its
array arguments, and the values of its host scalars (which decide branches and trip
counts) — walks the IR as every call did before (`plan.py`), through a `Recorder`: a
device that forwards each request and writes it down in terms of *slots* (the call's
inputs, the buffers it allocates, constants such as uploaded literals). If the walk was
a pure function of the signature, the recording becomes a `Replay`, and later calls with
that signature run it: inputs patched into pre-packed launch parameters, intermediates in
one arena allocated once, fresh buffers only for the results — one driver call per launch
and no Python per instruction (TinyJit's captured launches, numba's dispatcher keyed by
argument types).

A walk is not replayable, and its signature keeps walking, when it read device data on the
host (a branch on a computed value, a host instruction on a device array), used memory
that outlives the call (globals, boxes), or returned something
other than arrays and scalars. Replays check run-time errors (error words of kernels with
error sites) when results come back, not with a synchronization per launch.

On a GPU, a replay that has run twice is captured as a CUDA graph (`Replay.capture`);
`random` draws from a counter on the device, which the graph advances like any kernel.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .device import (
    Buffer,
    Device,
    DeviceArray,
    KernelArg,
    PreparedLaunch,
    size_class,
)

MAX_SIGNATURES = 16  # recordings kept per function; past that, new signatures walk
GRAPH_AFTER = 2  # replays issued launch by launch before the list is captured as a graph


class NotReplayable(Exception):
    """Why a walk cannot be replayed (it stays a walk)."""


# ---------------------------------------------------------------- signatures


def signature(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """The key of a call: array shapes and data types, the exact bits of host scalars;
    None when an argument is of a kind replays do not key on (a foreign array, an object),
    or when two device arrays share memory."""
    out: list[Any] = []
    buffers: list[int] = []
    if not _sign(args, out, buffers) or len(set(buffers)) != len(buffers):
        return None
    return tuple(out)


def split_scalars(key: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A signature without the values of its top-level scalar arguments (their kinds kept),
    and those values: a replay that only passes a scalar to kernels serves every value."""
    shapes, values = [], []
    for part in key:
        if isinstance(part, tuple) and len(part) == 3 and part[0] in ("0", "g"):
            shapes.append((part[0], part[1]))
            values.append(part[2])
        elif isinstance(part, tuple) and len(part) == 2 and part[0] in (bool, int, float):
            shapes.append((part[0],))
            values.append(part[1])
        else:
            shapes.append(part)
            values.append(None)
    return tuple(shapes), tuple(values)


class TracedScalar(np.ndarray):
    """A host scalar argument of the call being recorded. Passed to kernels (by identity:
    the plan asks `Recorder.scalar_index`), the replay patches it with each call's value;
    any other use of its value — arithmetic, a branch, a trip count, a result — makes the
    recording valid for that value only (`Recorder.keyed`)."""

    index: int
    recorder: Recorder

    def __array_finalize__(self, obj: Any) -> None:
        # a view numpy makes of it (a reshape, an index) stands for the same argument
        self.index = getattr(obj, "index", -1)
        self.recorder = getattr(obj, "recorder", None)  # type: ignore[assignment]

    def used(self) -> None:
        if self.recorder is not None:
            self.recorder.keyed.add(self.index)

    def plain(self) -> np.ndarray:
        return self.view(np.ndarray)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        self.used()
        inputs = tuple(x.plain() if isinstance(x, TracedScalar) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func not in SHAPE_FUNCTIONS:
            self.used()
        # numpy's own implementation (no second dispatch, also for one nested in a list)
        return super().__array_function__(func, types, args, kwargs)

    def __bool__(self) -> bool:
        self.used()
        return bool(self.plain())

    def __int__(self) -> int:
        self.used()
        return int(self.plain())

    def __float__(self) -> float:
        self.used()
        return float(self.plain())

    def __index__(self) -> int:
        self.used()
        return int(self.plain())

    def item(self, *args: Any) -> Any:
        self.used()
        return self.plain().item(*args)


SHAPE_FUNCTIONS = frozenset({np.ndim, np.shape, np.size})  # read no value


def _sign(args: Sequence[Any], out: list[Any], buffers: list[int]) -> bool:
    for a in args:
        t = type(a)
        if t is np.ndarray:
            out.append((a.shape, a.dtype.str) if a.ndim else ("0", a.dtype.str, a.tobytes()))
        elif t is DeviceArray:
            out.append(("d", a.shape, a.dtype.str))
            buffers.append(id(a.buffer))
        elif t is bool or t is int:
            out.append((t, a))
        elif t is float:
            out.append((t, a.hex()))
        elif isinstance(a, np.generic):
            out.append(("g", a.dtype.str, a.tobytes()))
        elif t is tuple or t is list:
            inner: list[Any] = []
            if not _sign(a, inner, buffers):
                return False
            out.append(tuple(inner))
        else:
            return False
    return True


def device_arrays(values: Any, out: list[DeviceArray]) -> list[DeviceArray]:
    """The device arrays in (nested tuples of) coerced arguments, in order."""
    if isinstance(values, DeviceArray):
        out.append(values)
    elif isinstance(values, tuple | list):
        for v in values:
            device_arrays(v, out)
    return out


# ---------------------------------------------------------------- recording


Ref = tuple[int, int]  # (slot, byte offset)
_POINTER = ctypes.c_void_p  # the C type of address arguments


@dataclass
class Slot:
    kind: str  # "input", "alloc" or "const"
    nbytes: int
    born: int = 0  # index of the first op after its allocation
    last: int = -1  # index of the last op that uses it
    keep: Any = None  # what holds a constant's memory
    checked: bool = False  # an error word


@dataclass
class Op:
    kind: str  # "launch", "gemm", "copy", "zero" or "check"
    args: tuple[Any, ...]


class Recorder(Device):
    """Forwards every request to `inner` and records it. Everything allocated while
    recording stays alive until the recording ends, so each address names one slot."""

    def __init__(self, inner: Device, inputs: list[DeviceArray],
                 constants: list[DeviceArray]) -> None:
        self.inner = inner
        self.name = inner.name
        self.arch = inner.arch
        self.slots: list[Slot] = []
        self.ops: list[Op] = []
        self.starts: list[int] = []  # sorted start addresses, with ends and slots beside
        self.spans: list[tuple[int, int, int]] = []
        self.held: list[Buffer] = []
        self.invalid = ""
        self.scalars: dict[int, TracedScalar] = {}  # top-level scalar arguments, by position
        self.keyed: set[int] = set()  # those whose value the walk used on the host
        self.inputs = [self.add(a.ptr, a.nbytes, Slot("input", a.nbytes)) for a in inputs]
        spans = sorted((a.ptr, a.ptr + a.nbytes) for a in inputs if a.nbytes)
        if any(start < end for (_, end), (start, _) in itertools.pairwise(spans)):
            self.fail("two of its arguments share memory")  # addresses would be ambiguous
        for c in constants:
            self.add_constant(c)

    def trace(self, coerced: list[Any]) -> list[Any]:
        """`coerced` with each top-level host scalar replaced by its `TracedScalar`."""
        out = []
        for k, a in enumerate(coerced):
            if type(a) is np.ndarray and a.ndim == 0:
                traced = a.view(TracedScalar)
                traced.index, traced.recorder = k, self
                self.scalars[k] = traced
                a = traced
            out.append(a)
        return out

    def scalar_index(self, x: Any) -> int:
        """The argument position of `x` if it is a traced scalar argument itself, else -1."""
        k = getattr(x, "index", -1) if type(x) is TracedScalar else -1
        return k if self.scalars.get(k) is x else -1

    def add(self, ptr: int, nbytes: int, slot: Slot) -> int:
        index = len(self.slots)
        self.slots.append(slot)
        k = bisect.bisect_right(self.starts, ptr)
        self.starts.insert(k, ptr)
        self.spans.insert(k, (ptr, ptr + max(nbytes, 1), index))
        return index

    def add_constant(self, a: DeviceArray) -> None:
        if self.lookup(a.ptr) is None:
            self.add(a.ptr, a.nbytes, Slot("const", a.nbytes, keep=a))

    def lookup(self, ptr: int) -> Ref | None:
        k = bisect.bisect_right(self.starts, ptr) - 1
        while k >= 0:  # spans may nest (an input view inside a constant's buffer): innermost
            start, end, slot = self.spans[k]
            if start <= ptr < end:
                return slot, ptr - start
            if end <= ptr and k > 0 and self.spans[k - 1][1] <= ptr:
                break
            k -= 1
        return None

    def ref(self, ptr: int) -> Ref | None:
        """The slot an address lies in (None for the null address); marks it used."""
        if not ptr:
            return None
        found = self.lookup(ptr)
        if found is None:
            raise NotReplayable(f"an address outside the call's memory ({ptr:#x})")
        self.slots[found[0]].last = len(self.ops)
        return found

    def fail(self, why: str) -> None:
        if not self.invalid:
            self.invalid = why

    def record(self, kind: str, *args: Any) -> None:
        self.ops.append(Op(kind, args))

    # ------------------------------------------------------------ memory

    def allocate(self, nbytes: int) -> Buffer:
        buffer = self.inner.allocate(nbytes)
        self.held.append(buffer)
        self.add(buffer.ptr, buffer.nbytes, Slot("alloc", buffer.nbytes, born=len(self.ops)))
        return buffer

    def release(self, ptr: int, nbytes: int) -> None:
        self.inner.release(ptr, nbytes)

    def upload(self, array: np.ndarray) -> DeviceArray:
        # data computed on the host from the signature alone (literals, shapes): a constant
        out = self.inner.upload(array)
        self.add(out.ptr, out.nbytes, Slot("const", out.nbytes, keep=out))
        return out

    def download(self, array: DeviceArray) -> np.ndarray:
        self.fail("it reads device data on the host")
        return self.inner.download(array)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self.record("copy", self.ref(dst), self.ref(src), nbytes)
        self.inner.copy(dst, src, nbytes)

    def fill_zero(self, ptr: int, nbytes: int) -> None:
        if nbytes:
            self.record("zero", self.ref(ptr), nbytes)
        self.inner.fill_zero(ptr, nbytes)

    def check_status(self, buffer: Buffer, on_error: Callable[[int], Exception]) -> None:
        ref = self.ref(buffer.ptr)
        assert ref is not None
        self.slots[ref[0]].checked = True
        self.record("check", ref, on_error)
        self.inner.check_status(buffer, on_error)

    # ------------------------------------------------------------ code

    def load(self, code: Any, kernels: list[str]) -> dict[str, Any]:
        return self.inner.load(code, kernels)

    def launch(self, kernel: Any, grid: int, block: int, shared: int,
               args: list[KernelArg]) -> None:
        specs = [(a.ctype, self.ref(int(a.value))) if a.ctype is _POINTER else
                 (a.ctype, (a.value, a.source, a.dtype)) for a in args]
        self.record("launch", kernel, grid, block, shared, specs)
        self.inner.launch(kernel, grid, block, shared, args)

    def synchronize(self) -> None:
        self.inner.synchronize()

    def prepare_launch(self, kernel: Any, grid: int, block: int, shared: int,
                       args: list[KernelArg]) -> PreparedLaunch:
        raise NotReplayable("a prepared launch inside a recording")

    def gemm(self, dtype: np.dtype[Any], trans_a: bool, trans_b: bool, m: int, n: int,
             k: int, a: int, lda: int, b: int, ldb: int, c: int, ldc: int,
             batch: int = 1) -> bool:
        done = self.inner.gemm(dtype, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, batch)
        if done:
            self.record("gemm", dtype, trans_a, trans_b, m, n, k, self.ref(a), lda, self.ref(b),
                        ldb, self.ref(c), ldc, batch)
        return done

    def dlpack_device(self) -> tuple[int, int]:
        return self.inner.dlpack_device()


# ---------------------------------------------------------------- results


@dataclass
class Result:
    """How to build a call's result: arrays from slots, tuples of them, host scalars."""

    kind: str  # "array" (on the device), "tuple", "host" (a value computed on the host)
    ref: Ref | None = None
    shape: tuple[int, ...] = ()
    dtype: Any = None
    elements: list[Result] = field(default_factory=list)
    value: Any = None


def result_template(value: Any, recorder: Recorder) -> Result:
    if isinstance(value, DeviceArray):
        ref = recorder.lookup(value.ptr)
        if ref is None:
            raise NotReplayable("a result outside the call's memory")
        return Result("array", ref, value.shape, value.dtype)
    if isinstance(value, tuple):
        return Result("tuple", elements=[result_template(v, recorder) for v in value])
    if isinstance(value, TracedScalar):
        value.used()  # its value is the result: valid for that value only
        return Result("host", value=np.array(value.plain()))
    if isinstance(value, np.ndarray | np.generic) and value.dtype.kind in "biuf":
        return Result("host", value=np.array(value))  # computed on the host from the signature
    if isinstance(value, bool | int | float) or value is None:
        return Result("host", value=value)
    raise NotReplayable(f"a result of kind {type(value).__name__}")


def result_slots(template: Result, out: set[int]) -> set[int]:
    if template.kind == "array":
        assert template.ref is not None
        out.add(template.ref[0])
    for e in template.elements:
        result_slots(e, out)
    return out


# ---------------------------------------------------------------- replay


class Replay:
    """A recording, ready to run: launches with pre-packed parameters, intermediates in an
    arena, the results' buffers allocated per call."""

    def __init__(self, device: Device, recorder: Recorder, template: Result) -> None:
        self.device = device
        self.template = template
        slots = recorder.slots
        self.inputs = recorder.inputs
        outputs = result_slots(template, set())
        self.fresh = [(k, s.nbytes) for k, s in enumerate(slots)
                      if s.kind == "alloc" and (k in outputs or s.checked)]
        fresh = {k for k, _ in self.fresh}
        self.addresses = [0] * len(slots)
        # the device arrays behind constant slots (kept alive; a result may be one)
        self.constants = {k: s.keep for k, s in enumerate(slots) if s.kind == "const"}
        for k, const in self.constants.items():
            self.addresses[k] = const.ptr
        offsets, size = plan_arena(slots, fresh, len(recorder.ops))
        self.arena = device.allocate(size) if size else None
        for k, off in offsets.items():
            assert self.arena is not None
            self.addresses[k] = self.arena.ptr + off
        dynamic = {k for k, s in enumerate(slots) if s.kind == "input"} | fresh
        self.patches: list[tuple[Any, int, int]] = []  # (cell, slot, offset)
        self.scalar_patches: list[tuple[Any, int, np.dtype[Any]]] = []  # (cell, arg, dtype)
        self.prepared: list[PreparedLaunch] = []
        self.steps: list[Callable[[], Any]] = []
        self.checks: list[tuple[int, Callable[[int], Exception]]] = []
        self.launches = 0
        for op in recorder.ops:
            self.steps.extend(self.prepare(op, dynamic))
        self.runs = 0
        self.graph: Any = None  # the launch list captured, after GRAPH_AFTER runs
        self.no_graph = ""  # why the device refused to capture it
        self.static_inputs: list[tuple[Buffer, int]] = []  # with the bytes to copy in
        self.graph_scalars: tuple[int | float, ...] = ()  # the scalar arguments it holds
        self.cells_moved = False  # the launch cells point elsewhere than when captured
        self.static_fresh: dict[int, Buffer] = {}

    def address(self, ref: Ref | None) -> int:
        return 0 if ref is None else self.addresses[ref[0]] + ref[1]

    def prepare(self, op: Op, dynamic: set[int]) -> list[Callable[[], Any]]:
        device, at = self.device, self.address
        if op.kind == "launch":
            kernel, grid, block, shared, specs = op.args
            args = [KernelArg(ctype, at(v) if ctype is _POINTER else v[0])
                    for ctype, v in specs]
            prepared = device.prepare_launch(kernel, grid, block, shared, args)
            self.prepared.append(prepared)  # its cells live in its storage
            for cell, (ctype, v) in zip(prepared.cells, specs, strict=True):
                if ctype is _POINTER and v is not None and v[0] in dynamic:
                    self.patches.append((cell, v[0], v[1]))
                elif ctype is not _POINTER and v[1] >= 0:  # a scalar argument, by value
                    self.scalar_patches.append((cell, v[1], np.dtype(v[2])))
            self.launches += 1
            return [prepared.run]
        if op.kind == "gemm":
            dtype, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, batch = op.args
            return [lambda: device.gemm(dtype, ta, tb, m, n, k, at(a), lda, at(b), ldb, at(c),
                                        ldc, batch)]
        if op.kind == "copy":
            dst, src, nbytes = op.args
            return [lambda: device.copy(at(dst), at(src), nbytes)]
        if op.kind == "zero":
            ptr, nbytes = op.args
            return [lambda: device.fill_zero(at(ptr), nbytes)]
        assert op.kind == "check"
        ref, on_error = op.args
        self.checks.append((ref[0], on_error))
        return []

    def run(self, inputs: list[DeviceArray], arguments: list[Any]) -> Any:
        """The call's result, for `inputs` (the device arrays of its arguments, in the
        recording's order) and its coerced `arguments` (for the scalars kernels take)."""
        device = self.device
        device.make_current()
        scalars = self.scalar_values(arguments)
        if self.graph is not None and scalars == self.graph_scalars:
            return self.run_graph(inputs)
        for (cell, _, _), value in zip(self.scalar_patches, scalars, strict=True):
            cell.value = value
        self.cells_moved = self.graph is not None  # off the graph's static buffers
        addresses = self.addresses
        for slot, a in zip(self.inputs, inputs, strict=True):
            addresses[slot] = a.ptr
        buffers: dict[int, Buffer] = {}
        for slot, nbytes in self.fresh:
            buffer = buffers[slot] = device.allocate(nbytes)
            addresses[slot] = buffer.ptr
        self.patch()
        for step in self.steps:
            step()
        for slot, on_error in self.checks:
            device.defer_check(buffers[slot], on_error)
        self.runs += 1
        if self.runs == GRAPH_AFTER and not self.checks and \
                len(self.steps) > len(self.inputs) + len(self.fresh) + 1:
            self.capture(inputs, scalars)  # when one launch saves more than the copies cost
        return self.build(self.template, buffers, inputs)

    def patch(self) -> None:
        addresses = self.addresses
        for cell, slot, offset in self.patches:
            cell.value = addresses[slot] + offset

    def scalar_values(self, arguments: list[Any]) -> tuple[int | float, ...]:
        return tuple(scalar_bits(arguments[k], dtype) for _, k, dtype in self.scalar_patches)

    def capture(self, inputs: list[DeviceArray], scalars: tuple[int | float, ...]) -> None:
        """Capture the launch list as a graph over buffers of its own for the inputs and
        results, with the scalar arguments of this call (a call with other scalars replays
        launch by launch; so does a replay with error words: each call's word must be read
        before the next call's launches reuse it)."""
        device = self.device
        self.static_inputs = [(device.allocate(a.nbytes), a.nbytes) for a in inputs]
        self.static_fresh = {slot: device.allocate(nbytes) for slot, nbytes in self.fresh}
        self.point_at_statics()
        steps = self.steps

        def issue() -> None:
            for step in steps:
                step()

        try:
            self.graph = device.capture_graph(issue)
        except Exception as e:  # a refused capture leaves the launch-by-launch replay
            self.graph, self.no_graph = None, f"{type(e).__name__}: {e}"
        if self.graph is not None:
            self.graph_scalars = scalars
        else:
            self.static_inputs, self.static_fresh = [], {}

    def point_at_statics(self) -> None:
        for slot, (buffer, _) in zip(self.inputs, self.static_inputs, strict=True):
            self.addresses[slot] = buffer.ptr
        for slot, buffer in self.static_fresh.items():
            self.addresses[slot] = buffer.ptr
        self.patch()

    def run_graph(self, inputs: list[DeviceArray]) -> Any:
        device = self.device
        if self.cells_moved:  # a call with other scalars patched them: as captured again
            self.point_at_statics()
            for (cell, _, _), value in zip(self.scalar_patches, self.graph_scalars,
                                           strict=True):
                cell.value = value
            self.cells_moved = False
        for a, (static, nbytes) in zip(inputs, self.static_inputs, strict=True):
            ptr = a.ptr
            if ptr != static.ptr and nbytes:
                device.copy(static.ptr, ptr, nbytes)
        self.graph.launch()
        buffers: dict[int, Buffer] = {}
        for slot, static in self.static_fresh.items():
            buffer = buffers[slot] = device.allocate(static.nbytes)
            device.copy(buffer.ptr, static.ptr, static.nbytes)
        self.runs += 1
        return self.build(self.template, buffers, inputs)

    def build(self, t: Result, buffers: dict[int, Buffer], inputs: list[DeviceArray]) -> Any:
        if t.kind == "array":
            assert t.ref is not None
            slot, offset = t.ref
            buffer = buffers.get(slot)
            if buffer is None:
                if slot in self.inputs:  # an argument returned (or a view of one)
                    a = inputs[self.inputs.index(slot)]
                    return DeviceArray(a.buffer, t.shape, t.dtype, a.offset + offset)
                const = self.constants[slot]
                return DeviceArray(const.buffer, t.shape, t.dtype, const.offset + offset)
            return DeviceArray(buffer, t.shape, t.dtype, offset)
        if t.kind == "tuple":
            return tuple(self.build(e, buffers, inputs) for e in t.elements)
        return np.array(t.value) if isinstance(t.value, np.ndarray) else t.value


def scalar_bits(x: Any, dtype: np.dtype[Any]) -> int | float:
    """A scalar argument as a kernel parameter of `dtype` (float16 as its bits)."""
    a = np.asarray(x, dtype)
    return int(a.view(np.uint16)) if dtype == np.float16 else a.item()


def plan_arena(slots: list[Slot], fresh: set[int], count: int) -> tuple[dict[int, int], int]:
    """Offsets in one arena for the recording's intermediates: each lives from its
    allocation to its last use, and a size class freed is reused, as the device's pool
    would (stream order makes the reuse safe)."""
    births: dict[int, list[int]] = {}
    deaths: dict[int, list[int]] = {}
    for k, s in enumerate(slots):
        if s.kind == "alloc" and k not in fresh and s.last >= 0:
            births.setdefault(s.born, []).append(k)
            deaths.setdefault(max(s.last, s.born), []).append(k)
    offsets: dict[int, int] = {}
    free: dict[int, list[int]] = {}
    top = 0
    for i in range(count + 1):
        for k in births.get(i, ()):
            size = size_class(slots[k].nbytes)
            spare = free.get(size)
            if spare:
                offsets[k] = spare.pop()
            else:
                offsets[k] = top
                top += size
        for k in deaths.get(i, ()):
            free.setdefault(size_class(slots[k].nbytes), []).append(offsets[k])
    return offsets, top
