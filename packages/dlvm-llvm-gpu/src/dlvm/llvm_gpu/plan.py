"""The host side of the `nvptx` target: launch plans over device-resident data.

A function runs on the host as a walk over its blocks — branches, loops, calls, recursion
and the AD tape are the interpreter's (`dlvm.ir.interp`), so every program the interpreter
runs runs here with the same semantics — while its tensor work is launched on the device:

- `apply` of a `!kernel` function, and every element-wise instruction, reduction and
  layout instruction on its own, is a *region* (`kernels.py`), compiled once per shapes
  into kernels and launched;
- `dot` is cuBLAS where the device has it for the data type, else a generated kernel;
- `padShape`, `squeezeShape`, `shapeCast` and `slice` of rows are views: no launch at all;
- tensors stay on the device from step to step: they flow through block arguments, tuples,
  calls and the stacks of the AD tape as `DeviceArray`s. Scalars computed from host values
  stay on the host (a loop counter costs no launch).

- `random` is a region too: the counter-based stream every target shares, its state (key
  and counter) on the device.

- memory (globals, boxes, stacks, heaps) is the interpreter's, on the host, its cells holding
  device arrays as they are.

The rest (reductions by a function, instructions of plugins without a scalar rule, …)
runs the instruction's own numpy semantics on host copies of its operands, so nothing is
out of reach.

The plan of an instruction — which of these it is, its compiled kernels for each shape seen
— is worked out on its first execution and kept, so a call costs one Python dispatch per
instruction and one driver call per launch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlvm.ir import Function, Instruction, LiteralValue, Module, TypeRuleError, Value
from dlvm.ir.analysis.usedef import UseDefInfo
from dlvm.ir.core import AggregateLiteral, ScalarLiteral
from dlvm.ir.instructions.aggregate import runtime_keys
from dlvm.ir.instructions.tensor import is_reversal
from dlvm.ir.interp import Frame, Interpreter
from dlvm.ir.runtime import (
    EnumValue,
    ExecutionError,
    Pointer,
    check_conforms,
    convert_argument,
    kept,
    numpy_dtype,
)
from dlvm.ir.types import TensorType, TupleType, Type
from dlvm.llvm.codegen.specialize import Specializer

from . import nvptx
from .device import Device, DeviceArray, GPUError, KernelArg, c_type
from .dlpack import import_array
from .kernels import (
    LAYOUT_RULES,
    Flavour,
    KernelError,
    RegionBuilder,
    RegionCode,
    gemm_module,
    is_kernel_instruction,
    region_operands,
)
from .lowering import lowering_of
from .replay import (
    MAX_SIGNATURES,
    NotReplayable,
    Recorder,
    Replay,
    TracedScalar,
    device_arrays,
    result_template,
    scalar_bits,
    signature,
    split_scalars,
)


@dataclass
class CompiledRegion:
    code: RegionCode
    handles: dict[str, Any]


class GPUFrame(Frame):
    """An activation whose values may be device arrays."""

    __slots__ = ()


class HostFrame:
    """A view of a frame for an instruction that runs its numpy semantics: device arrays
    among the operands are copied to the host."""

    __slots__ = ("frame", "interp", "module", "rng", "values")

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.interp = frame.interp
        self.module = frame.module
        self.rng = frame.rng
        self.values = frame.values

    def get(self, v: Value) -> Any:
        x = self.frame.get(v)
        mark_used(x)  # a scalar argument's value read on the host keys its recording
        if contains_device(x):
            self.interp.stats["downloads"] += 1  # type: ignore[attr-defined]
            return to_host(x)
        return x

    def call_function(self, fn: Any, args: list[Any]) -> Any:
        return to_host(self.frame.call_function(fn, args))


class OwningFrame(HostFrame):
    """For `store`: the stored value's device arrays are copies of their own."""

    __slots__ = ("plan",)

    def __init__(self, frame: Frame, plan: LaunchPlan) -> None:
        super().__init__(frame)
        self.plan = plan

    def get(self, v: Value) -> Any:
        return self.plan.owned(self.frame.get(v))


class ShapeFrame(HostFrame):
    """For instructions that read only shapes (`rank`, `shape`, `unitCount`): device arrays
    are seen as zero-strided host arrays of their shape, without a copy."""

    __slots__ = ()

    def get(self, v: Value) -> Any:
        return shaped(self.frame.get(v))




