"""Calling compiled code from Python: specializations, contexts, results without copies.

`LLVMExecutable.call(name, *arrays)` converts the arguments as every target does
(`convert_argument`), finds the build of `@name` for their shapes — compiling it on first
use, or loading it from the disk cache — and calls its entry function through ctypes.
Results are numpy arrays over the buffers the code allocated (numpy frees them), so nothing
is copied; a result that is one of the arguments, or that a global still holds, is copied
(`results.py`). Arguments that went in unconverted prepare their signature (class, dtype,
shape, contiguity): the next arguments of that signature go straight to the build, so a
call costs a tuple of attributes, a dictionary look-up and the native call.

A function gets a build per distinct argument shapes, up to `max_specializations`; beyond
that (or with `specialize=False`) one build with the function's own `_` dimensions serves
every shape. Each thread calling an executable has a context of its own.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir.random_stream import CounterStream
from dlvm.ir.runtime import ExecutionError, convert_argument, numpy_dtype
from dlvm.ir.types import ArrayType, TensorType, TupleType, Type, parse_data_type

# `lowering` completes DLVM's rule tables before any function is lowered
from ..codegen import arrays, fallback, jit, lowering, workers  # noqa: F401
from ..codegen.entry import EntryABI, Leaf, build_entry
from ..codegen.fallback import PYTHON_ERROR
from ..codegen.function import CompileUnit, ErrorSite, instruction_at, where
from ..codegen.layout import Layout
from ..codegen.rules import plugin_rules_key
from ..codegen.support import (
    CTX_CLOCK,
    CTX_DEADLINE,
    CTX_FREE,
    CTX_GLOBALS,
    CTX_PARAMS,
    CTX_RANDOM,
    CTX_RNG,
    CTX_SITE,
    CTX_SLOTS,
    CTX_THREADS,
    HEADER_BYTES,
    N_PARAMS,
)
from . import blas, pool
from .results import RECLAIMER, ResultReader, ResultSlots, words
from .threads import get_num_threads  # noqa: F401 — importing it puts the budget into the pool

_HELPER1 = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_HELPER2 = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
# what picks a prepared call: an argument passed as it is (an ndarray of the build's dtype,
# C-contiguous) has the signature it was prepared for
_SIGNATURE = operator.attrgetter("__class__", "dtype", "shape", "flags.c_contiguous")
_PREPARED_LIMIT = 4096  # signatures remembered per executable (generic builds take any)
# A module this large (DLVM instructions; a training step has about a hundred) may lower to
# enough LLVM IR to be compiled in parts by worker processes (`jit.emit`): they are started
# when a build of it is not in the cache, and get ready while it is lowered.
PARALLEL_COMPILE_MIN = 64
EXECUTABLE_IDS = itertools.count(1)  # how native code names its executable to callbacks


@dataclass
class NativeFunction:
    """One build of one function: its entry, its argument and result layout."""

    name: str
    abi: EntryABI
    sites: list[ErrorSite]
    type_names: list[str]
    address: int
    release: Callable[..., None]
    arg_dtypes: list[np.dtype[Any]] = field(default_factory=list)
    result_dtypes: list[np.dtype[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.arg_dtypes = [np.dtype(numpy_dtype(leaf.type.dtype)) for leaf in self.abi.args]
        self.result_dtypes = [np.dtype(numpy_dtype(leaf.type.dtype))
                              for leaf in self.abi.results]
        signature = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                     *[ctypes.py_object] * len(self.abi.args))
        self.entry = signature(self.address)
        self.reader = ResultReader(self.abi.results, self.result_dtypes)
        self.result_slots = self.abi.result_slots

    def __call__(self, ctx: Context, leaves: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """Call with the arguments' arrays (C-contiguous, of the right dtypes and shapes:
        the caller converts and checks them)."""
        return self.reader.read(self.run(ctx, leaves), self.release, ctx.address)

    def call_one(self, ctx: Context, leaves: Sequence[np.ndarray]) -> np.ndarray:
        """`__call__` of a build whose one result is a tensor: that result."""
        return self.reader.read_one(self.run(ctx, leaves), self.release, ctx.address)

    def run(self, ctx: Context, leaves: Sequence[np.ndarray]) -> ResultSlots:
        """Run the entry function; the slots it wrote the results to."""
        slots = ctx.slots
        if self.result_slots > slots.size:
            slots = ctx.grow(self.result_slots)
        if RECLAIMER.pending:
            RECLAIMER.drain(ctx.words, CTX_FREE)
        if self.entry(ctx.address, slots.address, *leaves):
            raise ExecutionError(ctx.error(self))
        return slots


class Context:
    """The per-thread context of an executable: error slots, pool, globals, generator."""

    def __init__(self, executable: LLVMExecutable) -> None:
        self.memory = np.zeros(CTX_SLOTS, np.int64)
        self.address = self.memory.ctypes.data
        self.words = words(self.memory)
        self.memory[CTX_THREADS] = executable.threads
        self.memory[CTX_GLOBALS] = executable.globals_table.ctypes.data
        self.memory[CTX_RNG] = executable.rng_id
        self.memory[CTX_RANDOM] = executable.rng.state.ctypes.data
        self.memory[CTX_CLOCK] = time.CLOCK_MONOTONIC
        self.executable = weakref.ref(executable)
        self.slots = ResultSlots()

    def grow(self, slots: int) -> ResultSlots:
        """Result slots for a call that writes `slots` of them."""
        self.slots = ResultSlots(2 * slots)
        return self.slots

    def error(self, fn: NativeFunction) -> str:
        site = int(self.memory[CTX_SITE])
        params = [int(p) for p in self.memory[CTX_PARAMS:CTX_PARAMS + N_PARAMS]]
        if not 0 < site < len(fn.sites):
            return f"'@{fn.name}' failed (error site {site})"
        s = fn.sites[site]
        if s.message == PYTHON_ERROR:
            exe = self.executable()
            return s.where + (exe.fallback_error if exe is not None else "failed")
        return s.format(params, fn.type_names)


# the parts of a build the cache keeps: object, entry ABI, error sites, type names of stack
# items, the symbols of helpers Python calls, and the instructions called back into Python
CachedBuild = tuple[bytes, EntryABI, list[ErrorSite], list[str], dict[str, str],
                    list[list[Any]]]


class LLVMExecutable(ir.Executable):
    def __init__(self, module: ir.Module, *, threads: int = 1, opt_level: int = 3,
                 cache: bool = True, specialize: bool = True, max_specializations: int = 8,
                 seed: int = 0, timeout: float | None = None) -> None:
        self.module = module
        self.threads = threads
        self.opt_level = opt_level
        self.specialize = specialize
        self.max_specializations = max_specializations
        self.timeout = timeout
        self.disk = jit.DiskCache() if cache else None
        self.engine = jit.Engine()
        self.text = ir.print_module(module)
        self.instruction_count = sum(len(b.instructions) for f in module.functions
                                     for b in f.blocks)
        self.builds: dict[tuple[str, tuple[Any, ...]], NativeFunction] = {}
        # (name, argument signatures) → build, for arguments that need no conversion
        self.prepared: dict[tuple[str, tuple[Any, ...]], NativeFunction] = {}
        self.per_function: dict[str, int] = {}
        self.lock = threading.Lock()
        self.local = threading.local()
        self.layout = Layout(module)
        self.globals_table, self.global_cells = self.make_globals()
        self.rng_id = next(EXECUTABLE_IDS)
        self.rng = CounterStream(seed)  # native code advances its state in place
        fallback.register(self, self.rng_id)
        self.fallbacks: list[ir.Instruction] = []  # run by their numpy semantics
        self.fallback_error = ""
        self.contexts: list[Context] = []
        self.ctx_free: Callable[..., None] | None = None
        pool.register_symbols()
        if threads > 1:
            pool.address()  # kernels call it by name (without a BLAS nothing loaded it yet)

    # ------------------------------------------------------------ calling

    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]:
        try:  # arrays of a signature prepared before: nothing to check or convert
            native = self.prepared[name, tuple(map(_SIGNATURE, args))]
        except (KeyError, AttributeError, TypeError):
            return self.call_converting(name, args)
        try:
            ctx = self.local.ctx
        except AttributeError:
            ctx = self.context()
        if self.timeout is not None:
            self.set_deadline(ctx)
        return native(ctx, args)

    def _make_function(self, name: str) -> Callable[..., Any]:
        """`exe["f"]`, with the prepared path of `call` inlined where `@f` returns one array
        (the commonest case, and the one where the call is most of the time)."""
        general = super()._make_function(name)
        name = name.removeprefix("@")
        fn = self.module.function(name)
        result = self.module.resolve(fn.type_.result) if fn is not None else None
        if not isinstance(result, TensorType) or not result.rank:
            return general
        prepared, local = self.prepared, self.local

        def call(*args: Any) -> Any:
            try:
                native = prepared[name, tuple(map(_SIGNATURE, args))]
                ctx = local.ctx
            except (KeyError, AttributeError, TypeError):
                return general(*args)
            if self.timeout is not None:
                self.set_deadline(ctx)
            return native.call_one(ctx, args)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = general.__doc__
        return call

    def call_converting(self, name: str, args: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
        """`call` for arguments seen the first time, or that need converting or checking
        (with a one-line error for any that does not fit)."""
        ctx = self.context()
        if self.timeout is not None:
            self.set_deadline(ctx)
        given = name
        name = name.removeprefix("@")
        fn = self.module.function(name)
        if fn is None or not fn.blocks:
            raise ExecutionError(f"no function '@{name}' in module '{self.module.name}'")
        ftype = fn.type_
        if len(args) != len(ftype.arguments):
            raise ExecutionError(f"'@{name}' takes {len(ftype.arguments)} arguments, "
                                 f"{len(args)} given")
        leaves: list[np.ndarray] = []
        for k, (a, t) in enumerate(zip(args, ftype.arguments, strict=True)):
            leaves.extend(np.ascontiguousarray(x) for x in self.convert(a, t, f"argument {k}"))
        native = self.build(fn, leaves)
        if len(leaves) == len(args) and all(x is a for x, a in zip(leaves, args, strict=True)):
            # every argument went in as it was (a tensor, checked): the next arguments of
            # its signature go straight in
            if len(self.prepared) >= _PREPARED_LIMIT:
                self.prepared.clear()
            self.prepared[given, tuple(map(_SIGNATURE, args))] = native
        return native(ctx, leaves)

    def set_deadline(self, ctx: Context) -> None:
        assert self.timeout is not None
        ctx.memory[CTX_DEADLINE] = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + int(
            self.timeout * 1e9)

    def convert(self, value: Any, t: Type, what: str) -> list[np.ndarray]:
        t = self.module.resolve(t)
        if isinstance(t, TensorType):
            return [convert_argument(value, t, what)]
        parts = t.elements if isinstance(t, TupleType) else (
            [t.element] * t.count if isinstance(t, ArrayType) else None)
        if parts is None:
            raise ExecutionError(f"{what}: values of type {t} cannot be passed from Python")
        if not isinstance(value, tuple | list) or len(value) != len(parts):
            raise ExecutionError(f"{what}: expected a tuple of type {t}")
        return [x for v, e in zip(value, parts, strict=True) for x in self.convert(v, e, what)]

    def context(self) -> Context:
        ctx = getattr(self.local, "ctx", None)
        if ctx is None:
            ctx = self.local.ctx = Context(self)
            self.contexts.append(ctx)
        return ctx

    # ------------------------------------------------------------ building

    def build(self, fn: ir.Function, leaves: list[np.ndarray]) -> NativeFunction:
        name = fn.name or ""
        key = (name, tuple(a.shape for a in leaves))
        native = self.builds.get(key)
        if native is not None:
            return native
        with self.lock:
            native = self.builds.get(key)
            if native is not None:
                return native
            generic = not self.specialize or self.per_function.get(name, 0) >= \
                self.max_specializations
            arg_types = None if generic else self.shaped(fn, leaves)
            generic_key = (name, ("generic",))
            if generic and generic_key in self.builds:
                native = self.builds[generic_key]
            else:
                native = self.compile_function(fn, arg_types)
                if generic:
                    self.builds[generic_key] = native
                else:
                    self.per_function[name] = self.per_function.get(name, 0) + 1
            self.builds[key] = native
            return native

    def shaped(self, fn: ir.Function, leaves: list[np.ndarray]) -> tuple[Type, ...]:
        """The argument types with every tensor's dimensions those of its array."""
        it = iter(leaves)

        def shape(t: Type) -> Type:
            rt = self.module.resolve(t)
            if isinstance(rt, TensorType):
                return rt.with_shape(next(it).shape)
            if isinstance(rt, TupleType):
                return TupleType(tuple(shape(e) for e in rt.elements))
            if isinstance(rt, ArrayType):
                return ArrayType(rt.count, shape(rt.element))
            return t

        return tuple(shape(t) for t in fn.type_.arguments)

    def compile_function(self, fn: ir.Function, arg_types: tuple[Type, ...] | None
                         ) -> NativeFunction:
        name = fn.name or ""
        signature = ", ".join(map(str, arg_types)) if arg_types is not None else "generic"
        key = jit.cache_key(self.text, name, signature, f"threads={self.threads}",
                            f"opt={self.opt_level}", f"blas={blas.available()}",
                            f"arrays={arrays.layout()}", f"timeout={self.timeout}",
                            f"rules={plugin_rules_key(self.module)}")
        found = self.disk.get(key) if self.disk is not None else None
        cached = self.from_cache(key, *found) if found is not None else None
        if cached is not None:
            obj, abi, sites, type_names, helpers, fallbacks = cached
        else:
            if self.instruction_count >= PARALLEL_COMPILE_MIN:
                workers.prewarm()  # they start while this process lowers the function
            unit = CompileUnit(self.module, f"k{key[:16]}", threads=self.threads,
                               timeout=self.timeout)
            spec = unit.specializer.spec(fn, arg_types)
            abi = build_entry(unit, spec)
            unit.lower_all()
            helpers = unit.rt.export_helpers(unit.llmod.name)
            text = str(unit.llmod)
            obj = jit.emit(text, "jit", self.opt_level)  # type: ignore[assignment]
            sites, type_names = unit.sites, unit.type_names
            fallbacks = unit.fallbacks
            if fallbacks:
                helpers["fallback_base"] = f"{unit.llmod.name}.fallback_base"
            if self.disk is not None:
                self.disk.put(key, obj, {"abi": abi_to_json(abi), "helpers": helpers,
                                         "sites": [[s.message, s.where, s.types, s.at]
                                                   for s in sites],
                                         "type_names": type_names, "fallbacks": fallbacks})
        self.engine.load(obj)
        if fallbacks:
            base = self.engine.ee.get_global_value_address(helpers["fallback_base"])
            ctypes.c_int64.from_address(base).value = len(self.fallbacks)
            self.fallbacks.extend(self.instruction_at(*place) for place in fallbacks)
        release = _HELPER2(self.engine.address(helpers["release"]))
        if self.ctx_free is None:
            self.ctx_free = _HELPER1(self.engine.address(helpers["ctx_free"]))
            weakref.finalize(self, _free_contexts, self.ctx_free, self.contexts)
        return NativeFunction(name, abi, sites, type_names, self.engine.address(abi.symbol),
                              release)

    def from_cache(self, key: str, obj: bytes, info: dict[str, Any]) -> CachedBuild | None:
        """A cache entry's build, or None (with a warning) when its description does not
        fit this module: its digest matched, so only an entry written on purpose gets here."""
        try:
            return (obj, abi_from_json(info["abi"]),
                    [self.cached_site(*s) for s in info["sites"]],
                    [str(name) for name in info["type_names"]],
                    {str(k): str(v) for k, v in info["helpers"].items()},
                    [self.checked_place(place) for place in info.get("fallbacks", [])])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, AssertionError,
                ir.DlvmError):
            assert self.disk is not None
            self.disk.damaged(key, "its description does not fit the module")
            return None

    def checked_place(self, place: list[Any]) -> list[Any]:
        """A place of an instruction as the cache stores it, checked to be in this module."""
        self.instruction_at(*place)
        return list(place)

    def instruction_at(self, function: str, block: int, index: int) -> ir.Instruction:
        return instruction_at(self.module, (function, block, index))

    def cached_site(self, message: str, where_text: str, types: bool,
                    at: list[Any] | None = None) -> ErrorSite:
        """An error site as the cache stores it, located in this module: the cached code
        may have been built for the same text read from another file."""
        if at is None:
            return ErrorSite(message, where_text, types)
        place = (str(at[0]), int(at[1]), int(at[2]))
        return ErrorSite(message, where(self.instruction_at(*place)), types, place)

    def fallback(self, index: int) -> ir.Instruction:
        return self.fallbacks[index]

    # ------------------------------------------------------------ globals

    def make_globals(self) -> tuple[np.ndarray, list[np.ndarray]]:
        jit.initialize()
        td = jit.target_machine().target_data
        cells = []
        for g in self.module.globals:
            lt = self.layout.lower(g.value_type)
            size = HEADER_BYTES + int(lt.get_abi_size(td))
            cells.append(np.zeros(size // 8 + 1, np.int64))
        table = np.array([c.ctypes.data for c in cells] or [0], np.int64)
        return table, cells


def _free_contexts(ctx_free: Callable[..., None], contexts: list[Context]) -> None:
    for ctx in contexts:
        ctx_free(ctx.address)


# ---------------------------------------------------------------- (de)serializing the ABI


def abi_to_json(abi: EntryABI) -> dict[str, Any]:
    def leaves(xs: list[Leaf]) -> list[list[Any]]:
        return [[str(x.type), x.slot] for x in xs]

    return {"symbol": abi.symbol, "args": leaves(abi.args), "arg_slots": abi.arg_slots,
            "results": leaves(abi.results), "result_slots": abi.result_slots,
            "result_is_tuple": abi.result_is_tuple}


def abi_from_json(data: dict[str, Any]) -> EntryABI:
    def leaves(xs: list[list[Any]]) -> list[Leaf]:
        return [Leaf(tensor_type_from_text(text), int(slot)) for text, slot in xs]

    return EntryABI(data["symbol"], leaves(data["args"]), int(data["arg_slots"]),
                    leaves(data["results"]), int(data["result_slots"]),
                    bool(data["result_is_tuple"]))


def tensor_type_from_text(text: str) -> TensorType:
    """`f32` or `<2 x _ x f32>` back into a TensorType (the cache stores types as text)."""
    inner = text.strip("<>")
    parts = [p.strip() for p in inner.split(" x ")]
    dtype = parse_data_type(parts[-1])
    if dtype is None:
        raise ValueError(f"not a tensor type: {text}")
    return TensorType(tuple(None if p == "_" else int(p) for p in parts[:-1]), dtype)

