"""TEL's semantic checks and shape inference.

Every problem is a `FILE:LINE:COL: error:` diagnostic; all of a file's are reported
together. Shapes follow numpy broadcasting (trailing dimensions aligned, size 1 stretches),
with `_` (dynamic) matching any size; the tensor product is the matrix product, with a
vector on either side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlvm.ir import Diagnostic, DiagnosticError, Location

from .intrinsics import INITIALIZERS, TABLE
from .limits import constant_problem, shape_problem
from .optimizers import OPTIMIZERS, Optimizer, OptionRule, defaults
from .syntax import (
    Binary,
    Call,
    Concat,
    Declaration,
    Expr,
    Name,
    Number,
    OptimizerDecl,
    Option,
    Program,
    Recurrent,
    Reshape,
    Shape,
    Transpose,
    Unary,
)


class ShapeError(Exception):
    def __init__(self, message: str, location: Location) -> None:
        super().__init__(message)
        self.location = location


def show(shape: Shape) -> str:
    return "[" + " x ".join("_" if d is None else str(d) for d in shape) + "]"


def dims_match(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b


def shapes_match(a: Shape, b: Shape) -> bool:
    return len(a) == len(b) and all(dims_match(x, y) for x, y in zip(a, b, strict=True))


def broadcast(a: Shape, b: Shape) -> Shape | None:
    """numpy's broadcasting, with None (dynamic) matching anything."""
    out: list[int | None] = []
    for k in range(1, max(len(a), len(b)) + 1):
        x = a[-k] if k <= len(a) else 1
        y = b[-k] if k <= len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        elif x == y:
            out.append(x)
        else:
            return None
    return tuple(reversed(out))


def product_shape(a: Shape, b: Shape) -> Shape | None:
    """The tensor product `a . b`: vector·vector, matrix·vector, vector·matrix,
    matrix·matrix, or a batch of matrix products (equal leading dimensions)."""
    if not a or not b:
        return None
    if len(a) == 1 and len(b) == 1:
        return () if dims_match(a[0], b[0]) else None
    if len(a) == 1:
        return (*b[:-2], b[-1]) if len(b) == 2 and dims_match(a[0], b[0]) else None
    if len(b) == 1:
        return (a[0],) if len(a) == 2 and dims_match(a[1], b[0]) else None
    if len(a) != len(b) or not dims_match(a[-1], b[-2]):
        return None
    if not all(dims_match(x, y) for x, y in zip(a[:-2], b[:-2], strict=True)):
        return None
    batch = tuple(x if x is not None else y for x, y in zip(a[:-2], b[:-2], strict=True))
    return (*batch, a[-2], b[-1])


@dataclass
class Checked:
    """A program that passed every check, with what the code generator needs to know."""

    program: Program
    shapes: dict[str, Shape]  # every declaration's shape (declared, refined by inference)
    recurrent: Recurrent | None
    sequences: list[str] = field(default_factory=list)  # inputs read as `xs[t]`
    carried: list[str] = field(default_factory=list)  # recurrent values that cross steps
    order: list[Declaration] = field(default_factory=list)  # each after what it reads
    after_block: set[str] = field(default_factory=set)  # values that read final states
    sequence_reads: dict[str, Location] = field(default_factory=dict)  # each's first `xs[t]`
    optimizer: Optimizer = field(default_factory=Optimizer.default)  # what @train_step does

    @property
    def dtype(self) -> str:
        return self.program.dtype

    def role(self, role: str) -> list[Declaration]:
        return [d for d in self.program.declarations if d.role == role]


