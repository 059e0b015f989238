"""The reference interpreter, target `interp`: the semantics every target must match.

It walks blocks and calls each instruction's `evaluate` from its `OpDef`,
so the interpreter itself knows only control flow, calls and literals.

Two ways in, for tools and plugins: `observe(inst, frame, value)` is called after every
instruction (a tracer, a profiler, a check of every intermediate value), and a subclass
may override `Interpreter.evaluate` to change what some instructions compute while the
walk, the limits and the error reporting stay the same. Unused, neither costs anything.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import (
    AggregateLiteral,
    Block,
    DenseLiteral,
    DerivativeDecl,
    Function,
    GlobalVariable,
    Instruction,
    KeywordLiteral,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from .diagnostics import DlvmError
from .random_stream import CounterStream
from .runtime import (
    EnumValue,
    ExecutionError,
    Jump,
    Memory,
    Pointer,
    Return,
    as_tensor,
    check_conforms,
    convert_argument,
    format_np_shape,
    has_static_dims,
    numpy_dtype,
    read_only,
    zero_value,
)
from .target import Executable, Target, check_option, flatten_results
from .types import FunctionType, TensorType, TupleType, Type

MAX_CALL_DEPTH = 2000
# Python frames one IR call costs (run, execute, evaluate, apply, call_function, with
# room for combinators called from numpy): the recursion limit while running.
FRAMES_PER_CALL = 12


class Frame:
    """The values of one function activation."""

    __slots__ = ("interp", "module", "rng", "values")

    def __init__(self, interp: Interpreter) -> None:
        self.interp = interp
        self.module = interp.module
        self.rng = interp.rng
        self.values: dict[Value, Any] = {}

    def get(self, v: Value) -> Any:
        try:
            return self.values[v]
        except KeyError:
            pass
        if isinstance(v, LiteralValue):
            return self.interp.literal(v, self)
        if isinstance(v, Function):
            return v
        if isinstance(v, GlobalVariable):
            return self.interp.global_pointer(v)
        raise ExecutionError(f"use of a value that has not been computed: {v!r}")

    def call_function(self, fn: Any, args: list[Any]) -> Any:
        if fn is None:
            raise ExecutionError("call of a null function")
        if not isinstance(fn, Function):
            raise ExecutionError("call of a value that is not a function")
        return self.interp.call_function(fn, args)


Observe = Callable[[Instruction, "Frame", Any], None]
"""`observe(inst, frame, value)`: called after each instruction with its result (None for a
terminator); `frame.get(v)` reads any value computed so far in the same call."""


class Interpreter:
    """Runs a module's functions; `max_steps` (instructions) and `timeout` (seconds) bound
    each call from outside, so a program that loops forever ends with an error, and
    `observe` (see `Observe`) watches every instruction run."""

    def __init__(self, module: Module, seed: int = 0, max_steps: int | None = None,
                 timeout: float | None = None, *, observe: Observe | None = None) -> None:
        self.module = module
        self.observe = observe
        self.rng = CounterStream(seed)  # what `random` draws from, the same on every target
        self.depth = 0
        self.max_steps = max_steps
        self.timeout = timeout
        self.steps = 0
        self.deadline = math.inf
        self.globals: dict[GlobalVariable, Pointer] = {}
        self.splats: dict[tuple[ScalarLiteral, Type], np.ndarray] = {}
        # the block arguments and function results whose static dimensions are checked
        self.arg_checks: dict[Block, list[tuple[int, Type, Any]]] = {}
        self.result_checks: dict[Function, bool] = {}

    def global_pointer(self, g: GlobalVariable) -> Pointer:
        p = self.globals.get(g)
        if p is None:
            p = self.globals[g] = Pointer(Memory.holding(zero_value(g.value_type, self.module)))
        return p

    # ------------------------------------------------------------ literals

    def literal(self, v: LiteralValue, frame: Frame) -> Any:
        lit = v.literal
        t = self.module.resolve(v.type)
        if isinstance(lit, ScalarLiteral):
            key = (lit, t)
            arr = self.splats.get(key)
            if arr is None:
                if not isinstance(t, TensorType):
                    raise ExecutionError(f"scalar literal of type {t}")
                if not t.is_static:
                    raise ExecutionError(f"cannot splat a literal to the dynamic type {t}")
                arr = np.full(tuple(d for d in t.shape if d is not None), lit.value,
                              numpy_dtype(t.dtype))
                arr.flags.writeable = False
                self.splats[key] = arr
            return arr
        if isinstance(lit, KeywordLiteral):
            return None if lit.keyword == "null" else zero_value(t, self.module)
        if isinstance(lit, DenseLiteral):
            assert isinstance(t, TensorType)
            return lit.array(numpy_dtype(t.dtype), tuple(d or 0 for d in t.shape))
        assert isinstance(lit, AggregateLiteral)
        elements = [frame.get(e) for e in lit.elements]
        if lit.kind == "tensor":
            assert isinstance(t, TensorType)
            sub = t.with_shape(t.shape[1:])
            if not elements:
                return np.zeros((0, *(d or 0 for d in sub.shape)), numpy_dtype(t.dtype))
            rows = [as_tensor(e, sub) for e in elements]
            for k, row in enumerate(rows[1:], 1):
                if row.shape != rows[0].shape:
                    raise ExecutionError(f"tensor literal element {k} has shape "
                                         f"{format_np_shape(row.shape)}, not "
                                         f"{format_np_shape(rows[0].shape)}")
            return np.stack(rows)
        if lit.kind == "struct":
            return dict(zip(lit.keys, elements, strict=True))
        if lit.kind == "enum":
            return EnumValue(lit.keys[0], tuple(elements))
        return tuple(elements)

    # ------------------------------------------------------------ calls

    def call(self, name: str, args: list[Any]) -> Any:
        fn = self.module.function(name)
        if fn is None:
            raise ExecutionError(f"no function '@{name}' in module '{self.module.name}'")
        ftype = fn.type_
        if len(args) != len(ftype.arguments):
            raise ExecutionError(f"'@{name}' takes {len(ftype.arguments)} arguments, "
                                 f"{len(args)} given")
        coerced = [self.coerce(a, t, i) for i, (a, t) in enumerate(
            zip(args, ftype.arguments, strict=True))]
        return self.invoke(fn, coerced)

    def invoke(self, fn: Function, coerced: list[Any]) -> Any:
        """Run `fn` on arguments already coerced to its types, as a call from outside (a
        fresh step budget and deadline, a call stack of its own)."""
        limit, depth = sys.getrecursionlimit(), self.depth
        self.steps = 0
        self.deadline = math.inf if self.timeout is None else time.monotonic() + self.timeout
        sys.setrecursionlimit(max(limit, MAX_CALL_DEPTH * FRAMES_PER_CALL + 1000))
        try:
            return self.call_function(fn, coerced)
        except RecursionError:
            raise ExecutionError("call stack overflow") from None
        finally:
            sys.setrecursionlimit(limit)
            self.depth = depth

    def coerce(self, value: Any, t: Type, index: int) -> Any:
        t = self.module.resolve(t)
        if isinstance(t, TensorType):  # the caller's array, which the call never writes
            return read_only(convert_argument(value, t, f"argument {index}"))
        if isinstance(t, TupleType):
            if not isinstance(value, tuple | list) or len(value) != len(t.elements):
                raise ExecutionError(f"argument {index}: expected a tuple of type {t}")
            return tuple(self.coerce(v, et, index) for v, et in zip(value, t.elements,
                                                                     strict=True))
        return value

    def call_function(self, fn: Function, args: list[Any]) -> Any:
        if not fn.blocks:
            if isinstance(fn.declaration, DerivativeDecl):
                raise ExecutionError(f"'@{fn.name}' is a gradient declaration: run the "
                                     "'differentiation' pass (dlvm-ad) first")
            raise ExecutionError(f"'@{fn.name}' is an external declaration and has no body")
        if self.depth >= MAX_CALL_DEPTH:
            raise ExecutionError(f"call stack overflow (more than {MAX_CALL_DEPTH} nested calls)")
        self.depth += 1
        try:
            return self.run(fn, args)
        finally:
            self.depth -= 1

    def run(self, fn: Function, args: list[Any]) -> Any:
        frame = Frame(self)
        values = frame.values
        block = fn.entry
        arg_checks = self.arg_checks
        bounded = self.max_steps is not None or self.timeout is not None
        execute = self.execute if self.observe is None else self.execute_observed
        while True:
            if bounded:
                self.count_steps(fn, len(block.instructions))
            checks = arg_checks.get(block)
            if checks is None:
                checks = arg_checks[block] = self.argument_checks(block)
            if checks:
                self.check_arguments(fn, block, args, checks)
            for a, v in zip(block.arguments, args, strict=True):
                values[a] = v
            for inst in block.instructions:
                out = execute(inst, frame)
                if isinstance(out, Jump):
                    block, args = out.block, out.args
                    break
                if isinstance(out, Return):
                    self.check_result(fn, out.value)
                    return out.value
                values[inst] = out
            else:
                raise ExecutionError(f"block in '@{fn.name}' ended without a terminator")

    def count_steps(self, fn: Function, n: int) -> None:
        """Charge a block's instructions to the call's budget (checked as each block starts,
        which every loop does)."""
        self.steps += n
        if self.max_steps is not None and self.steps > self.max_steps:
            raise ExecutionError(f"'@{fn.name}' exceeded the limit of {self.max_steps} steps "
                                 "(instructions executed)")
        if time.monotonic() > self.deadline:
            raise ExecutionError(f"'@{fn.name}' exceeded the timeout of {self.timeout:g} s")

    def argument_checks(self, block: Block) -> list[tuple[int, Type, Any]]:
        """The arguments with static dimensions: (index, type, shape when fully static)."""
        out = []
        for i, a in enumerate(block.arguments):
            t = self.module.resolve(a.type)
            if has_static_dims(t, self.module):
                static = isinstance(t, TensorType) and t.is_static
                out.append((i, t, tuple(t.shape) if static else None))
        return out

    def check_arguments(self, fn: Function, block: Block, args: list[Any],
                        checks: list[tuple[int, Type, Any]]) -> None:
        """Values of types with `_` may be passed where static dimensions are expected."""
        for i, t, shape in checks:
            v = args[i]
            if shape is not None and getattr(v, "shape", None) == shape:
                continue  # the common case, fast
            where = "" if block is fn.entry else f"block '{block.name or '?'} of "
            check_conforms(v, t, self.module, f"argument {i} of {where}'@{fn.name}'")

    def check_result(self, fn: Function, value: Any) -> None:
        check = self.result_checks.get(fn)
        if check is None:
            check = self.result_checks[fn] = has_static_dims(fn.type_.result, self.module)
        if check:
            check_conforms(value, fn.type_.result, self.module, f"the result of '@{fn.name}'")

    def execute_observed(self, inst: Instruction, frame: Frame) -> Any:
        """`execute`, then `observe` with the instruction's value (None after a terminator)."""
        out = self.execute(inst, frame)
        assert self.observe is not None
        self.observe(inst, frame, None if isinstance(out, Jump | Return) else out)
        return out

    def execute(self, inst: Instruction, frame: Frame) -> Any:
        """Run one instruction; its failures name it and where it is written."""
        try:
            return self.evaluate(inst, frame)
        except ExecutionError as e:
            if getattr(e, "located", False):
                raise
            raise located(inst, str(e)) from None
        except MemoryError as e:
            raise located(inst, f"out of memory ({e or 'allocation failed'})") from None

    def evaluate(self, inst: Instruction, frame: Frame) -> Any:
        """The instruction's numpy semantics. A subclass that computes some instructions
        differently overrides this and calls `super().evaluate(inst, frame)` for the rest;
        `execute` keeps naming the instruction in errors."""
        evaluate = inst.op.evaluate
        if evaluate is None:
            raise _no_semantics(inst)
        return evaluate(inst, frame)


