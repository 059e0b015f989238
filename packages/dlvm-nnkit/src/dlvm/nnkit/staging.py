"""Staging: Python functions over `Rep` values write DLVM IR.

A `StagedFunction` wraps a Python function. Inside another staged function, `f[x, w, b]`
emits a call to `@f` (staged once per argument types); applied to arrays, `f(x, w, b)` (or
`f[x, w, b]`) stages `f` and everything it calls into a module, compiles it through
`ir.compile` — differentiation, the optimizer and the fastest installed target — and runs
it, the build cached per argument types. `gradient(g, wrt=…)` and `tangent(g, wrt=…)` are
staged functions whose IR is a `[gradient …]` / `[tangent …]` declaration that the
`differentiation` pass fills in.

Errors found while staging (a rank or dtype mismatch, a wrong argument count) are
`StagingError`s naming the user's file and line.
"""

from __future__ import annotations

import inspect
import itertools
import operator
import re
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir import Builder, DlvmError, Function, FunctionType, TensorType, TupleType, Value
from dlvm.ir.core import DerivativeDecl
from dlvm.ir.opdef import TypeRuleError

from .types import TensorSpec

_PACKAGE_DIRS = (str(Path(__file__).resolve().parent), str(Path(ir.__file__).resolve().parent))
_STAGE: ContextVar[Stage | None] = ContextVar("dlvm_nnkit_stage", default=None)
_SIGNATURE = operator.attrgetter("dtype", "shape")  # what picks an array's build


class StagingError(DlvmError):
    """A staged program that does not type-check, located in the user's code."""


