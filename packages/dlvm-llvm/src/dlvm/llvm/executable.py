"""Calling compiled code from Python: specializations, contexts, results without copies.

`LLVMExecutable.call(name, *arrays)` converts the arguments as every target does
(`convert_argument`), finds the build of `@name` for their shapes — compiling it on first
use, or loading it from the disk cache — and calls its entry function through ctypes.
Results are numpy arrays over the buffers the code allocated (numpy frees them), so nothing
is copied; a result that is one of the arguments, or that a global still holds, is copied.

A function gets a build per distinct argument shapes, up to `max_specializations`; beyond
that (or with `specialize=False`) one build with the function's own `_` dimensions serves
every shape. Each thread calling an executable has a context of its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir.runtime import ExecutionError, convert_argument, numpy_dtype
from dlvm.ir.types import ArrayType, TensorType, TupleType, Type

# `lowering` completes DLVM's rule tables before any function is lowered
from . import arrays, blas, jit, lowering  # noqa: F401
from .entry import EntryABI, Leaf, build_entry
from .function import CompileUnit, ErrorSite, instruction_at, where
from .layout import Layout
from .rules import plugin_rules_key
from .runtime import (
    CTX_CLOCK,
    CTX_DEADLINE,
    CTX_FREE,
    CTX_GLOBALS,
    CTX_PARAMS,
    CTX_RNG,
    CTX_SITE,
    CTX_SLOTS,
    CTX_THREADS,
    N_PARAMS,
)

_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_free = _libc.free
_free.argtypes = [ctypes.c_void_p]
_HELPER1 = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_HELPER2 = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class Reclaimer:
    """Buffers the compiled code handed to Python, back for reuse once numpy is done.

    A result is a pool buffer that leaves the pool with its array. Freeing it to libc when
    the array dies would hand large buffers back to the kernel, and the next call would
    fault a fresh one in page by page (for a 16 MB result that costs more than computing
    it). So a dead result's buffer waits here, and the next call on any thread puts it on
    that thread's free lists before it runs (Python holds the GIL for both steps, so native
    code never races with this). At most `limit` bytes wait; beyond that, libc frees them.
    """

    def __init__(self, limit: int = 1 << 31) -> None:
        self.pending: list[tuple[int, int]] = []  # (buffer, size class)
        self.bytes = 0
        self.limit = limit

    def put(self, buf: int) -> None:
        cls = ctypes.c_int64.from_address(buf + 8).value
        size = 64 << cls if cls >= 0 else 0
        if cls < 0 or self.bytes + size > self.limit:
            _free(buf)
            return
        self.pending.append((buf, cls))
        self.bytes += size

    def drain(self, memory: np.ndarray) -> None:
        """Put the waiting buffers on the free lists of the context `memory`."""
        pending, self.pending, self.bytes = self.pending, [], 0
        for buf, cls in pending:
            slot = CTX_FREE + cls
            ctypes.c_int64.from_address(buf + 16).value = int(memory[slot])
            memory[slot] = buf


RECLAIMER = Reclaimer()


class _Owner:
    """Gives a buffer the compiled code handed to Python back when numpy no longer needs
    it."""

    __slots__ = ("buf",)

    def __init__(self, buf: int) -> None:
        self.buf = buf

    def __del__(self) -> None:
        try:
            RECLAIMER.put(self.buf)
        except Exception:  # at interpreter exit the reclaimer may be gone
            _free(self.buf)


class _View:
    """An `__array_interface__` over a buffer, keeping the buffer's owner alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, owner: _Owner, data: int, shape: tuple[int, ...], dtype: np.dtype[Any]
                 ) -> None:
        self.owner = owner
        self.__array_interface__ = {"data": (data, False), "shape": shape,
                                    "typestr": dtype.str, "version": 3}


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

    def __call__(self, ctx: Context, leaves: list[np.ndarray]) -> list[np.ndarray]:
        """Call with the arguments' arrays (C-contiguous, of the right dtypes: the caller
        converts them)."""
        results, address = ctx.results(self.abi.result_slots)
        if RECLAIMER.pending:
            RECLAIMER.drain(ctx.memory)
        status = self.entry(ctx.address, address, *leaves)
        if status:
            raise ExecutionError(ctx.error(self))
        return self.wrap(ctx, results)

    def wrap(self, ctx: Context, results: np.ndarray) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        counts: dict[int, int] = {}
        leaves = self.abi.results
        for leaf in leaves:
            if leaf.type.rank:
                buf = int(results[leaf.slot])
                counts[buf] = counts.get(buf, 0) + 1
        # Whether Python may own a buffer is decided on its count before any is released:
        # copying one result drops that result's reference, and a later result of the same
        # buffer (a global's value returned twice) must not then look like the only holder.
        owners: dict[int, _Owner | None] = {}
        for buf, n in counts.items():
            if buf:
                count = ctypes.c_int64.from_address(buf).value
                owners[buf] = _Owner(buf) if count == n else None
        for leaf, dtype in zip(leaves, self.result_dtypes, strict=True):
            if leaf.type.rank == 0:
                raw = results[leaf.slot:leaf.slot + 1].view(np.uint8)[:dtype.itemsize]
                out.append(raw.view(dtype).reshape(()).copy())
                continue
            buf, data = int(results[leaf.slot]), int(results[leaf.slot + 1])
            shape = tuple(results[leaf.slot + 2:leaf.slot + 2 + leaf.type.rank].tolist())
            if not buf:  # a value that was never defined
                out.append(np.zeros(shape, dtype))
                continue
            owner = owners[buf]
            if owner is not None:
                out.append(np.asarray(_View(owner, data, shape, dtype)))
                continue
            # not ours alone (an argument's, a constant's, a global's): copy it, and drop the
            # reference the result held (a count below zero marks memory nobody counts)
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            raw = (ctypes.c_char * size).from_address(data) if size else b""
            out.append(np.frombuffer(bytes(raw), dtype).reshape(shape).copy())
            if ctypes.c_int64.from_address(buf).value > 0:
                self.release(ctx.address, buf)
        return out


