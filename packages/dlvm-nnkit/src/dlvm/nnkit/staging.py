"""Staging: Python functions over staged tensors write DLVM IR.

A `StagedFunction` wraps a Python function. Inside another staged function, `f[x, w, b]`
emits a call to `@f` (staged once per argument types); applied to arrays, `f(x, w, b)` (or
`f[x, w, b]`) stages `f` and everything it calls into a module, compiles it through
`ir.compile` — differentiation, the optimizer and the fastest installed target — and runs
it, the build cached per argument types. `gradient(g, wrt=…)` and `tangent(g, wrt=…)` are
staged functions whose IR is a `[gradient …]` / `[tangent …]` declaration that the
`differentiation` pass fills in.

Errors found while staging (a rank or dtype mismatch, a wrong argument count) are
`StagingError`s naming the user's file and line.

A build bakes in the arrays and numbers the function reads from outside its arguments,
captured by value at staging (see `captures`); when one of them changes, the next call
stages and compiles the function again, so no call answers with an old value.

Names: a staged function is `@NAME` after its `name=`, else its `def`'s name (a lambda's:
`f`); within one build, other functions of that name become `@NAME_1`, `@NAME_2`, … in the
order they are staged. A file read by the front end names its functions after their `name=`
or their variables, and refuses two of one name (see `frontend`).
"""

from __future__ import annotations

import inspect
import itertools
import operator
import re
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir import Builder, DlvmError, Function, FunctionType, TensorType, TupleType
from dlvm.ir.core import (
    AggregateLiteral,
    DenseLiteral,
    DerivativeDecl,
    LiteralValue,
    ScalarLiteral,
)
from dlvm.ir.opdef import TypeRuleError
from dlvm.ir.runtime import numpy_dtype

from .captures import Captures
from .checks import (
    check_bool,
    check_callable,
    check_indices,
    check_optional_name,
    describe,
    wrong,
)
from .errors import StagingError, type_error, user_location, value_error
from .tensor import StagedTensor
from .types import TensorSpec, check_specs

_STAGE: ContextVar[Stage | None] = ContextVar("dlvm_nnkit_stage", default=None)
_SIGNATURE = operator.attrgetter("dtype", "shape")  # what picks an array's build
Rep = StagedTensor  # the name of earlier versions


class Stage:
    """The function being written: its builder, and the program it belongs to."""

    def __init__(self, program: Program, builder: Builder) -> None:
        self.program = program
        self.builder = builder

    def emit(self, method: str, *args: Any, **fields: Any) -> StagedTensor:
        """`builder.<method>(…)` as a staged tensor, a type error located in user code."""
        try:
            inst = getattr(self.builder, method)(*args, **fields)
        except (DlvmError, TypeRuleError) as e:
            message = str(e)
            if not message.startswith("'"):
                message = f"'{inst_name(method)}': {message}"
            raise type_error(message) from None
        t = inst.type
        if not isinstance(t, TensorType):
            raise type_error(f"'{inst_name(method)}' gives a value of type {t}, "
                             "not a tensor")
        return StagedTensor(inst, TensorSpec(t.dtype, t.shape), self)


def inst_name(method: str) -> str:
    return method.rstrip("_")


def current_stage() -> Stage | None:
    return _STAGE.get()


# ---------------------------------------------------------------- programs


class Program:
    """A module assembled from staged functions, each emitted once per argument types, and
    what they captured from outside their arguments."""

    def __init__(self, name: str = "nnkit") -> None:
        self.module = ir.Module(name)
        self.emitted: dict[tuple[int, tuple[TensorSpec, ...]], Function] = {}
        self.results: dict[Function, Any] = {}  # the result spec(s) of each function
        self.names: set[str] = set()
        # the functions a user calls by name (`dlvm exec -f NAME`), and their names
        self.public: dict[tuple[int, tuple[TensorSpec, ...]], str] = {}
        self.captures = Captures()

    def publish(self, staged: StagedFunction, specs: tuple[TensorSpec, ...], name: str) -> None:
        """Keep `name` for `staged` at argument types `specs`: no other function takes it."""
        self.public[(id(staged), specs)] = name
        self.names.add(name)

    def name_for(self, staged: StagedFunction, specs: tuple[TensorSpec, ...]) -> str:
        return self.public.get((id(staged), specs)) or self.unique(staged.name)

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