def user_location() -> str:
    """`file:line` of the innermost frame outside NNKit and dlvm-ir (the user's code)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = str(Path(frame.f_code.co_filename).resolve()) \
            if not frame.f_code.co_filename.startswith("<") else frame.f_code.co_filename
        if not name.startswith(_PACKAGE_DIRS):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"


def staging_error(message: str) -> StagingError:
    return StagingError(f"{user_location()}: error: {message}")


# ---------------------------------------------------------------- staged values


class Rep:
    """A staged tensor: an IR value of a known element type and rank."""

    __slots__ = ("spec", "stage", "value")
    __array_priority__ = 1000  # numpy defers `array + rep` to Rep.__radd__

    def __init__(self, value: Value, spec: TensorSpec, stage: Stage) -> None:
        self.value = value
        self.spec = spec
        self.stage = stage

    @property
    def shape(self) -> tuple[int | None, ...]:
        return self.spec.shape

    @property
    def dtype(self) -> ir.DataType:
        return self.spec.dtype

    @property
    def rank(self) -> int:
        return self.spec.rank

    @property
    def ndim(self) -> int:
        return self.spec.rank

    def __repr__(self) -> str:
        return f"Rep({self.spec})"

    def __bool__(self) -> bool:
        raise staging_error("a staged value has no truth value while staging: use "
                            "nnkit.cond (or select) for a branch on it")

    # arithmetic and comparisons: the functions of `ops`
    def __add__(self, other: Any) -> Rep:
        from . import ops
        return ops.add(self, other)

    def __radd__(self, other: Any) -> Rep:
        from . import ops
        return ops.add(other, self)

    def __sub__(self, other: Any) -> Rep:
        from . import ops
        return ops.subtract(self, other)

    def __rsub__(self, other: Any) -> Rep:
        from . import ops
        return ops.subtract(other, self)

    def __mul__(self, other: Any) -> Rep:
        from . import ops
        return ops.multiply(self, other)

    def __rmul__(self, other: Any) -> Rep:
        from . import ops
        return ops.multiply(other, self)

    def __truediv__(self, other: Any) -> Rep:
        from . import ops
        return ops.divide(self, other)

    def __rtruediv__(self, other: Any) -> Rep:
        from . import ops
        return ops.divide(other, self)

    def __pow__(self, other: Any) -> Rep:
        from . import ops
        return ops.power(self, other)

    def __matmul__(self, other: Any) -> Rep:
        from . import ops
        return ops.dot(self, other)

    def __rmatmul__(self, other: Any) -> Rep:
        from . import ops
        return ops.dot(other, self)

    def __neg__(self) -> Rep:
        from . import ops
        return ops.negate(self)

    def __lt__(self, other: Any) -> Rep:
        from . import ops
        return ops.less(self, other)

    def __le__(self, other: Any) -> Rep:
        from . import ops
        return ops.less_equal(self, other)

    def __gt__(self, other: Any) -> Rep:
        from . import ops
        return ops.greater(self, other)

    def __ge__(self, other: Any) -> Rep:
        from . import ops
        return ops.greater_equal(self, other)

    # shape helpers, as methods (the seed's `b.rankLifted()`)
    def rank_lifted(self) -> Rep:
        from . import ops
        return ops.pad_shape(self, 0)

    def squeeze(self, axis: int = 0) -> Rep:
        from . import ops
        return ops.squeeze(self, axis)

    def reshape(self, *shape: int | None) -> Rep:
        from . import ops
        return ops.reshape(self, shape[0] if len(shape) == 1 and isinstance(
            shape[0], tuple) else shape)

    @property
    def T(self) -> Rep:
        from . import ops
        return ops.transpose(self)

    def sum(self, axis: int | Sequence[int] | None = None) -> Rep:
        from . import ops
        return ops.sum(self, axis)

    def max(self, axis: int | Sequence[int] | None = None) -> Rep:
        from . import ops
        return ops.max(self, axis)

    def astype(self, dtype: ir.DataType) -> Rep:
        from . import ops
        return ops.cast(self, dtype)


class Stage:
    """The function being written: its builder, and the program it belongs to."""

    def __init__(self, program: Program, builder: Builder) -> None:
        self.program = program
        self.builder = builder

    def emit(self, method: str, *args: Any, **fields: Any) -> Rep:
        """`builder.<method>(…)` as a staged value, a type error located in user code."""
        try:
            inst = getattr(self.builder, method)(*args, **fields)
        except (DlvmError, TypeRuleError) as e:
            message = str(e)
            if not message.startswith("'"):
                message = f"'{inst_name(method)}': {message}"
            raise staging_error(message) from None
        t = inst.type
        if not isinstance(t, TensorType):
            raise staging_error(f"'{inst_name(method)}' gives a value of type {t}, "
                                "not a tensor")
        return Rep(inst, TensorSpec(t.dtype, t.shape), self)


def inst_name(method: str) -> str:
    return method.rstrip("_")


def current_stage() -> Stage | None:
    return _STAGE.get()


# ---------------------------------------------------------------- programs


class Program:
    """A module assembled from staged functions, each emitted once per argument types."""

    def __init__(self, name: str = "nnkit") -> None:
        self.module = ir.Module(name)
        self.emitted: dict[tuple[int, tuple[TensorSpec, ...]], Function] = {}
        self.results: dict[Function, Any] = {}  # the result spec(s) of each function
        self.names: set[str] = set()

    def unique(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "f"
        if not re.match(r"[A-Za-z_]", base):
            base = "f" + base
        found = base
        for n in itertools.count(1):
            if found not in self.names:
                break
            found = f"{base}_{n}"
        self.names.add(found)
        return found

    def function(self, staged: StagedFunction, specs: tuple[TensorSpec, ...]) -> Function:
        key = (id(staged), specs)
        found = self.emitted.get(key)
        if found is None:
            found = self.emitted[key] = staged.emit(self, specs)
        return found


# ---------------------------------------------------------------- staged functions


class StagedFunction:
    """A Python function staged into DLVM IR (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any] | None, arg_specs: Sequence[TensorSpec] | None
                 = None, *, name: str | None = None, dynamic: bool = False) -> None:
        self.fn = fn
        # named by the user (or by its `def`); the front end names the others after the
        # variable that holds them
        self.named = name is not None or (fn is not None and fn.__name__ != "<lambda>")
        self.name = name or (fn.__name__ if fn is not None and fn.__name__ != "<lambda>"
                             else "f")
        params = list(inspect.signature(fn).parameters.values()) if fn is not None else []
        variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
        self.arg_specs = tuple(arg_specs) if arg_specs is not None else None
        # `def f(*args)` takes as many arguments as its types say (or as it is given)
        self.arity = (len(self.arg_specs) if self.arg_specs is not None else None) \
            if variadic else (len(params) if fn is not None else None)
        self.arg_names = [] if variadic else [p.name for p in params]
        self.dynamic = dynamic
        self.builds: dict[tuple[TensorSpec, ...], tuple[str, ir.Executable]] = {}
        # (dtype, shape) of each argument → the compiled function, for arrays seen before
        self.fast: dict[tuple[tuple[Any, Any], ...], Callable[..., Any]] = {}

    def __repr__(self) -> str:
        specs = ", ".join(map(str, self.arg_specs)) if self.arg_specs else "…"
        return f"<staged function {self.name}: ({specs}) -> …>"

    # ------------------------------------------------------------ argument types

    def specs_for(self, given: Sequence[TensorSpec], what: str) -> tuple[TensorSpec, ...]:
        """The argument types of an application: the declared ones, refined by `given`."""
        if self.arity is not None and len(given) != self.arity:
            raise staging_error(f"{what} takes {self.arity} argument"
                                f"{'s' if self.arity != 1 else ''}, {len(given)} given")
        if self.arg_specs is None:
            return tuple(given)
        out = []
        for k, (want, got) in enumerate(zip(self.arg_specs, given, strict=True)):
            if not want.accepts(got):
                raise staging_error(f"argument {k} of {what} must be {want}, found {got}")
            out.append(want.refined(got))
        return tuple(out)

    # ------------------------------------------------------------ emission

    def emit(self, program: Program, specs: tuple[TensorSpec, ...]) -> Function:
        """Write this function for `specs` into `program`'s module."""
        assert self.fn is not None
        b = Builder(program.module)
        names = self.arg_names if len(self.arg_names) == len(specs) else [
            f"arg{k}" for k in range(len(specs))]
        fn = b.function(program.unique(self.name), [s.ir() for s in specs],
                        TupleType(()), names)
        stage = Stage(program, b)
        token = _STAGE.set(stage)
        try:
            args = [Rep(a, s, stage) for a, s in zip(fn.entry.arguments, specs, strict=True)]
            result = self.fn(*args)
        finally:
            _STAGE.reset(token)
        values = result if isinstance(result, tuple) else (result,)
        reps = [as_rep(v, stage, what=f"the result of '{self.name}'") for v in values]
        if isinstance(result, tuple):
            out = b.tuple([r.value for r in reps])
            fn.type = FunctionType(fn.type.arguments, out.type)
            program.results[fn] = tuple(r.spec for r in reps)
            b.ret(out)
        else:
            fn.type = FunctionType(fn.type.arguments, reps[0].value.type)
            program.results[fn] = reps[0].spec
            b.ret(reps[0].value)
        return fn

    # ------------------------------------------------------------ application

    def __getitem__(self, args: Any) -> Any:
        args = args if isinstance(args, tuple) else (args,)
        stage = current_stage()
        if stage is None:
            return self(*args)
        reps = [as_rep(a, stage, what=f"an argument of '{self.name}'") for a in args]
        specs = self.specs_for([r.spec for r in reps], f"'{self.name}'")
        callee = stage.program.function(self, specs)
        try:
            call = stage.builder.call(callee, [r.value for r in reps])
        except (DlvmError, TypeRuleError) as e:
            raise staging_error(f"calling '{self.name}': {e}") from None
        result = stage.program.results[callee]
        if isinstance(result, tuple):
            return tuple(stage.emit("extract", call, [k]) for k in range(len(result)))
        return Rep(call, result, stage)

    def __call__(self, *arrays: Any) -> Any:
        try:  # the common case first: arrays of dtypes and shapes seen before
            fast = self.fast[tuple(map(_SIGNATURE, arrays))]
        except (AttributeError, KeyError, TypeError):
            return self.first_call(arrays)
        return fast(*arrays)

    def first_call(self, arrays: tuple[Any, ...]) -> Any:
        """Stage and compile for new argument types (or reuse the build for their types)."""
        if current_stage() is not None:
            return self[arrays]
        arrays = tuple(host_array(a) for a in arrays)
        specs = self.specs_for([TensorSpec.of(a) for a in arrays], f"'{self.name}'")
        if self.dynamic:
            specs = tuple(s.erased() for s in specs)
        built = self.builds.get(specs)
        if built is None:
            module, name = self.staged_module(specs)
            built = self.builds[specs] = (name, ir.compile(module))
        name, exe = built
        call = exe[name]
        if all(isinstance(a, np.ndarray) for a in arrays):
            self.fast[tuple(map(_SIGNATURE, arrays))] = call
        return call(*arrays)

    def staged_module(self, specs: tuple[TensorSpec, ...]) -> tuple[ir.Module, str]:
        """A module with this function (and what it calls) for argument types `specs`, and
        the function's name there."""
        program = Program(self.name)
        fn = program.function(self, specs)
        ir.verify(program.module)
        return program.module, fn.name or ""

    def module_for(self, specs: tuple[TensorSpec, ...]) -> ir.Module:
        return self.staged_module(specs)[0]

    def ir(self, *args: Any, dynamic: bool = False, optimize: bool = False) -> str:
        """The DLVM IR of this function (and what it calls) for the types of `args` (arrays
        or `TensorSpec`s; none: the declared types); `dynamic` erases every size;
        `optimize` runs `differentiation,O2` first, as a compilation does."""
        if args:
            specs = self.specs_for([TensorSpec.of(a) for a in args], f"'{self.name}'")
        elif self.arg_specs is not None:
            specs = self.arg_specs
        else:
            raise staging_error(f"'{self.name}' declares no argument types: give arrays or "
                                "types to print its IR for")
        if dynamic:
            specs = tuple(s.erased() for s in specs)
        module = self.module_for(specs)
        if optimize:
            ir.run_passes(module, "differentiation,O2")
        return ir.print_module(module)