class Transposed:
    """A matrix on the device seen transposed, without a copy: what a `transpose` that only
    `dot`s use evaluates to."""

    __slots__ = ("base",)

    def __init__(self, base: DeviceArray) -> None:
        self.base = base

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.base.shape))

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.base.dtype

    def numpy(self) -> np.ndarray:
        return np.ascontiguousarray(self.base.numpy().T)


def to_host(x: Any) -> Any:
    """`x` with every device array in it copied to the host."""
    if isinstance(x, DeviceArray | Transposed):
        return x.numpy()
    if isinstance(x, tuple):
        return tuple(to_host(e) for e in x)
    if isinstance(x, list):
        return [to_host(e) for e in x]
    if isinstance(x, dict):
        return {k: to_host(e) for k, e in x.items()}
    if isinstance(x, EnumValue):
        return EnumValue(x.case, tuple(to_host(e) for e in x.values))
    return x


def device_leaves(x: Any) -> list[DeviceArray]:
    """The device arrays anywhere in a value (tuples, arrays, structs, enums)."""
    if isinstance(x, DeviceArray):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    elif isinstance(x, EnumValue):
        x = x.values
    if isinstance(x, tuple | list):
        return [d for e in x for d in device_leaves(e)]
    return []


def contains_device(x: Any) -> bool:
    if isinstance(x, DeviceArray | Transposed):
        return True
    if isinstance(x, tuple | list):
        return any(contains_device(e) for e in x)
    return False