class Checker:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.errors: list[Diagnostic] = []
        self.decls: dict[str, Declaration] = {}
        self.shapes: dict[str, Shape] = {}
        self.busy: list[str] = []  # declarations whose value is being inferred
        self.done: set[str] = set()  # declarations whose value has been inferred
        self.block: Recurrent | None = None
        self.in_block = False
        self.sequences: dict[str, Location] = {}  # where each is first read by time
        self.previous: dict[str, None] = {}  # recurrent values read at t-1
        self.is_float = program.dtype.startswith("float")
        self.time_errors = 0  # time indexes found wrong (a block then reads no sequence)
        self.late: set[str] = set()  # outside values that read the block's final states

    def error(self, message: str, location: Location) -> None:
        self.errors.append(Diagnostic(message, location))

    # ------------------------------------------------------------ the program

    def check(self) -> Checked:
        p = self.program
        if len(p.recurrent) > 1:
            for r in p.recurrent[1:]:
                self.error("a module has at most one recurrent block (put every recurrent "
                           "value in one block)", r.location)
        self.block = p.recurrent[0] if p.recurrent else None
        for d in p.declarations:
            if d.name in self.decls:
                first = self.decls[d.name].location
                self.error(f"'{d.name}' is already declared (at line {first.line})",
                           d.location)
                continue
            if d.name in INITIALIZERS or d.name in TABLE:
                self.error(f"'{d.name}' is the name of a function; choose another name",
                           d.location)
            self.decls[d.name] = d
            self.declared_form(d)
        for d in p.declarations:
            if self.decls.get(d.name) is d and d.role == "param" and d.value is not None:
                self.initializer(d)
        ordered, cycles = dependency_order(p, self.decls)
        self.late = late_values(self.block, ordered)
        for cycle in cycles:
            d = self.decls[cycle[0]]
            self.done.add(d.name)
            self.error(f"'{d.name}' depends on itself ({' → '.join(cycle)})", d.location)
        for d in ordered:  # what a value reads is inferred before it: no deep recursion
            self.value_shape(d)
        if self.block is not None:
            self.check_block(self.block)
        for loss in p.losses:
            self.check_loss(loss.name, loss.value, loss.location)
        self.roles()
        optimizer = self.check_optimizers(p.optimizers)
        if self.errors:
            self.errors.sort(key=lambda e: (e.location.line, e.location.column)
                             if e.location else (0, 0))
            raise DiagnosticError(self.errors)
        final = self.read_after_block()
        carried = [d.name for d in (self.block.declarations if self.block else [])
                   if d.name in self.previous or d.name in final]
        return Checked(p, self.shapes, self.block, list(self.sequences), carried, ordered,
                       self.late, dict(self.sequences), optimizer)

    def declared_form(self, d: Declaration) -> None:
        self.shapes[d.name] = d.shape
        if d.recurrent and d.role != "hidden":
            what = {"in": "an input", "param": "a parameter",
                    "out": "an output (declare it after the block; it reads the final "
                           "state)"}[d.role]
            self.error(f"'{d.name}': {what} cannot be declared inside a recurrent block",
                       d.location)
        if d.role == "in" and d.value is not None:
            self.error(f"unexpected initializer: the input '{d.name}' gets its value from "
                       "the caller", d.value.location)
        elif d.role != "in" and d.value is None:
            if d.role == "param":
                self.error(f"missing initializer: the parameter '{d.name}' needs one (a "
                           "constant, random(lo, hi), normal(σ) or glorot)", d.location)
            else:
                self.error(f"missing initializer: '{d.name}' needs its defining expression "
                           f"('{d.name}: {d.role}[…] = …')", d.location)
        if d.role == "param" and any(x is None for x in d.shape):
            self.error(f"the parameter '{d.name}' needs a static shape, found {show(d.shape)}",
                       d.shape_location)
        problem = shape_problem(d.shape)
        if problem is not None:
            self.error(f"'{d.name}' cannot have the shape {show(d.shape)}: {problem}",
                       d.shape_location)

    def initializer(self, d: Declaration) -> None:
        v = d.value
        assert v is not None
        if isinstance(v, Number) or (isinstance(v, Unary) and isinstance(v.x, Number)):
            negated = isinstance(v, Unary)
            self.constant(v.x if negated else v, negated)  # type: ignore[union-attr, arg-type]
            return
        if isinstance(v, Name) and v.name == "glorot" and v.time is None:
            if len(d.shape) < 2:
                self.error(f"glorot needs a parameter of rank 2 or more ('{d.name}' is "
                           f"{show(d.shape)}); use a constant such as 0.0", v.location)
            if not self.is_float:
                self.error("glorot initializes floating-point parameters", v.location)
            return
        if isinstance(v, Call) and v.function in ("random", "normal"):
            want = 2 if v.function == "random" else 1
            if len(v.args) != want:
                sig = "random(lo, hi)" if want == 2 else "normal(σ)"
                self.error(f"{sig} takes {want} argument{'s' * (want > 1)}, found "
                           f"{len(v.args)}", v.location)
                return
            values = []
            for a in v.args:
                n = a.x if isinstance(a, Unary) and isinstance(a.x, Number) else a
                if not isinstance(n, Number):
                    self.error(f"the arguments of {v.function} are constants", a.location)
                    return
                self.constant(n, isinstance(a, Unary))
                values.append(-n.value if isinstance(a, Unary) else n.value)
            if v.function == "random" and not values[0] < values[1]:
                self.error(f"random(lo, hi) needs lo < hi, found random({values[0]}, "
                           f"{values[1]})", v.location)
            if v.function == "normal":
                if values[0] <= 0:
                    self.error(f"normal(σ) needs σ > 0, found {values[0]}", v.location)
                if not self.is_float:
                    self.error("normal(σ) initializes floating-point parameters", v.location)
            return
        self.error(f"a parameter's initializer is a constant, random(lo, hi), normal(σ) or "
                   f"glorot, not an expression ('{d.name}')", v.location)

    def constant(self, n: Number, negated: bool = False) -> None:
        """A constant of the module's type: an integer in an integer module, and within the
        type's range (`-` in front of it counts: -128 is an int8)."""
        if not self.is_float and not isinstance(n.value, int):
            self.error(f"constant-type mismatch: {n.text} is not an {self.program.dtype} "
                       "constant", n.location)
            return
        problem = constant_problem(-n.value if negated else n.value, self.program.dtype)
        if problem is not None:
            text = f"-{n.text}" if negated else n.text
            self.error(f"the constant {text} is out of range: {problem}", n.location)

    def roles(self) -> None:
        p = self.program
        for role, what in (("in", "an input"), ("out", "an output")):
            if not any(d.role == role for d in p.declarations):
                self.error(f"the module declares no {role!r} value: a model needs at least "
                           f"{what} ('name: {role}[shape]')", p.location)
        if p.losses and not any(d.role == "param" for d in p.declarations):
            self.error("a loss is minimized over the parameters, but the module declares no "
                       "'param'", p.losses[0].location)
        if p.losses and not self.is_float:
            assert p.dtype_location is not None
            self.error(f"a loss is differentiated, so the module's type must be a "
                       f"floating-point type, not {p.dtype}", p.dtype_location)
        for extra in p.losses[1:]:
            self.error(f"a module has one loss; '{p.losses[0].name}' is already declared",
                       extra.location)

    def check_optimizers(self, decls: list[OptimizerDecl]) -> Optimizer:
        """The module's optimizer (plain SGD when it declares none): a known kind, each
        option known to it, given once and within its range."""
        for extra in decls[1:]:
            self.error(f"a module has one optimizer; '{decls[0].kind}' is already declared "
                       f"(at line {decls[0].location.line})", extra.location)
        if not decls:
            return Optimizer.default()
        d = decls[0]
        if not self.program.losses:
            self.error("an optimizer minimizes the loss, but the module declares no loss",
                       d.location)
        rules = OPTIMIZERS.get(d.kind)
        if rules is None:
            self.error(f"unknown optimizer '{d.kind}' (one of {', '.join(OPTIMIZERS)})"
                       f"{did_you_mean(d.kind, list(OPTIMIZERS))}", d.location)
            return Optimizer.default()
        values = defaults(d.kind)
        decay: tuple[str, ...] | None = None
        seen: set[str] = set()
        for o in d.options:
            rule = rules.get(o.name)
            if rule is None:
                self.error(f"{d.kind} has no option '{o.name}' (its options: "
                           f"{', '.join(rules)}){did_you_mean(o.name, list(rules))}",
                           o.location)
            elif o.name in seen:
                self.error(f"the option '{o.name}' of {d.kind} is given twice", o.location)
            elif self.check_option(d.kind, o, rule):
                if isinstance(o.value, list):
                    decay = tuple(o.value)
                else:
                    values[o.name] = o.value
            seen.add(o.name)
        if 0 < values.get("total", 0) <= values.get("warmup", 0):
            self.error(f"the cosine schedule of {d.kind} needs total > warmup (the steps of "
                       f"warm-up), found total = {values['total']}, warmup = "
                       f"{values['warmup']}", d.location)
        return Optimizer(d.kind, values, decay)

    def check_option(self, kind: str, o: Option, rule: OptionRule) -> bool:
        """Whether `o`'s value is of the kind `rule` takes (a number, or parameter names);
        a number out of range, or a name that is no parameter, is reported but kept."""
        what = f"'{o.name}' of {kind}"
        if rule.names != isinstance(o.value, list):
            takes = "a list of parameter names, as [w1, w2]" if rule.names else "a number"
            self.error(f"the option {what} takes {takes}", o.location)
            return False
        if isinstance(o.value, list):
            params = [x.name for x in self.program.declarations if x.role == "param"]
            for name in o.value:
                if name not in params:
                    self.error(f"{what} names '{name}', which is not a parameter"
                               f"{did_you_mean(name, params)}", o.location)
            return True
        problem = rule.problem(o.value)
        if problem is not None:
            self.error(f"the option {what} must be {problem}, found {o.value}", o.location)
        return True

    def check_loss(self, name: str, value: Expr, where: Location) -> None:
        if name in self.decls:
            self.error(f"the loss '{name}' has the name of a declaration", where)
        try:
            shape = self.infer(value)
        except ShapeError as e:
            self.error(str(e), e.location)
            return
        if shape:
            self.error(f"the loss must be a scalar, but '{name}' has shape {show(shape)} "
                       "(reduce it with sum, mean, cross_entropy or mse)", value.location)

    def check_block(self, block: Recurrent) -> None:
        names = {d.name for d in block.declarations}
        seen: set[str] = set()
        for init in block.initial:
            if init.name not in names:
                self.error(f"'{init.name}[0]' sets the initial state of a value the "
                           "recurrent block does not declare", init.location)
                continue
            if init.name in seen:
                self.error(f"the initial state of '{init.name}' is given twice",
                           init.location)
            seen.add(init.name)
            inside = [x.name for x in walk(init.value) if isinstance(x, Name) and
                      (x.name in names or x.name in self.late)]
            if inside:
                self.error(f"the initial state '{init.name}[0]' cannot depend on the "
                           f"recurrent block's values ('{inside[0]}')", init.location)
                continue
            try:
                shape = self.infer(init.value)  # outside the block: no time index
            except ShapeError as e:
                self.error(str(e), e.location)
                continue
            declared = self.shapes[init.name]
            stretched = broadcast(shape, declared)
            if not shapes_match(declared, shape) and stretched is not None and \
                    len(shape) < len(declared) and shapes_match(stretched, declared) and \
                    all(x is not None for x in declared[1:]):
                continue  # one state for every row of the batch, e.g. [16] for [_ x 16]
            if not shapes_match(declared, shape):
                self.error(f"the initial state '{init.name}[0]' has shape {show(shape)}, "
                           f"but '{init.name}' is declared {show(declared)}",
                           init.value.location)
        if not self.sequences and not self.time_errors:
            self.error(f"the recurrent block reads no sequence: index an input by time, as "
                       f"in 'xs[{block.variable}]'", block.location)
        self.check_lengths()
        after = self.late
        for d in block.declarations:
            late = [x for x in walk(d.value) if isinstance(x, Name) and x.name in after] \
                if d.value is not None else []
            if late:
                self.error(f"'{late[0].name}' is computed after the recurrent block (it reads "
                           "its final state), so the block cannot read it", late[0].location)
        given = {i.name for i in block.initial}
        for d in block.declarations:
            if d.name in given:
                continue
            if any(x is None for x in d.shape[1:]):
                self.error(f"the zero initial state of '{d.name}' needs a static shape "
                           f"after the batch dimension, found {show(d.shape)} (or give "
                           f"'{d.name}[0] = …')", d.shape_location)

    def check_lengths(self) -> None:
        """Every sequence the block reads is at least as long as the first, which sets the
        number of steps, when both lengths are known (unknown ones are checked as the loop
        reads them, at the read's location)."""
        names = list(self.sequences)
        if not names:
            return
        first = names[0]
        steps = self.shapes[first][1]
        for name in names[1:]:
            length = self.shapes[name][1]
            if steps is not None and length is not None and length < steps:
                self.error(f"'{name}' has {length} steps, but the block runs {steps} (the "
                           f"length of '{first}', the first sequence it reads): every sequence "
                           "it reads must be at least that long", self.sequences[name])

    def read_after_block(self) -> set[str]:
        """The names read without a time index outside the block (of a recurrent value:
        its final state)."""
        exprs = [d.value for d in self.program.declarations
                 if not d.recurrent and d.value is not None and d.role != "param"]
        exprs += [loss.value for loss in self.program.losses]
        return {e.name for x in exprs for e in walk(x) if isinstance(e, Name) and e.time is None}

    # ------------------------------------------------------------ declarations

    def value_shape(self, d: Declaration) -> Shape:
        """The shape of a hidden or output declaration's value, checked against its
        declared shape (once; later reads use the declaration)."""
        if d.name in self.busy:
            cycle = " → ".join([*self.busy[self.busy.index(d.name):], d.name])
            raise ShapeError(f"'{d.name}' depends on itself ({cycle})", d.location)
        if d.name in self.done:
            return self.shapes[d.name]
        self.done.add(d.name)
        assert d.value is not None
        self.busy.append(d.name)
        saved = self.in_block
        self.in_block = d.recurrent
        try:
            shape = self.infer(d.value)
        except ShapeError as e:
            self.error(str(e), e.location)
            return d.shape
        finally:
            self.busy.pop()
            self.in_block = saved
        if not shapes_match(d.shape, shape):
            self.error(f"'{d.name}' is declared {show(d.shape)} but its value has shape "
                       f"{show(shape)}", d.shape_location)
            return d.shape
        refined = tuple(x if x is not None else y for x, y in zip(d.shape, shape, strict=True))
        self.shapes[d.name] = refined
        return refined

    # ------------------------------------------------------------ expressions

    def infer(self, e: Expr) -> Shape:
        if isinstance(e, Number):
            self.constant(e)
            return ()
        if isinstance(e, Name):
            return self.name(e)
        if isinstance(e, Unary):
            if isinstance(e.x, Number):  # a negative constant, generated as one
                self.constant(e.x, negated=True)
                return ()
            return self.infer(e.x)
        if isinstance(e, Binary):
            a, b = self.infer(e.lhs), self.infer(e.rhs)
            if e.op == ".":
                out = product_shape(a, b)
                if out is None:
                    raise ShapeError(f"the tensor product of {show(a)} and {show(b)} is not "
                                     "defined (inner dimensions must agree)", e.location)
                return sized(out, e)
            out = broadcast(a, b)
            if out is None:
                raise ShapeError(f"'{e.op}' of shapes {show(a)} and {show(b)}: they do not "
                                 "broadcast", e.location)
            return sized(out, e)
        if isinstance(e, Transpose):
            return tuple(reversed(self.infer(e.x)))
        if isinstance(e, Reshape):
            return self.reshape(e)
        if isinstance(e, Concat):
            return sized(self.concat(e), e)
        if isinstance(e, Call):
            return sized(self.call(e), e)
        raise AssertionError(e)

    def name(self, e: Name) -> Shape:
        d = self.decls.get(e.name)
        if d is None:
            if e.name in INITIALIZERS:
                raise ShapeError(f"'{e.name}' is a parameter initializer, not a value",
                                 e.location)
            hint = suggest(e.name, list(self.decls))
            more = f" (did you mean '{hint}'?)" if hint else ""
            raise ShapeError(f"undefined name '{e.name}'{more}", e.location)
        if e.time is not None:
            return self.time_indexed(e, d)
        if d.role in ("in", "param") or d.value is None:
            return self.shapes[d.name]
        return self.value_shape(d)

    def time_indexed(self, e: Name, d: Declaration) -> Shape:
        self.time_errors += 1  # until the index is found good
        block = self.block
        if block is None or not self.in_block:
            raise ShapeError(f"'{e.name}[{e.variable}…]': a time index can be used only "
                             "inside a recurrent block", e.location)
        if e.variable != block.variable:
            raise ShapeError(f"the time variable of this block is '{block.variable}', not "
                             f"'{e.variable}'", e.location)
        if d.recurrent:
            if e.time == -1:
                self.time_errors -= 1
                self.previous[d.name] = None
                return self.shapes[d.name]
            if e.time == 0:
                self.time_errors -= 1
                return self.value_shape(d)
            raise ShapeError(f"only '{e.name}[{block.variable}]' and "
                             f"'{e.name}[{block.variable}-1]' can be read", e.location)
        if d.role == "in":
            if e.time != 0:
                raise ShapeError(f"only the current element '{e.name}[{block.variable}]' of a "
                                 "sequence can be read", e.location)
            shape = self.shapes[d.name]
            if len(shape) < 2:
                raise ShapeError(f"'{e.name}' is read by time, so it must be a sequence "
                                 f"[batch x time x …], found {show(shape)}", e.location)
            self.sequences.setdefault(d.name, e.location)
            self.time_errors -= 1
            return (shape[0], *shape[2:])
        raise ShapeError(f"'{e.name}' is neither a recurrent value nor a sequence input: "
                         "read it without a time index", e.location)

    def reshape(self, e: Reshape) -> Shape:
        x = self.infer(e.x)
        if sum(d is None for d in e.shape) > 1:
            raise ShapeError(f"'as {show(e.shape)}': at most one dimension can be dynamic",
                             e.location)
        problem = shape_problem(e.shape)
        if problem is not None:
            raise ShapeError(f"'as {show(e.shape)}': {problem}", e.location)
        if all(d is not None for d in (*x, *e.shape)):
            a = b = 1
            for d in x:
                a *= d  # type: ignore[operator]
            for d in e.shape:
                b *= d  # type: ignore[operator]
            if a != b:
                raise ShapeError(f"cannot reshape {show(x)} ({a} elements) as "
                                 f"{show(e.shape)} ({b} elements)", e.location)
        return e.shape

    def concat(self, e: Concat) -> Shape:
        shapes = [self.infer(x) for x in e.items]
        first = shapes[0]
        if not first:
            raise ShapeError("scalars cannot be concatenated", e.location)
        if not 0 <= e.axis < len(first):
            raise ShapeError(f"axis {e.axis} is out of range for shape {show(first)}",
                             e.location)
        total: int | None = 0
        out = list(first)
        for s, x in zip(shapes, e.items, strict=True):
            if len(s) != len(first) or not all(
                    dims_match(a, b) for k, (a, b) in enumerate(zip(s, first, strict=True))
                    if k != e.axis):
                raise ShapeError(f"cannot concatenate {show(s)} with {show(first)} along axis "
                                 f"{e.axis}", x.location)
            total = None if total is None or s[e.axis] is None else total + s[e.axis]
            for k, d in enumerate(s):
                if k != e.axis and out[k] is None:
                    out[k] = d
        out[e.axis] = total
        return tuple(out)

    def call(self, e: Call) -> Shape:
        f = TABLE.get(e.function)
        if f is None:
            if e.function in INITIALIZERS:
                raise ShapeError(f"'{e.function}' is a parameter initializer, not a function "
                                 "of values", e.location)
            more = did_you_mean(e.function, list(TABLE))
            raise ShapeError(f"unknown function '{e.function}'{more}", e.location)
        if len(e.args) != f.arity:
            raise ShapeError(f"'{f.name}' takes {f.arity} argument{'s' * (f.arity > 1)}, "
                             f"found {len(e.args)}", e.location)
        if f.float_only and not self.is_float:
            raise ShapeError(f"'{f.name}' needs a floating-point type; the module's type is "
                             f"{self.program.dtype}", e.location)
        if f.rule == "attention":  # its last argument is a constant, not a value
            return self.attention(e)
        shapes = [self.infer(a) for a in e.args]
        if f.rule == "embedding":
            if len(shapes[1]) != 2:
                raise ShapeError(f"'embedding' takes a table [vocabulary x features], found "
                                 f"{show(shapes[1])}", e.args[1].location)
            return (*shapes[0], shapes[1][1])
        if f.rule == "unary":
            return shapes[0]
        if f.rule == "binary":
            out = broadcast(*shapes)
            if out is None:
                raise ShapeError(f"'{f.name}' of shapes {show(shapes[0])} and "
                                 f"{show(shapes[1])}: they do not broadcast", e.location)
            return out
        if f.rule == "rowwise":
            if not shapes[0]:
                raise ShapeError(f"'{f.name}' normalizes along the last dimension; a scalar "
                                 "has none", e.location)
            return shapes[0]
        if f.rule == "reduction":
            return ()
        if not shapes_match(shapes[0], shapes[1]):
            raise ShapeError(f"'{f.name}' compares a prediction and a target of one shape, "
                             f"found {show(shapes[0])} and {show(shapes[1])}", e.location)
        if f.name == "cross_entropy" and len(shapes[0]) not in (1, 2):
            raise ShapeError(f"'cross_entropy' takes class scores [classes] or [batch x "
                             f"classes], found {show(shapes[0])}", e.location)
        return ()

    def attention(self, e: Call) -> Shape:
        """causal_attention(q, k, v, heads): q, k and v of one shape [… x time x features],
        the features split into `heads` heads; the split is a shape cast, so the number of
        heads and the features must be known here."""
        q, k, v = (self.infer(a) for a in e.args[:3])
        heads = self.heads(e.args[3])
        if len(q) < 2:
            raise ShapeError(f"'causal_attention' takes q, k and v of shape [… x time x "
                             f"features] (rank 2 or more), found {show(q)}", e.args[0].location)
        if not (shapes_match(q, k) and shapes_match(q, v)):
            raise ShapeError(f"'causal_attention' takes q, k and v of one shape, found "
                             f"{show(q)}, {show(k)} and {show(v)}", e.location)
        shape = tuple(next((d for d in dims if d is not None), None)
                      for dims in zip(q, k, v, strict=True))
        features = shape[-1]
        if features is None:
            raise ShapeError(f"'causal_attention' splits the features (the last dimension) "
                             f"into heads, so their number must be static, found "
                             f"{show(shape)}", e.location)
        if features % heads:
            raise ShapeError(f"'causal_attention' cannot split {features} features into "
                             f"{heads} heads: the number of heads must divide the last "
                             "dimension", e.args[3].location)
        return shape

    def heads(self, e: Expr) -> int:
        """The number of heads: a positive integer constant, as written."""
        if isinstance(e, Number) and isinstance(e.value, int) and e.value > 0:
            return e.value
        if isinstance(e, Number):
            found = e.text
        elif isinstance(e, Unary) and isinstance(e.x, Number):
            found = f"-{e.x.text}"
        elif isinstance(e, Name) and e.time is None:
            found = f"'{e.name}'"
        else:
            found = "an expression"
        raise ShapeError(f"the number of heads of 'causal_attention' must be a positive "
                         f"integer constant, found {found}", e.location)