@dataclass(frozen=True)
class Signature:
    """What a staged Python function takes: `fewest` to `most` positional arguments (`most`
    None: any number, `*args`), and the names of its parameters."""

    fewest: int
    most: int | None
    names: tuple[str, ...]

    def takes(self, n: int) -> bool:
        return self.fewest <= n and (self.most is None or n <= self.most)

    def count_text(self) -> str:
        if self.most == self.fewest:
            return f"{self.fewest} argument{'s' if self.fewest != 1 else ''}"
        if self.most is None:
            return f"at least {self.fewest} argument{'s' if self.fewest != 1 else ''}"
        return f"{self.fewest} to {self.most} arguments"


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def signature_of(fn: Callable[..., Any], what: str) -> Signature:
    """The positional parameters of `fn`; keyword-only ones need a default (staged
    arguments are positional)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise wrong(what, "a Python function whose parameters can be read", fn) from None
    required = [p.name for p in params
                if p.kind == inspect.Parameter.KEYWORD_ONLY and p.default is p.empty]
    if required:
        raise type_error(f"{what} has keyword-only parameters without a default "
                         f"({', '.join(required)}): staged arguments are positional")
    positional = [p for p in params if p.kind in _POSITIONAL]
    variadic = any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
    fewest = sum(1 for p in positional if p.default is p.empty)
    return Signature(fewest, None if variadic else len(positional),
                     tuple(p.name for p in positional))


class StagedFunction:
    """A Python function staged into DLVM IR (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any] | None, arg_specs: Sequence[TensorSpec] | None
                 = None, *, name: str | None = None, dynamic: bool = False,
                 caller: str = "nnkit.StagedFunction") -> None:
        self.origin = user_location()  # where the user made it, for messages
        self.signature = None
        if fn is not None:
            check_callable(fn, f"the function of {caller}", "a Python function of staged "
                           "tensors")
            self.signature = signature_of(fn, f"the function of {caller}")
        self.fn = fn
        self.explicit = check_optional_name(name, f"the name of {caller}") is not None
        own = getattr(fn, "__name__", "<lambda>") if fn is not None else "<lambda>"
        self.name = name or (own if own != "<lambda>" and own.isidentifier() else "f")
        self.arg_specs = check_specs(arg_specs, f"the types of {caller}") \
            if arg_specs is not None else None
        sig = self.signature
        if sig is not None and self.arg_specs is not None and not sig.takes(
                len(self.arg_specs)):
            raise type_error(f"{caller} got {len(self.arg_specs)} type"
                             f"{'s' if len(self.arg_specs) != 1 else ''} for a function of "
                             f"{sig.count_text()} ({', '.join(sig.names) or 'none'})")
        # declared types fix the count; else the function's parameters bound it
        self.arity = len(self.arg_specs) if self.arg_specs is not None else (
            sig.most if sig is not None and sig.most == sig.fewest else None)
        self.dynamic = check_bool(dynamic, f"dynamic of {caller}")
        self.builds: dict[tuple[TensorSpec, ...], tuple[str, ir.Executable]] = {}
        # what each build captured from outside its arguments (None: nothing)
        self.captured: dict[tuple[TensorSpec, ...], Captures | None] = {}
        # (dtype, shape) of each argument → the compiled function and what it captured,
        # for arrays seen before
        self.fast: dict[tuple[tuple[Any, Any], ...],
                        tuple[Callable[..., Any], Captures | None]] = {}

    def described(self) -> str:
        return f"the staged function '{self.name}'"

    @property
    def arg_names(self) -> list[str]:
        return list(self.signature.names) if self.signature is not None and \
            self.signature.most is not None else []

    def __repr__(self) -> str:
        specs = ", ".join(map(str, self.arg_specs)) if self.arg_specs else "…"
        return f"<staged function {self.name}: ({specs}) -> …>"

    # ------------------------------------------------------------ argument types

    def check_count(self, n: int, what: str) -> None:
        """Refuse an application to `n` arguments that the function does not take."""
        if self.arity is not None:
            ok, takes = n == self.arity, f"{self.arity} argument" \
                f"{'s' if self.arity != 1 else ''}"
        elif self.signature is not None:
            ok, takes = self.signature.takes(n), self.signature.count_text()
        else:
            return
        if not ok:
            raise type_error(f"{what} takes {takes}, {n} given")

    def specs_for(self, given: Sequence[TensorSpec], what: str) -> tuple[TensorSpec, ...]:
        """The argument types of an application: the declared ones, refined by `given`."""
        self.check_count(len(given), what)
        if self.arg_specs is None:
            return tuple(given)
        out = []
        for k, (want, got) in enumerate(zip(self.arg_specs, given, strict=True)):
            if not want.accepts(got):
                raise type_error(f"argument {k} of {what} must be {want}, found {got}")
            out.append(want.refined(got))
        return tuple(out)

    # ------------------------------------------------------------ emission

    def emit(self, program: Program, specs: tuple[TensorSpec, ...]) -> Function:
        """Write this function for `specs` into `program`'s module."""
        assert self.fn is not None
        b = Builder(program.module)
        names = self.arg_names[:len(specs)] if len(specs) <= len(self.arg_names) else [
            f"arg{k}" for k in range(len(specs))]
        fn = b.function(program.name_for(self, specs), [s.ir() for s in specs],
                        TupleType(()), names)
        program.captures.function(self.fn)
        stage = Stage(program, b)
        token = _STAGE.set(stage)
        try:
            args = [StagedTensor(a, s, stage) for a, s in zip(fn.entry.arguments, specs,
                                                              strict=True)]
            result = self.fn(*args)
        finally:
            _STAGE.reset(token)
        if result is None:
            raise type_error(f"'{self.name}' returns None: a staged function returns its "
                             "result, a staged tensor or a tuple of them")
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
        reps = [as_rep(a, stage, what=f"argument {k} of '{self.name}'")
                for k, a in enumerate(args)]
        specs = self.specs_for([r.spec for r in reps], f"'{self.name}'")
        callee = stage.program.function(self, specs)
        try:
            call = stage.builder.call(callee, [r.value for r in reps])
        except (DlvmError, TypeRuleError) as e:
            raise type_error(f"calling '{self.name}': {e}") from None
        result = stage.program.results[callee]
        if isinstance(result, tuple):
            return tuple(stage.emit("extract", call, [k]) for k in range(len(result)))
        return StagedTensor(call, result, stage)

    def __call__(self, *arrays: Any) -> Any:
        try:  # the common case first: arrays of dtypes and shapes seen before
            call, captured = self.fast[tuple(map(_SIGNATURE, arrays))]
        except (AttributeError, KeyError, TypeError):
            return self.first_call(arrays)
        if captured is not None and captured.changed():
            return self.first_call(arrays)
        return call(*arrays)

    def first_call(self, arrays: tuple[Any, ...]) -> Any:
        """Stage and compile for new argument types (or reuse the build for their types,
        unless a value it captured has changed since)."""
        if current_stage() is not None:
            return self[arrays]
        arrays = tuple(host_array(a, f"argument {k} of '{self.name}'")
                       for k, a in enumerate(arrays))
        specs = self.specs_for([argument_spec(a, f"argument {k} of '{self.name}'")
                                for k, a in enumerate(arrays)], f"'{self.name}'")
        if self.dynamic:
            specs = tuple(s.erased() for s in specs)
        built = self.builds.get(specs)
        captured = self.captured.get(specs)
        if built is None or (captured is not None and captured.changed()):
            program = self.staged_program(specs)
            entry = program.emitted[(id(self), specs)].name or ""
            built = self.builds[specs] = (entry, ir.compile(program.module))
            captured = self.captured[specs] = program.captures or None
        name, exe = built
        call = exe[name]
        if all(isinstance(a, np.ndarray) for a in arrays):
            self.fast[tuple(map(_SIGNATURE, arrays))] = (call, captured)
        return call(*arrays)

    def staged_program(self, specs: tuple[TensorSpec, ...]) -> Program:
        """A program with this function (and what it calls) for argument types `specs`."""
        program = Program(self.name)
        program.function(self, specs)
        ir.verify(program.module)
        return program

    def staged_module(self, specs: tuple[TensorSpec, ...]) -> tuple[ir.Module, str]:
        """A module with this function (and what it calls) for argument types `specs`, and
        the function's name there."""
        program = self.staged_program(specs)
        return program.module, program.emitted[(id(self), specs)].name or ""

    def module_for(self, specs: tuple[TensorSpec, ...]) -> ir.Module:
        return self.staged_module(specs)[0]

    def ir(self, *args: Any, dynamic: bool = False, optimize: bool = False) -> str:
        """The DLVM IR of this function (and what it calls) for the types of `args` (arrays
        or `TensorSpec`s; none: the declared types); `dynamic` erases every size;
        `optimize` runs `differentiation,O2` first, as a compilation does."""
        dynamic = check_bool(dynamic, f"dynamic of '{self.name}'.ir")
        optimize = check_bool(optimize, f"optimize of '{self.name}'.ir")
        if args:
            specs = self.specs_for([argument_spec(a, f"argument {k} of '{self.name}'.ir")
                                    for k, a in enumerate(args)], f"'{self.name}'")
        elif self.arg_specs is not None:
            specs = self.arg_specs
        else:
            raise type_error(f"'{self.name}' declares no argument types: give arrays or "
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
        super().__init__(None, None)
        self.origin = user_location()
        self.name = name or f"{'d' if kind == 'gradient' else 't'}{of.name}"
        self.explicit = name is not None
        self.kind = kind
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
            raise type_error(f"{self.kind} of '{self.of.name}': {e}") from None
        if len(specs) != len(ftype.arguments) and not (self.printing and len(specs) == n):
            raise type_error(f"'{self.name}', the {self.kind} of '{self.of.name}', takes "
                             f"{len(ftype.arguments)} arguments, {len(specs)} given")
        fn = ir.Function(program.name_for(self, specs), ftype, declaration=decl)
        program.module.add_function(fn)
        results = ftype.result
        assert isinstance(results, TupleType)
        program.results[fn] = tuple(TensorSpec(t.dtype, t.shape) for t in results.elements
                                    if isinstance(t, TensorType))
        return fn


# ---------------------------------------------------------------- values from Python


def host_array(x: Any, what: str = "an argument") -> Any:
    """An array of another framework (torch, JAX, cupy…) on the CPU, as numpy sees it
    through DLPack (no copy); numbers and numpy arrays as they are."""
    if isinstance(x, np.ndarray | np.generic | bool | int | float) or not hasattr(
            x, "__dlpack__"):
        return x
    try:
        return np.from_dlpack(x)
    except (RuntimeError, TypeError, BufferError, ValueError) as e:
        raise type_error(f"{what}: cannot read a {type(x).__name__} through DLPack ({e}); "
                         "pass a host array") from None


_ARRAY = "an array (bool, int8…int64 or float16…float64) or a number"


def argument_spec(x: Any, what: str) -> TensorSpec:
    """The type of an argument (an array, a number, or a `TensorSpec` for `ir()`)."""
    if isinstance(x, TensorSpec):
        return x
    if isinstance(x, StagedTensor | str | bytes | dict | set) or x is None:
        raise wrong(what, _ARRAY, x)
    try:
        return TensorSpec.of(x)
    except TypeError:
        raise wrong(what, _ARRAY, x) from None


def as_rep(x: Any, stage: Stage, what: str) -> StagedTensor:
    """A staged tensor for `x`: one of this function, or a constant (a number or an
    array, captured by value)."""
    if isinstance(x, StagedTensor):
        if x.stage is not stage:
            raise type_error(f"{what} is a staged tensor of another staged function (of "
                             f"type {x.spec}): pass it as an argument")
        return x
    # a Python number (np.float64 is a float too, but a numpy scalar: below)
    if isinstance(x, bool | int | float) and not isinstance(x, np.generic):
        spec = TensorSpec.of(x)
        if spec.dtype.is_int and not -2**63 <= x < 2**63:
            raise value_error(f"{what}: the Python integer {x} does not fit i64")
        return StagedTensor(ir.constant(x, spec.ir()), spec, stage)
    if isinstance(x, np.ndarray | np.generic):
        arr = np.asarray(x)
        try:
            spec = TensorSpec.of(arr)
        except TypeError:
            raise wrong(what, "a staged tensor, a number or an array of bool, int8…int64 or "
                        "float16…float64", x) from None
        if isinstance(x, np.ndarray):
            stage.program.captures.array(x)
        if arr.ndim == 0:
            return StagedTensor(ir.constant(arr.item(), spec.ir()), spec, stage)
        return stage.emit("literal", arr_literal(arr), spec.ir())
    raise wrong(what, "a staged tensor, a number or an array", x)


DENSE_FROM = 64  # elements: a larger array is kept as its bytes (weights), a smaller one as text


def arr_literal(arr: np.ndarray) -> Any:
    """A tensor literal for a numpy array: rows of rows of scalars, readable in the printed
    module, or — past `DENSE_FROM` elements — its bytes (`dense "0x…"`), which every pass
    copies, verifies and prints in time independent of the element count."""
    spec = TensorSpec.of(arr)
    if arr.size > DENSE_FROM:
        return DenseLiteral.of(arr.astype(numpy_dtype(spec.dtype), copy=False))

    def build(a: np.ndarray) -> Any:
        if a.ndim == 0:
            return LiteralValue(ScalarLiteral(a.item()), TensorType((), spec.dtype))
        return LiteralValue(AggregateLiteral("tensor", [build(r) for r in a]),
                            TensorType(tuple(a.shape), spec.dtype))

    return build(arr).literal


# ---------------------------------------------------------------- the user's entry points


def lambda_(fn: Callable[..., Any], types: Sequence[TensorSpec] | None = None, *,
            name: str | None = None, dynamic: bool = False) -> StagedFunction:
    """A staged function from a Python function (the seed's `lambda { x, w, b in … }`);
    `types` are its argument types, a tuple of one per argument (else the annotations,
    else the first application's)."""
    check_callable(fn, "the function of nnkit.lambda_", "a Python function of staged tensors")
    if types is None:
        types = _annotated_types(fn)
    return StagedFunction(fn, types, name=name, dynamic=dynamic, caller="nnkit.lambda_")


def _annotated_types(fn: Callable[..., Any]) -> list[TensorSpec] | None:
    """The argument types that `fn`'s annotations give, if they give one for each."""
    try:  # annotations may be strings (`from __future__ import annotations`)
        annotations = inspect.get_annotations(fn, eval_str=True)  # type: ignore[arg-type]
    except Exception:  # a name the annotation uses is not defined: no types from it
        annotations = {}
    hints = {k: v for k, v in annotations.items()
             if k != "return" and isinstance(v, TensorSpec)}
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in _POSITIONAL]
    except (TypeError, ValueError):  # the function itself says what is wrong
        return None
    if hints and params and all(p in hints for p in params):
        return [hints[p] for p in params]
    return None