def shape_dtype(x: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    if isinstance(x, DeviceArray | Transposed):
        return x.shape, x.dtype
    a = np.asarray(x)
    return a.shape, a.dtype


class LaunchPlan(Interpreter):
    """Runs a module's functions with their tensor work on `device`."""

    def __init__(self, module: Module, device: Device, flavour: Flavour, *, seed: int = 0,
                 max_steps: int | None = None, timeout: float | None = None,
                 replay: bool = True) -> None:
        super().__init__(module, seed, max_steps, timeout)
        self.not_replayed: dict[str, str] = {}  # why a function's last new signature walks
        self.device = device
        self.flavour = flavour
        self.specializer = Specializer(module)
        self.handlers: dict[Instruction, Callable[[Instruction, Frame], Any]] = {}
        self.regions: dict[tuple[Any, ...], CompiledRegion] = {}
        self.gemms: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self.uploads: dict[int, tuple[np.ndarray, DeviceArray]] = {}
        self.counter = 0
        self.host_opcodes: dict[str, int] = {}  # what ran on the host, for statistics
        self.stats = {"launches": 0, "regions compiled": 0, "host instructions": 0,
                      "downloads": 0, "gemm library calls": 0, "walks": 0, "replays": 0}
        # replays by function and signature (None: that signature walks); see replay.py
        self.replays: dict[str, dict[tuple[Any, ...], Signature]] = {}
        self.recorder: Recorder | None = None
        self.replay_enabled = replay
        self.device_stream: DeviceArray | None = None

    # ------------------------------------------------------------ calls: replay or walk

    def call(self, name: str, args: list[Any]) -> Any:
        """A call from outside: the replay of an earlier call with the same signature when
        there is one, else a walk of the IR (recorded, when the signature is new)."""
        fn = self.module.function(name)
        if self.replay_enabled:
            args = [self.imported(a) for a in args]
        key = signature(args) if self.replay_enabled and fn is not None and \
            len(args) == len(fn.type_.arguments) else None
        if key is None:
            self.stats["walks"] += 1
            return super().call(name, args)
        shapes, values = split_scalars(key)
        entries = self.replays.setdefault(name, {})
        entry = entries.get(shapes)
        chosen = None if entry is None else tuple(values[k] for k in entry.keyed)
        replay = MISSING if entry is None else entry.replays.get(chosen, MISSING)
        if isinstance(replay, Replay):
            coerced = [a if type(a) is DeviceArray else self.coerce(a, t, i)
                       for i, (a, t) in enumerate(zip(args, fn.type_.arguments, strict=True))]
            self.stats["replays"] += 1
            self.stats["launches"] += replay.launches
            return replay.run(device_arrays(coerced, []), coerced)
        self.stats["walks"] += 1
        if replay is None or sum(len(e.replays) for e in entries.values()) >= MAX_SIGNATURES:
            return super().call(name, args)
        return self.record(fn, shapes, values, args)

    def imported(self, a: Any) -> Any:
        """A foreign array that lives where this device computes (a torch or CuPy CUDA
        tensor) as a `DeviceArray` over its memory, so that its call has a signature;
        anything else as it is (`coerce` uploads host data, or reports the problem)."""
        if type(a) is np.ndarray or type(a) is DeviceArray or isinstance(a, np.generic) or \
                not hasattr(a, "__dlpack__"):
            return a
        try:
            found = import_array(a, self.device)
        except GPUError:
            return a
        return a if found is None else found

    def replays_of(self, name: str) -> list[Replay | None]:
        """Every recording of function `name` (None: a signature that walks)."""
        return [r for entry in self.replays.get(name, {}).values()
                for r in entry.replays.values()]

    def record(self, fn: Function, shapes: tuple[Any, ...], values: tuple[Any, ...],
               args: list[Any]) -> Any:
        """Walk `fn` through a `Recorder`; keep the recording as the replay of its signature
        when the walk depended on nothing else (of the scalar arguments, only on the values
        of those it used on the host)."""
        assert fn.name is not None
        coerced = [self.coerce(a, t, i) for i, (a, t) in enumerate(
            zip(args, fn.type_.arguments, strict=True))]
        self.random_state()  # before recording: the stream's state is a constant of replays
        device, rng = self.device, self.rng
        recorder = Recorder(device, device_arrays(coerced, []),
                            [d for _, d in self.uploads.values()])
        traced = recorder.trace(coerced)
        self.device, self.recorder, self.rng = recorder, recorder, WatchedRNG(rng, recorder)
        device.recorder = recorder
        try:
            value = self.invoke(fn, traced)
        finally:
            self.device, self.recorder, self.rng = device, None, rng
            device.recorder = None
        try:  # first: a scalar argument returned as the result keys the recording too
            template: Any = result_template(value, recorder)
        except NotReplayable as e:
            template = e
        entries = self.replays[fn.name]
        entry = entries.setdefault(shapes, Signature(frozenset(recorder.keyed)))
        chosen = tuple(values[k] for k in entry.keyed)
        try:
            if recorder.invalid:
                raise NotReplayable(recorder.invalid)
            if isinstance(template, NotReplayable):
                raise template
            if recorder.keyed != entry.keyed:  # this walk used other scalars on the host
                raise NotReplayable("its scalar arguments decide different things per call")
            entry.replays[chosen] = Replay(device, recorder, template)
        except NotReplayable as e:
            entry.replays[chosen] = None
            self.not_replayed[fn.name] = str(e)
        return untraced(value)

    # ------------------------------------------------------------ dispatch

    def evaluate(self, inst: Instruction, frame: Frame) -> Any:
        """The instruction's plan (worked out on its first execution); `execute` reports a
        failure with the instruction's location, a driver's error as any other."""
        handler = self.handlers.get(inst)
        if handler is None:
            handler = self.handlers[inst] = self.plan(inst)
        try:
            return handler(inst, frame)
        except GPUError as e:
            raise ExecutionError(str(e)) from None

    def plan(self, inst: Instruction) -> Callable[[Instruction, Frame], Any]:
        """The handler of `inst`, from the lowering table (`lowering.py`)."""
        return getattr(self, lowering_of(inst).method)

    def run_apply(self, inst: Instruction, frame: Frame) -> Any:
        """A call of a single-block `!kernel` function of kernel instructions is one region;
        any other call walks the callee (decided once per instruction)."""
        callee = inst.fields.get("callee")
        kernel = isinstance(callee, Function) and "kernel" in callee.attributes and \
            callee.blocks and len(callee.blocks) == 1 and all(
                is_kernel_instruction(i) for i in callee.entry.instructions[:-1])
        handler = self.handlers[inst] = self.run_kernel_call if kernel else self.run_raw
        return handler(inst, frame)

    def run_transpose(self, inst: Instruction, frame: Frame) -> Any:
        """A transpose that only `dot`s read stays a view; any other is a region."""
        lazy = self.only_multiplied(inst)
        handler = self.handlers[inst] = self.run_lazy_transpose if lazy else self.run_single
        return handler(inst, frame)

    # ------------------------------------------------------------ host and raw

    def run_raw(self, inst: Instruction, frame: Frame) -> Any:
        return Interpreter.evaluate(self, inst, frame)

    def literal(self, v: LiteralValue, frame: Frame) -> Any:
        lit = v.literal
        if self.recorder is not None and isinstance(lit, AggregateLiteral) and \
                lit.kind != "tuple":  # a tensor, struct or enum of scalar arguments reads them
            for e in lit.elements:
                mark_used(frame.get(e))
        return super().literal(v, frame)

    def run_pop(self, inst: Instruction, frame: Frame) -> Any:
        """`pop` keeps device arrays; their shapes are checked against the popped type as
        the interpreter checks a host array's, here rather than where the value ends up."""
        value = Interpreter.evaluate(self, inst, frame)
        check_conforms(shaped(value), inst.type_, self.module, "popped value")
        return value

    def run_host(self, inst: Instruction, frame: Frame) -> Any:
        if self.recorder is not None and "pure" not in inst.op.traits:
            self.recorder.fail(f"'{inst.opcode}' runs on the host and is not pure")
        self.stats["host instructions"] += 1
        self.host_opcodes[inst.opcode] = self.host_opcodes.get(inst.opcode, 0) + 1
        return Interpreter.evaluate(self, inst, HostFrame(frame))  # type: ignore[arg-type]

    def run_memory(self, inst: Instruction, frame: Frame) -> Any:
        """Memory on the host holding device arrays: a stored tensor stays on the device (a
        copy of its own, as the interpreter keeps a copy of a stored array); a pointer into
        the elements of a tensor moves the tensor in its cell to the host first. Memory
        outlives a call, so a call that touches it is not replayed."""
        if self.recorder is not None and inst.opcode != "trap":
            self.recorder.fail(f"'{inst.opcode}' uses memory that outlives the call")
        for name in ("pointer", "source", "destination"):
            operand = inst.fields.get(name)
            if isinstance(operand, Value):
                p = frame.get(operand)
                if isinstance(p, Pointer) and (p.path or inst.opcode == "elementPointer"):
                    self.cell_to_host(p)
        if inst.opcode == "store":
            return Interpreter.evaluate(self, inst, OwningFrame(frame, self))  # type: ignore[arg-type]
        value = Interpreter.evaluate(self, inst, frame)
        if self.recorder is not None:  # a loaded array is read where the walk goes on
            for d in device_leaves(value):
                self.recorder.add_constant(d)
        return value

    def cell_to_host(self, p: Pointer) -> None:
        cell = p.memory.written.get(p.index)
        if contains_device(cell):
            self.stats["downloads"] += 1
            p.memory.written[p.index] = kept(to_host(cell))

    def owned(self, x: Any) -> Any:
        """`x` with each device array in it copied on the device (in memory that a recording
        does not take back when it ends: the call is not replayed)."""
        if isinstance(x, DeviceArray):
            device = self.device if self.recorder is None else self.recorder.inner
            out = device.empty(x.shape, x.dtype)
            if x.nbytes:
                device.copy(out.ptr, x.ptr, x.nbytes)
            return out
        if isinstance(x, tuple):
            return tuple(self.owned(e) for e in x)
        if isinstance(x, list):
            return [self.owned(e) for e in x]
        if isinstance(x, dict):
            return {k: self.owned(e) for k, e in x.items()}
        return x

    def run_shape_query(self, inst: Instruction, frame: Frame) -> Any:
        return Interpreter.evaluate(self, inst, ShapeFrame(frame))  # type: ignore[arg-type]

    def run_aggregate(self, inst: Instruction, frame: Frame) -> Any:
        """`extract`/`insert` on tuples, arrays and structs keep device arrays; `extract`
        of rows of a device tensor is a view of them (no launch, no copy); `insert` into a
        device tensor runs on the host."""
        extract = inst.opcode == "extract"
        if not extract:
            mark_used(frame.get(inst.element))  # copied into the destination: its value
        x = frame.get(inst.value if extract else inst.destination)
        for key in runtime_keys(inst.keys, HostFrame(frame)):
            if isinstance(x, DeviceArray):
                if not (extract and isinstance(key, int) and x.shape and
                        0 <= key < x.shape[0]):
                    return self.run_host(inst, frame)  # the interpreter reports a bad key
                row = x.nbytes // x.shape[0]
                x = DeviceArray(x.buffer, x.shape[1:], x.dtype, x.offset + key * row)
                continue
            try:
                x = x[key]
            except (TypeError, KeyError, IndexError):
                break  # the interpreter's semantics report the problem
        else:
            if extract and isinstance(x, DeviceArray):
                return x
        return self.run_raw(inst, frame)

    # ------------------------------------------------------------ values on the device

    def device_value(self, x: Any) -> DeviceArray:
        if isinstance(x, DeviceArray):
            return x
        mark_used(x)  # a scalar argument uploaded: its value is in the recording
        a = np.asarray(x)
        if not a.flags.writeable:  # a literal's cached array: upload it once
            found = self.uploads.get(id(a))
            if found is not None and found[0] is a:
                return found[1]
            d = self.device.upload(a)
            self.uploads[id(a)] = (a, d)
            return d
        return self.device.upload(a)

    # ------------------------------------------------------------ views

    def run_view(self, inst: Instruction, frame: Frame) -> Any:
        x = frame.get(inst.x)
        if not isinstance(x, DeviceArray):
            return self.run_host(inst, frame)
        op = inst.opcode
        shape = list(x.shape)
        if op == "padShape":
            if not 0 <= inst.axis <= len(shape):
                return self.run_host(inst, frame)
            shape.insert(inst.axis, 1)
        elif op == "squeezeShape":
            if not 0 <= inst.axis < len(shape) or shape[inst.axis] != 1:
                return self.run_host(inst, frame)
            del shape[inst.axis]
        elif op == "shapeCast":
            shape = view_shape(inst.shape, x.size)
            if shape is None:
                return self.run_host(inst, frame)  # the interpreter reports the problem
        else:  # slice of rows
            if not shape or inst.upper >= shape[0]:
                return self.run_host(inst, frame)
            row = x.nbytes // shape[0] if shape[0] else 0
            shape[0] = inst.upper - inst.lower + 1
            return DeviceArray(x.buffer, tuple(shape), x.dtype, x.offset + inst.lower * row)
        return x.reshape(tuple(shape))

    def run_bit_cast(self, inst: Instruction, frame: Frame) -> Any:
        """The same bytes as another data type (and shape): a view."""
        x = frame.get(inst.x)
        t = self.module.resolve(inst.type)
        if not isinstance(x, DeviceArray) or not isinstance(t, TensorType):
            return self.run_host(inst, frame)
        dtype = np.dtype(numpy_dtype(t.dtype))
        count, rest = divmod(x.nbytes, dtype.itemsize)
        shape = None if rest else view_shape(list(t.shape), count)
        if shape is None:
            return self.run_host(inst, frame)  # the interpreter reports the problem
        return DeviceArray(x.buffer, tuple(shape), dtype, x.offset)

    # ------------------------------------------------------------ transposes into dot

    def only_multiplied(self, inst: Instruction) -> bool:
        """Whether a matrix `transpose` is used only as an operand of `dot`s (or not at
        all), which read it transposed (a BLAS flag, or the generated kernel's index order)
        instead of a copy."""
        t = self.module.resolve(inst.type)
        fn = inst.block.function if inst.block is not None else None
        if not isinstance(t, TensorType) or t.rank != 2 or fn is None or \
                not is_reversal(inst, 2):
            return False
        users = fn.analysis(UseDefInfo).users(inst)
        return all(u.opcode == "dot" and (u.lhs is inst) != (u.rhs is inst) for u in users)

    def run_lazy_transpose(self, inst: Instruction, frame: Frame) -> Any:
        x = frame.get(inst.x)
        if not isinstance(x, DeviceArray) or x.ndim != 2:
            return self.run_single(inst, frame)
        return Transposed(x)

    # ------------------------------------------------------------ regions

    def run_single(self, inst: Instruction, frame: Frame) -> Any:
        operands = [v for v in dict.fromkeys(region_operands(inst))
                    if not (isinstance(v, LiteralValue) and isinstance(v.literal, ScalarLiteral))]
        values = [frame.get(v) for v in operands]
        if inst.opcode != "random" and not any(isinstance(x, DeviceArray) for x in values) \
                and all(np.ndim(x) == 0 for x in values):
            return self.run_host(inst, frame)  # scalar arithmetic: no launch
        like = shape_dtype(frame.get(inst.like))[0] if inst.opcode == "unbroadcast" else None
        types = self.single_types(inst, operands, values, like)
        if types is None:
            return self.run_host(inst, frame)  # the interpreter reports the error
        key = ("inst", inst, like, aligned(values), *((types[v], self.passed_by_value(x))
                                     for v, x in zip(operands, values, strict=True)))
        region = self.regions.get(key)
        if region is None:
            try:
                region = self.compile_region(f"i{self.next_id()}_{inst.opcode}", [inst],
                                             operands, [inst], types, values, key)
            except KernelError:
                self.handlers[inst] = self.run_host
                return self.run_host(inst, frame)
        return self.launch_region(region, values)[0]

    def single_types(self, inst: Instruction, operands: list[Value], values: list[Any],
                     like_shape: tuple[int, ...] | None = None
                     ) -> dict[Value, TensorType] | None:
        """The concrete types of an instruction and its operands, or None when its type
        rule rejects them (the interpreter then reports the problem)."""
        saved = [(v, v.type) for v in operands] + [(inst, inst.type)]
        types: dict[Value, TensorType] = {}
        try:
            for v, x in zip(operands, values, strict=True):
                declared = self.module.resolve(v.type)
                if not isinstance(declared, TensorType):
                    return None
                shape, _ = shape_dtype(x)
                if len(shape) != declared.rank:
                    return None
                t = declared.with_shape(shape)
                v.type = t
                types[v] = t
            if like_shape is not None:  # unbroadcast: the `like` operand's shape matters
                like = inst.like
                like_t = self.module.resolve(like.type)
                if not isinstance(like_t, TensorType) or len(like_shape) != like_t.rank:
                    return None
                saved.append((like, like.type))
                like.type = like_t.with_shape(like_shape)
            try:
                t = inst.op.infer(inst, self.module)
            except TypeRuleError:
                return None
            if not isinstance(t, TensorType) or not t.is_static:
                return None
            types[inst] = t
            return types
        finally:
            for v, t in saved:
                v.type = t

    def run_kernel_call(self, inst: Instruction, frame: Frame) -> Any:
        callee: Function = inst.fields["callee"]
        values = [frame.get(a) for a in inst.args]
        params = list(callee.entry.arguments)
        arg_types: list[Type] = []
        for p, x in zip(params, values, strict=True):
            declared = self.module.resolve(p.type)
            if not isinstance(declared, TensorType):
                return self.run_raw(inst, frame)
            shape, _ = shape_dtype(x)
            if len(shape) != declared.rank:
                return self.run_raw(inst, frame)
            arg_types.append(declared.with_shape(shape))
        key = ("call", callee, aligned(values), *((t, self.passed_by_value(x))
                                 for t, x in zip(arg_types, values, strict=True)))
        region = self.regions.get(key)
        if region is None:
            spec = self.specializer.spec(callee, tuple(arg_types))
            body = callee.entry.instructions
            ret = body[-1]
            result = ret.fields.get("value")
            outputs = tuple_elements(result)
            types: dict[Value, TensorType] = {}
            for v in [*params, *body[:-1]]:
                t = self.module.resolve(spec.type(v))
                if not isinstance(t, TensorType) or not t.is_static or (
                        isinstance(v, Instruction) and v.opcode not in LAYOUT_RULES and
                        not is_kernel_instruction(v)):
                    return self.run_raw(inst, frame)  # dynamic shapes: run the body
                types[v] = t
            for v in outputs:
                if isinstance(v, LiteralValue) or v not in types:
                    return self.run_raw(inst, frame)
            try:
                region = self.compile_region(f"k{self.next_id()}_{callee.name}", body[:-1],
                                             params, outputs, types, values, key)
            except KernelError:
                self.handlers[inst] = self.run_raw
                return self.run_raw(inst, frame)
        out = self.launch_region(region, values)
        result = callee.entry.instructions[-1].fields.get("value")
        if isinstance(result, LiteralValue) and not isinstance(result.literal, ScalarLiteral):
            return tuple(out)
        return out[0]

    def passed_by_value(self, x: Any) -> bool:
        """A host scalar (not a bool) is passed to kernels by value."""
        if isinstance(x, DeviceArray):
            return False
        a = np.asarray(x)
        return a.ndim == 0 and a.dtype != np.bool_

    def next_id(self) -> int:
        self.counter += 1
        return self.counter

    def compile_region(self, name: str, insts: list[Instruction], inputs: list[Value],
                       outputs: list[Value], types: dict[Value, TensorType], values: list[Any],
                       key: tuple[Any, ...]) -> CompiledRegion:
        by_value = [self.passed_by_value(x) for x in values]
        code = RegionBuilder(name, insts, inputs, outputs, types, by_value, self.flavour,
                             aligned=aligned(values)).build()
        handles = self.load(code.module, code.kernel_names)
        region = self.regions[key] = CompiledRegion(code, handles)
        self.stats["regions compiled"] += 1
        return region

    def load(self, module: Any, kernels: list[str]) -> dict[str, Any]:
        if self.device.arch == "host":
            return self.device.load(str(module), kernels)
        ptx = nvptx.emit_ptx(str(module), nvptx.nearest_arch(self.device.arch), kernels)
        return self.device.load(ptx, kernels)

    def launch_region(self, region: CompiledRegion, values: list[Any]) -> list[DeviceArray]:
        code, device = region.code, self.device
        outs = [device.empty(tuple(int(d) for d in code.types[v].shape),  # type: ignore[arg-type]
                             numpy_dtype(code.types[v].dtype)) for v in code.outputs]
        args = [KernelArg(ctypes.c_void_p, o.ptr) for o in outs]
        keep: list[DeviceArray] = []
        for x, by_value, v in zip(values, code.by_value, code.inputs, strict=True):
            if by_value:
                dtype = np.dtype(numpy_dtype(code.types[v].dtype))
                source = -1 if self.recorder is None else self.recorder.scalar_index(x)
                if isinstance(x, TracedScalar):
                    if source < 0:
                        x.used()  # not the argument itself: its value is baked in
                    x = x.plain()
                args.append(KernelArg(c_type(dtype), scalar_bits(x, dtype), source, dtype.name))
            else:
                d = self.device_value(x)
                keep.append(d)  # an upload lives until its launches are issued
                args.append(KernelArg(ctypes.c_void_p, d.ptr))
        scratch = device.allocate(code.scratch_bytes) if code.scratch_bytes else None
        err = None
        if code.sites:
            err = device.allocate(4)
            device.fill_zero(err.ptr, 4)
        args.append(KernelArg(ctypes.c_void_p, scratch.ptr if scratch is not None else 0))
        args.append(KernelArg(ctypes.c_void_p, err.ptr if err is not None else 0))
        args.append(KernelArg(ctypes.c_void_p, self.random_state().ptr if code.draws else 0))
        for launch in code.launches:
            device.launch(region.handles[launch.name], launch.grid, launch.block, 0, args)
            self.stats["launches"] += 1
        if err is not None:
            device.check_status(err, code.error)
        return outs

    def random_state(self) -> DeviceArray:
        """The random stream's key and counter on the device (`random` advances it there,
        in stream order, so a replay or a CUDA graph draws the next numbers each time):
        uploaded from the interpreter's stream on the first draw, which is its only state
        from then on."""
        if self.device_stream is None:
            self.device_stream = self.device.upload(self.rng.state)
            self.uploads[id(self.rng.state)] = (self.rng.state, self.device_stream)
        return self.device_stream

    # ------------------------------------------------------------ dot

    def run_dot(self, inst: Instruction, frame: Frame) -> Any:
        """A matrix product (batched over leading dimensions, or of two vectors) on the
        device: the library's GEMM where it serves the data type, else a generated kernel.
        A transposed view is read through the transpose flags."""
        a, b = frame.get(inst.lhs), frame.get(inst.rhs)
        (sa, da), (sb, db) = shape_dtype(a), shape_dtype(b)
        trans_a, trans_b = isinstance(a, Transposed), isinstance(b, Transposed)
        if da != db or len(sa) != len(sb) or not sa:
            return self.run_host(inst, frame)
        if len(sa) == 1:
            if sa[0] != sb[0]:
                return self.run_host(inst, frame)
            batch, m, k, n = (), 1, sa[0], 1
        else:
            if sa[:-2] != sb[:-2] or sa[-1] != sb[-2]:
                return self.run_host(inst, frame)
            batch, m, k, n = sa[:-2], sa[-2], sa[-1], sb[-1]
        if not (trans_a or trans_b or isinstance(a, DeviceArray) or
                isinstance(b, DeviceArray)) and np.size(a) * n < 4096:
            return self.run_host(inst, frame)  # a tiny product of host values
        pa = a.base if trans_a else self.device_value(a)
        pb = b.base if trans_b else self.device_value(b)
        count = int(np.prod(batch, dtype=np.int64)) if batch else 1
        out = self.device.empty((*batch, m, n) if len(sa) > 1 else (), da)
        if not m * n * count:
            return out
        if k == 0:
            self.device.fill_zero(out.ptr, out.nbytes)
            return out
        lda = m if trans_a else k  # the row length of each operand as stored
        ldb = k if trans_b else n
        if self.device.gemm(da, trans_a, trans_b, m, n, k, pa.ptr, lda, pb.ptr, ldb, out.ptr,
                            n, count):
            self.stats["gemm library calls"] += 1
            return out
        key = (da.str, count, m, n, k, trans_a, trans_b)
        found = self.gemms.get(key)
        if found is None:
            name = f"gemm{self.next_id()}"
            lhs = self.module.resolve(inst.lhs.type)
            assert isinstance(lhs, TensorType)
            module, launch = gemm_module(name, lhs.dtype, count, m, n, k, self.flavour,
                                         trans_a=trans_a, trans_b=trans_b)
            found = self.gemms[key] = (self.load(module, [name])[name], launch)
        handle, launch = found
        self.device.launch(handle, launch.grid, launch.block, 0,
                           [KernelArg(ctypes.c_void_p, x.ptr) for x in (out, pa, pb)])
        self.stats["launches"] += 1
        return out

    # ------------------------------------------------------------ checks

    def check_arguments(self, fn: Function, block: Any, args: list[Any],
                        checks: list[tuple[int, Type, Any]]) -> None:
        super().check_arguments(fn, block, [shaped(a) for a in args], checks)

    def check_result(self, fn: Function, value: Any) -> None:
        super().check_result(fn, shaped(value))

    def coerce(self, value: Any, t: Type, index: int) -> Any:
        t = self.module.resolve(t)
        if isinstance(t, TensorType):
            if isinstance(value, DeviceArray):
                check_conforms(shaped(value), t, self.module, f"argument {index}")
                if value.dtype != np.dtype(numpy_dtype(t.dtype)):
                    raise ExecutionError(f"argument {index}: a device array of {value.dtype} "
                                         f"where {t} is expected")
                return value
            if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
                imported = import_array(value, self.device)
                if imported is not None:
                    return self.coerce(imported, t, index)
            arr = convert_argument(value, t, f"argument {index}")
            return self.device.upload(arr) if arr.ndim else arr
        if isinstance(t, TupleType):
            if not isinstance(value, tuple | list) or len(value) != len(t.elements):
                raise ExecutionError(f"argument {index}: expected a tuple of type {t}")
            return tuple(self.coerce(v, et, index) for v, et in zip(value, t.elements,
                                                                     strict=True))
        return value


MISSING = object()


@dataclass
class Signature:
    """The replays of one signature (shapes and data types): by the values of the scalar
    arguments the first walk used on the host (`keyed`); the others are patched per call."""

    keyed: frozenset[int]
    replays: dict[tuple[Any, ...], Replay | None] = field(default_factory=dict)


def mark_used(x: Any) -> None:
    """Key the recording on the scalar arguments in `x` (their values are read)."""
    if isinstance(x, TracedScalar):
        x.used()
    elif isinstance(x, tuple | list):
        for e in x:
            mark_used(e)


def untraced(value: Any) -> Any:
    """A recorded call's result without `TracedScalar`s (an argument returned as it is)."""
    if isinstance(value, TracedScalar):
        return value.plain()
    if isinstance(value, tuple):
        return tuple(untraced(v) for v in value)
    return value


class WatchedRNG:
    """The interpreter's random generator while a call is recorded: drawing from it makes
    the call unreplayable (a replay would repeat the same numbers)."""

    def __init__(self, rng: np.random.Generator, recorder: Recorder) -> None:
        self._rng = rng
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        self._recorder.fail("it draws random numbers")
        return getattr(self._rng, name)


def view_shape(dims: list[int | None], size: int) -> list[int] | None:
    """A shapeCast's result shape for `size` elements: its dimensions, a `_` among them
    inferred as numpy's -1 is; None when they cannot hold exactly `size` elements."""
    known = int(np.prod([d for d in dims if d is not None], dtype=np.int64))
    unknown = [k for k, d in enumerate(dims) if d is None]
    if len(unknown) > 1 or (not unknown and known != size) or \
            (unknown and (known == 0 or size % known)):
        return None
    return [size // known if d is None else d for d in dims]


def tuple_elements(v: Value | None) -> list[Value]:
    if v is None:
        return []
    if isinstance(v, LiteralValue) and not isinstance(v.literal, ScalarLiteral) and getattr(
            v.literal, "kind", None) == "tuple":
        return list(v.literal.elements)  # type: ignore[attr-defined]
    return [v]


def aligned(values: list[Any]) -> bool:
    """Whether every device array among `values` starts on a 16-byte boundary (uploads and
    results do: the pool's memory is aligned; a view of rows may not be)."""
    return all(x.ptr % 16 == 0 for x in values if isinstance(x, DeviceArray))


def shaped(x: Any) -> Any:
    """A stand-in for shape checks: device arrays as zero-strided host arrays."""
    if isinstance(x, DeviceArray):
        return np.broadcast_to(np.zeros((), x.dtype), x.shape)
    if isinstance(x, tuple):
        return tuple(shaped(e) for e in x)
    return x


__all__ = ["LaunchPlan"]