class DerivativeFunction(StagedFunction):
    """`gradient(of, …)` / `tangent(of, …)`: a staged declaration that differentiation fills
    in. Its arguments are those of `of` (and the seed, or the tangents)."""

    def __init__(self, kind: str, of: StagedFunction, wrt: tuple[int, ...] | None,
                 keeping: tuple[int, ...], seedable: bool, name: str | None) -> None:
        super().__init__(None, None, name=name or f"{'d' if kind == 'gradient' else 't'}"
                         f"{of.name}")
        self.kind = kind
        self.named = name is not None
        self.printing = False  # `ir()` may leave out the seed or the tangents
        self.of = of
        self.wrt = wrt
        self.keeping = keeping
        self.seedable = seedable
        self.dynamic = of.dynamic

    def primal_count(self, given: int) -> int:
        """How many of `given` arguments are the primal function's (the rest: the seed or
        the tangents)."""
        if self.of.arity is not None:
            return min(self.of.arity, given)
        return given - 1 if self.kind == "gradient" and self.seedable else given

    def ir(self, *args: Any, dynamic: bool = False, optimize: bool = False) -> str:
        """As for any staged function; the arguments (or, without any, the declared types
        of the differentiated function) may leave out the seed or the tangents."""
        if not args and self.of.arg_specs is not None:
            args = self.of.arg_specs
        self.printing = True
        try:
            return super().ir(*args, dynamic=dynamic, optimize=optimize)
        finally:
            self.printing = False

    def specs_for(self, given: Sequence[TensorSpec], what: str) -> tuple[TensorSpec, ...]:
        n = self.primal_count(len(given))
        primal = self.of.specs_for(list(given[:n]), f"'{self.of.name}'")
        return (*primal, *given[n:])

    def emit(self, program: Program, specs: tuple[TensorSpec, ...]) -> Function:
        n = self.primal_count(len(specs))
        of = program.function(self.of, tuple(specs[:n]))
        decl = DerivativeDecl(self.kind, of, None, self.wrt, self.keeping, self.seedable)
        try:
            from dlvm.ir.derivatives import gradient_type

            ftype = gradient_type(decl, of.type, program.module)
        except (DlvmError, TypeRuleError) as e:
            raise staging_error(f"{self.kind} of '{self.of.name}': {e}") from None
        if len(specs) != len(ftype.arguments) and not (self.printing and len(specs) == n):
            raise staging_error(f"'{self.name}', the {self.kind} of '{self.of.name}', takes "
                                f"{len(ftype.arguments)} arguments, {len(specs)} given")
        fn = ir.Function(program.unique(self.name), ftype, declaration=decl)
        program.module.add_function(fn)
        results = ftype.result
        assert isinstance(results, TupleType)
        program.results[fn] = tuple(TensorSpec(t.dtype, t.shape) for t in results.elements
                                    if isinstance(t, TensorType))
        return fn


