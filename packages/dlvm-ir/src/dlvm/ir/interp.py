"""The reference interpreter, target `interp`: the semantics every target must match.

It walks blocks and calls each instruction's `evaluate` from its `OpDef`,
so the interpreter itself knows only control flow, calls and literals.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import (
    AggregateLiteral,
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
from .runtime import (
    EnumValue,
    ExecutionError,
    Jump,
    Memory,
    Pointer,
    Return,
    as_tensor,
    numpy_dtype,
    zero_value,
)
from .target import Executable, Target, flatten_results
from .types import FunctionType, TensorType, TupleType, Type

MAX_CALL_DEPTH = 2000


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
        if not isinstance(fn, Function):
            raise ExecutionError("call of a value that is not a function")
        return self.interp.call_function(fn, args)


class Interpreter:
    def __init__(self, module: Module, seed: int = 0) -> None:
        self.module = module
        self.rng = np.random.default_rng(seed)
        self.depth = 0
        self.globals: dict[GlobalVariable, Pointer] = {}
        self.splats: dict[tuple[Any, Type], np.ndarray] = {}

    def global_pointer(self, g: GlobalVariable) -> Pointer:
        p = self.globals.get(g)
        if p is None:
            p = self.globals[g] = Pointer(Memory([zero_value(g.value_type, self.module)]))
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
        assert isinstance(lit, AggregateLiteral)
        elements = [frame.get(e) for e in lit.elements]
        if lit.kind == "tensor":
            assert isinstance(t, TensorType)
            sub = t.with_shape(t.shape[1:])
            if not elements:
                return np.zeros((0, *(d or 0 for d in sub.shape)), numpy_dtype(t.dtype))
            return np.stack([as_tensor(e, sub) for e in elements])
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
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, MAX_CALL_DEPTH * 4 + 1000))
        try:
            return self.call_function(fn, coerced)
        except RecursionError:
            raise ExecutionError("call stack overflow") from None
        finally:
            sys.setrecursionlimit(limit)

    def coerce(self, value: Any, t: Type, index: int) -> Any:
        t = self.module.resolve(t)
        if isinstance(t, TensorType):
            try:
                return as_tensor(value, t)
            except ExecutionError as e:
                raise ExecutionError(f"argument {index}: {e}") from None
            except (TypeError, ValueError) as e:
                raise ExecutionError(f"argument {index}: cannot convert to {t}: {e}") from None
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
        self.depth += 1
        if self.depth > MAX_CALL_DEPTH:
            self.depth = 0
            raise ExecutionError(f"call stack overflow (more than {MAX_CALL_DEPTH} nested calls)")
        try:
            return self.run(fn, args)
        finally:
            self.depth -= 1

    def run(self, fn: Function, args: list[Any]) -> Any:
        frame = Frame(self)
        values = frame.values
        block = fn.entry
        while True:
            for a, v in zip(block.arguments, args, strict=True):
                values[a] = v
            for inst in block.instructions:
                out = self.execute(inst, frame)
                if isinstance(out, Jump):
                    block, args = out.block, out.args
                    break
                if isinstance(out, Return):
                    return out.value
                values[inst] = out
            else:
                raise ExecutionError(f"block in '@{fn.name}' ended without a terminator")

    def execute(self, inst: Instruction, frame: Frame) -> Any:
        evaluate = inst.op.evaluate
        if evaluate is None:
            raise ExecutionError(f"instruction '{inst.opcode}' has no interpreter semantics")
        try:
            return evaluate(inst, frame)
        except ExecutionError as e:
            if getattr(e, "located", False):
                raise
            where = f"{inst.location}: " if inst.location else ""
            err = ExecutionError(f"{where}'{inst.opcode}': {e}")
            err.located = True  # type: ignore[attr-defined]
            raise err from None


class InterpExecutable(Executable):
    def __init__(self, module: Module, seed: int = 0) -> None:
        self.module = module
        self.interpreter = Interpreter(module, seed)

    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]:
        return flatten_results(self.interpreter.call(name, list(args)))

    def signature(self, name: str) -> FunctionType:
        fn = self.module.function(name)
        if fn is None:
            raise ExecutionError(f"no function '@{name}'")
        return fn.type_


@dataclass
class InterpTarget(Target):
    """The numpy reference interpreter; `seed` seeds the `random` instruction."""

    name = "interp"
    seed: int = 0

    def compile(self, module: Module) -> Executable:
        from .verifier import verify

        verify(module)
        return InterpExecutable(module, self.seed)