class Context:
    """The per-thread context of an executable: error slots, pool, globals, generator."""

    def __init__(self, executable: LLVMExecutable) -> None:
        self.memory = np.zeros(CTX_SLOTS, np.int64)
        self.address = self.memory.ctypes.data
        self.memory[CTX_THREADS] = executable.threads
        self.memory[CTX_GLOBALS] = executable.globals_table.ctypes.data
        self.memory[CTX_RNG] = executable.rng_id
        self.memory[CTX_CLOCK] = time.CLOCK_MONOTONIC
        self.executable = weakref.ref(executable)
        self._results = np.zeros(64, np.int64)
        self._results_address = self._results.ctypes.data

    def results(self, slots: int) -> tuple[np.ndarray, int]:
        """The slots a call writes its results to (reused: calls on a context are serial)."""
        if slots > len(self._results):
            self._results = np.zeros(2 * slots, np.int64)
            self._results_address = self._results.ctypes.data
        return self._results, self._results_address

    def error(self, fn: NativeFunction) -> str:
        from .fallback import PYTHON_ERROR

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
        self.builds: dict[tuple[str, tuple[Any, ...]], NativeFunction] = {}
        # the argument dtypes of functions whose arguments are all tensors (the fast path)
        self.fast: dict[str, list[np.dtype[Any]]] = {}
        self.per_function: dict[str, int] = {}
        self.lock = threading.Lock()
        self.local = threading.local()
        self.layout = Layout(module)
        self.globals_table, self.global_cells = self.make_globals()
        from . import fallback
        from .random import register_generator

        self.rng_id = register_generator(self, seed)
        self.rng = np.random.default_rng(seed)
        fallback.register(self, self.rng_id)
        self.fallbacks: list[ir.Instruction] = []  # run by their numpy semantics
        self.fallback_error = ""
        self.contexts: list[Context] = []
        self.ctx_free: Callable[..., None] | None = None
        blas.register_symbols()
        if threads > 1:
            from . import pool

            pool.address()

    # ------------------------------------------------------------ calling

    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]:
        ctx = self.context()
        if self.timeout is not None:
            ctx.memory[CTX_DEADLINE] = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + int(
                self.timeout * 1e9)
        dtypes = self.fast.get(name)
        if dtypes is not None and len(args) == len(dtypes) and all(
                type(a) is np.ndarray and a.dtype is d and a.flags.c_contiguous
                for a, d in zip(args, dtypes, strict=True)):
            # arrays of the right dtypes, contiguous, of shapes seen before: straight in
            native = self.builds.get((name, tuple(a.shape for a in args)))
            if native is not None:
                return tuple(native(ctx, list(args)))
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
        if all(isinstance(self.module.resolve(t), TensorType) for t in ftype.arguments):
            self.fast[name] = [x.dtype for x in leaves]
        return tuple(native(ctx, leaves))

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
            unit = CompileUnit(self.module, f"k{key[:16]}", threads=self.threads,
                               timeout=self.timeout)
            spec = unit.specializer.spec(fn, arg_types)
            abi = build_entry(unit, spec)
            unit.lower_all()
            helpers = unit.rt.export_helpers(unit.llmod.name)
            text = str(unit.llmod)
            obj = jit.emit(text, "obj", self.opt_level)  # type: ignore[assignment]
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
        from .runtime import HEADER_BYTES

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
    from dlvm.ir.types import parse_data_type

    inner = text.strip("<>")
    parts = [p.strip() for p in inner.split(" x ")]
    dtype = parse_data_type(parts[-1])
    if dtype is None:
        raise ValueError(f"not a tensor type: {text}")
    return TensorType(tuple(None if p == "_" else int(p) for p in parts[:-1]), dtype)