def function(fn: Callable[..., Any] | None = None, *, dynamic: bool = False,
             name: str | None = None) -> Any:
    """Decorator form of `lambda_`: `@nnkit.function def f(x: Float2D, …): …`, or
    `@nnkit.function(name=…, dynamic=…)`."""
    if fn is None:
        check_optional_name(name, "the name of nnkit.function")
        check_bool(dynamic, "dynamic of nnkit.function")
        return lambda f: lambda_(f, name=name, dynamic=dynamic)
    check_callable(fn, "the function of nnkit.function", "a Python function of staged "
                   "tensors (use @nnkit.function, or @nnkit.function(name=…))")
    return lambda_(fn, name=name, dynamic=dynamic)


def gradient(of: StagedFunction, wrt: int | Sequence[int] | None = None,
             keeping: int | Sequence[int] = (), *, seedable: bool = False,
             name: str | None = None) -> DerivativeFunction:
    """The gradient of `of` with respect to arguments `wrt` (all by default), followed by
    the outputs `keeping` keeps: `gradient(g, wrt=(1, 2), keeping=0)` computes
    (∂g/∂w, ∂g/∂b, g(x, w, b)). `seedable` adds the seed (the back-propagated adjoint) as a
    last argument."""
    return _derivative("gradient", of, wrt, keeping, seedable, name)