def host_array(x: Any) -> Any:
    """An array of another framework (torch, JAX, cupy…) on the CPU, as numpy sees it
    through DLPack (no copy); numbers and numpy arrays as they are."""
    if isinstance(x, np.ndarray | np.generic | bool | int | float) or not hasattr(
            x, "__dlpack__"):
        return x
    try:
        return np.from_dlpack(x)
    except (RuntimeError, TypeError, BufferError) as e:
        raise staging_error(f"cannot read a {type(x).__name__} through DLPack ({e}); pass "
                            "a host array") from None


def as_rep(x: Any, stage: Stage, what: str) -> Rep:
    """A staged value for `x`: a Rep of this stage, or a constant (a number or an array)."""
    if isinstance(x, Rep):
        if x.stage.program is not stage.program:
            raise staging_error(f"{what} is a staged value of another function")
        return x
    if isinstance(x, bool | int | float):
        spec = TensorSpec.of(x)
        return Rep(ir.constant(x, spec.ir()), spec, stage)
    if isinstance(x, np.ndarray | np.generic):
        arr = np.asarray(x)
        spec = TensorSpec.of(arr)
        if arr.ndim == 0:
            return Rep(ir.constant(arr.item(), spec.ir()), spec, stage)
        return stage.emit("literal", arr_literal(arr), spec.ir())
    raise staging_error(f"{what}: expected a staged value, a number or an array, found "
                        f"{type(x).__name__}")