def _no_semantics(inst: Instruction) -> ExecutionError:
    return ExecutionError(f"instruction '{inst.opcode}' has no interpreter semantics")


def located(inst: Instruction, problem: str) -> ExecutionError:
    """An error naming the instruction, and where it is written when it came from text."""
    where = f"{inst.location}: " if inst.location else ""
    err = ExecutionError(f"{where}'{inst.opcode}': {problem}")
    err.located = True  # type: ignore[attr-defined]
    return err


class InterpExecutable(Executable):
    """A module run by an `Interpreter` (or by `interpreter`, an instance of a subclass)."""

    def __init__(self, module: Module, seed: int = 0, max_steps: int | None = None,
                 timeout: float | None = None, *, observe: Observe | None = None,
                 interpreter: Interpreter | None = None) -> None:
        self.module = module
        self.interpreter = interpreter if interpreter is not None else Interpreter(
            module, seed, max_steps, timeout, observe=observe)

    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]:
        return flatten_results(self.interpreter.call(name, list(args)))

    def signature(self, name: str) -> FunctionType:
        fn = self.module.function(name)
        if fn is None:
            raise ExecutionError(f"no function '@{name}'")
        return fn.type_


@dataclass
class InterpTarget(Target):
    """The numpy reference interpreter.

    `seed` seeds the `random` instruction; `max_steps` bounds the instructions one call
    may execute and `timeout` its seconds (None: no bound); `observe` (from Python only,
    `ir.compile(m, target="interp", observe=fn)`) is called after every instruction.
    """

    name = "interp"
    seed: int = 0
    max_steps: int | None = None
    timeout: float | None = None
    observe: Observe | None = None

    def __post_init__(self) -> None:
        check_option("seed", self.seed, int, minimum=0)
        check_option("max_steps", self.max_steps, int, minimum=1, optional=True)
        check_option("timeout", self.timeout, float, minimum=0, optional=True)
        if self.observe is not None and not callable(self.observe):
            raise DlvmError("target option 'observe' must be a function "
                            f"observe(inst, frame, value), found {self.observe!r}")

    def compile(self, module: Module) -> Executable:
        from .verifier import verify

        verify(module)
        return InterpExecutable(module, self.seed, self.max_steps, self.timeout,
                                observe=self.observe)