def tangent(of: StagedFunction, wrt: int | Sequence[int] | None = None,
            keeping: int | Sequence[int] = (), *, name: str | None = None
            ) -> DerivativeFunction:
    """Forward mode: the directional derivative of `of` along tangents of the arguments
    `wrt`, passed after the primal arguments."""
    return _derivative("tangent", of, wrt, keeping, False, name)


def _derivative(kind: str, of: Any, wrt: Any, keeping: Any, seedable: Any, name: Any
                ) -> DerivativeFunction:
    """A derivative of `of`, its arguments checked where `nnkit.gradient` or
    `nnkit.tangent` was called."""
    where = f"nnkit.{kind}"
    if not isinstance(of, StagedFunction):
        raise wrong(f"the function of {where}", "a staged function (made by nnkit.lambda_ "
                    "or @nnkit.function)", of)
    indices = check_indices(wrt, f"wrt of {where}", count=of.arity, allow_empty=False)
    kept = check_indices(keeping, f"keeping of {where}", count=None, allow_empty=True,
                         default=())
    return DerivativeFunction(kind, of, indices, kept or (),
                              check_bool(seedable, f"seedable of {where}"),
                              check_optional_name(name, f"the name of {where}"))


__all__ = ["Program", "Rep", "StagedFunction", "StagedTensor", "StagingError", "describe",
           "function", "gradient", "lambda_", "tangent"]