def arr_literal(arr: np.ndarray) -> Any:
    """A tensor literal for a numpy array (rows of rows of scalars)."""
    from dlvm.ir.core import AggregateLiteral, LiteralValue, ScalarLiteral
    from dlvm.ir.types import TensorType as TT

    spec = TensorSpec.of(arr)

    def build(a: np.ndarray) -> Any:
        if a.ndim == 0:
            return LiteralValue(ScalarLiteral(a.item()), TT((), spec.dtype))
        return LiteralValue(AggregateLiteral("tensor", [build(r) for r in a]),
                            TT(tuple(a.shape), spec.dtype))

    return build(arr).literal


# ---------------------------------------------------------------- the user's entry points


def lambda_(fn: Callable[..., Any], types: Sequence[TensorSpec] | None = None, *,
            name: str | None = None, dynamic: bool = False) -> StagedFunction:
    """A staged function from a Python function (the seed's `lambda { x, w, b in … }`);
    `types` are its argument types (else the annotations, else the first application's)."""
    if types is None:
        try:  # annotations may be strings (`from __future__ import annotations`)
            annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception:  # a name the annotation uses is not defined: no types from it
            annotations = {}
        hints = {k: v for k, v in annotations.items()
                 if k != "return" and isinstance(v, TensorSpec)}
        params = list(inspect.signature(fn).parameters)
        if hints and all(p in hints for p in params):
            types = [hints[p] for p in params]
    return StagedFunction(fn, types, name=name, dynamic=dynamic)


def function(fn: Callable[..., Any] | None = None, *, dynamic: bool = False,
             name: str | None = None) -> Any:
    """Decorator form of `lambda_`: `@nnkit.function def f(x: Float2D, …): …`."""
    if fn is None:
        return lambda f: lambda_(f, name=name, dynamic=dynamic)
    return lambda_(fn, name=name, dynamic=dynamic)


def _indices(x: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if x is None:
        return None
    return (x,) if isinstance(x, int) else tuple(x)


def gradient(of: StagedFunction, wrt: int | Sequence[int] | None = None,
             keeping: int | Sequence[int] = (), *, seedable: bool = False,
             name: str | None = None) -> DerivativeFunction:
    """The gradient of `of` with respect to arguments `wrt` (all by default), followed by
    the outputs `keeping` keeps: `gradient(g, wrt=(1, 2), keeping=0)` computes
    (∂g/∂w, ∂g/∂b, g(x, w, b)). `seedable` adds the seed (the back-propagated adjoint) as a
    last argument."""
    return DerivativeFunction("gradient", of, _indices(wrt), _indices(keeping) or (),
                              seedable, name)


def tangent(of: StagedFunction, wrt: int | Sequence[int] | None = None,
            keeping: int | Sequence[int] = (), *, name: str | None = None
            ) -> DerivativeFunction:
    """Forward mode: the directional derivative of `of` along tangents of the arguments
    `wrt`, passed after the primal arguments."""
    return DerivativeFunction("tangent", of, _indices(wrt), _indices(keeping) or (), False,
                              name)