def sized(shape: Shape, e: Expr) -> Shape:
    """`shape`, the result of `e`, once it is known to fit the IR's largest size."""
    problem = shape_problem(shape)
    if problem is not None:
        raise ShapeError(f"the result has shape {show(shape)}: {problem}", e.location)
    return shape


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours (so 'tahn' is one edit
    from 'tanh')."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def suggest(name: str, candidates: list[str]) -> str | None:
    """The closest candidate within a third of the name's length, same length first."""
    scored = sorted((edit_distance(name, c), abs(len(c) - len(name)), c) for c in candidates)
    if scored and scored[0][0] <= max(1, len(name) // 3):
        return scored[0][2]
    return None


def did_you_mean(name: str, candidates: list[str]) -> str:
    """`; did you mean 'X'?` for the closest candidate (see `suggest`), or nothing."""
    close = suggest(name, candidates)
    return f"; did you mean '{close}'?" if close else ""


def late_values(block: Recurrent | None, ordered: list[Declaration]) -> set[str]:
    """The values outside the block that read its final states, directly or not: one pass
    over the declarations in dependency order."""
    if block is None:
        return set()
    inside = {d.name for d in block.declarations}
    late: set[str] = set()
    for d in ordered:
        if not d.recurrent and d.value is not None and any(
                n in inside or n in late for n in reads_now(d.value)):
            late.add(d.name)
    return late


def walk(e: Expr) -> list[Expr]:
    """`e` and every expression inside it (without recursion: a sum of thousands of terms is
    a tree thousands deep)."""
    out: list[Expr] = []
    todo = [e]
    while todo:
        x = todo.pop()
        out.append(x)
        todo += reversed(children(x))
    return out


def children(e: Expr) -> list[Expr]:
    if isinstance(e, Unary | Transpose | Reshape):
        return [e.x]
    if isinstance(e, Binary):
        return [e.lhs, e.rhs]
    if isinstance(e, Concat):
        return list(e.items)
    if isinstance(e, Call):
        return list(e.args)
    return []


def reads_now(e: Expr) -> list[str]:
    """The names an expression reads at the same step (not `h[t-1]`, the step before)."""
    return [x.name for x in walk(e) if isinstance(x, Name) and x.time in (None, 0)]


def dependency_order(program: Program, decls: dict[str, Declaration]
                     ) -> tuple[list[Declaration], list[list[str]]]:
    """The hidden and output declarations, each after the ones it reads (a depth-first
    walk with an explicit stack), and the cycles met on the way (`[a, b, a]`)."""
    order: list[Declaration] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def computed(name: str) -> Declaration | None:
        d = decls.get(name)
        return d if d is not None and d.value is not None and d.role in ("hidden", "out") \
            else None

    for root in program.declarations:
        if decls.get(root.name) is not root or computed(root.name) is None or root.name in state:
            continue
        path: list[str] = [root.name]
        stack = [iter(reads_now(root.value))]  # type: ignore[arg-type]
        state[root.name] = 1
        while stack:
            name = next(stack[-1], None)
            if name is None:
                stack.pop()
                done = path.pop()
                state[done] = 2
                order.append(decls[done])
                continue
            d = computed(name)
            if d is None or state.get(name) == 2:
                continue
            if state.get(name) == 1:
                cycles.append([*path[path.index(name):], name])
                continue
            state[name] = 1
            path.append(name)
            stack.append(iter(reads_now(d.value)))  # type: ignore[arg-type]
    return order, cycles


def check(program: Program) -> Checked:
    """Check a parsed program; raises DiagnosticError with every problem found."""
    return Checker(program).check()
