"""The `differentiation` pass: every derivative declaration becomes a function.

Declarations are processed from a worklist: differentiating a call (`apply @g`)
declares the derivative of `@g` it needs (reusing an equal declaration when one
exists), which joins the worklist, so recursion and any order of derivatives
work: a generated function is ordinary IR and can itself be differentiated.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from dlvm.ir import DerivativeDecl, Function, Instruction, Module, Pass, PassContext, Value
from dlvm.ir.core import UniqueNames
from dlvm.ir.derivatives import differentiable_argument, gradient_type, outputs_of
from dlvm.ir.types import FunctionType, TupleType

from .activity import carries_derivative
from .context import AdjointContext, TangentContext
from .reverse import DifferentiationError, ReverseBuilder
from .rules import load_builtin_rules


def _declaration_key(d: DerivativeDecl) -> tuple[object, ...]:
    """Equal for declarations of the same derivative (a `wrt` list, which a caller may have
    written, equals only a list, as when the fields are compared)."""
    wrt = ("list", *d.wrt) if isinstance(d.wrt, list) else d.wrt
    return (d.kind, d.of, d.from_index, wrt, tuple(d.keeping), d.seedable)


class Generator:
    """Generates derivative bodies for one module, declaring callee derivatives on demand."""

    def __init__(self, module: Module, checkpoint: bool = False) -> None:
        load_builtin_rules()
        self.module = module
        self.checkpoint = checkpoint
        self.worklist: deque[Function] = deque()
        self.generated = 0
        self.tape_values = 0
        self.derived: dict[Function, DerivativeDecl] = {}
        # the first function of the module declaring each derivative (pending or generated),
        # and the names taken: kept up to date once needed, since a module differentiating
        # many calls would otherwise scan its functions for each
        self.declared: dict[tuple[object, ...], Function] | None = None
        self.names: UniqueNames | None = None

    def run(self) -> int:
        for fn in self.module.functions:
            if isinstance(fn.declaration, DerivativeDecl):
                self.worklist.append(fn)
        while self.worklist:
            self.generate(self.worklist.popleft())
        return self.generated

    def generate(self, df: Function) -> None:
        decl = df.declaration
        if not isinstance(decl, DerivativeDecl):
            return  # generated already (a derivative of it was needed first)
        self.derived[df] = decl
        f = decl.of
        if not isinstance(f, Function) or f.is_declaration:
            name = getattr(f, "name", "?")
            if isinstance(f, Function) and isinstance(f.declaration, DerivativeDecl):
                self.generate(f)  # differentiate the derivative once it exists
            else:
                raise DifferentiationError(f"cannot differentiate '@{name}': it has no body")
        if decl.kind == "tangent":
            from .forward import TangentBuilder

            TangentBuilder(self, df).build()
        else:
            builder = ReverseBuilder(self, df, self.checkpoint)
            builder.build()
            self.tape_values += builder.tape_values
        df.declaration = None
        df.invalidate()
        self.generated += 1

    # ------------------------------------------------------------ callee derivatives

    def declare(self, decl: DerivativeDecl, suffix: str) -> Function:
        """The function for `decl`: an equal existing declaration, or a new one."""
        if self.declared is None:
            self.declared = {}
            for fn in self.module.functions:
                other = fn.declaration
                known = other if isinstance(other, DerivativeDecl) else self.derived.get(fn)
                if known is not None:
                    self.declared.setdefault(_declaration_key(known), fn)
        key = _declaration_key(decl)
        found = self.declared.get(key)
        if found is not None:
            return found
        of = decl.of
        assert isinstance(of, Function)
        ftype = gradient_type(decl, of.type_, self.module)
        name = self.unique_name(f"{of.name}_{suffix}")
        # a helper of the caller's derivative: inlining it lets the caller's forward pass be
        # shared (CSE) and the adjoints nobody reads be dropped (DCE)
        fn = Function(name, ftype, declaration=decl, attributes=("inline",))
        self.module.add_function(fn)
        self.declared[key] = fn
        self.worklist.append(fn)
        return fn

    def unique_name(self, base: str) -> str:
        if self.names is None:
            self.names = UniqueNames([*(fn.name for fn in self.module.functions),
                                      *(g.name for g in self.module.globals)])
        return self.names(base)

    def callee(self, inst: Instruction) -> Function:
        callee = inst.callee
        if not isinstance(callee, Function):
            raise DifferentiationError(f"{inst.location}: cannot differentiate a call through a "
                                       "function pointer")
        return callee

    def call_adjoint(self, c: AdjointContext, inst: Instruction, dy: Value
                     ) -> list[tuple[Value, Value]]:
        """`apply @g(args)`: call g's seedable gradient once per differentiable output."""
        g = self.callee(inst)
        ftype = FunctionType(tuple(self.module.resolve(t) for t in g.type_.arguments),
                             self.module.resolve(g.type_.result))
        wrt = tuple(i for i, t in enumerate(ftype.arguments)
                    if differentiable_argument(t, self.module) and c.wants(inst.args[i]))
        if not wrt:
            return []
        args = [c.primal(a) for a in inst.args]
        outputs = outputs_of(ftype)
        is_tuple = isinstance(ftype.result, TupleType)
        out: list[tuple[Value, Value]] = []
        for s, t in enumerate(outputs):
            if not carries_derivative(t, self.module) or \
                    t.__class__.__name__ != "TensorType":
                continue
            seed = c.b.extract(dy, keys=[s]) if is_tuple else dy
            decl = DerivativeDecl("gradient", g, s if is_tuple else None, wrt, (), True)
            dg = self.declare(decl, "grad" if not is_tuple else f"grad{s}")
            grads = c.b.apply(dg, [*args, seed])
            for position, i in enumerate(wrt):
                out.append((inst.args[i], c.b.extract(grads, keys=[position])))
        return out

    def call_tangent(self, c: TangentContext, inst: Instruction) -> Value | None:
        """`apply @g(args)`: call g's tangent in the arguments that have tangents."""
        g = self.callee(inst)
        wrt = tuple(i for i, a in enumerate(inst.args) if c.tangent(a) is not None)
        if not wrt:
            return None
        ftype = FunctionType(tuple(self.module.resolve(t) for t in g.type_.arguments),
                             self.module.resolve(g.type_.result))
        args = [c.primal(a) for a in inst.args]
        tangents = [c.tangent(inst.args[i]) for i in wrt]
        outputs = outputs_of(ftype)
        if not isinstance(ftype.result, TupleType):
            decl = DerivativeDecl("tangent", g, None, wrt, (), False)
            tg = self.declare(decl, "tan")
            return c.b.extract(c.b.apply(tg, [*args, *tangents]), keys=[0])
        from dlvm.ir import AggregateLiteral, LiteralValue

        elements: list[Value] = []
        for s, t in enumerate(outputs):
            if carries_derivative(t, self.module) and t.__class__.__name__ == "TensorType":
                decl = DerivativeDecl("tangent", g, s, wrt, (), False)
                tg = self.declare(decl, f"tan{s}")
                elements.append(c.b.extract(c.b.apply(tg, [*args, *tangents]), keys=[0]))
            else:
                elements.append(c.b.extract(c.primal(inst), keys=[s]))
        return LiteralValue(AggregateLiteral("tuple", tuple(elements)), ftype.result)


@dataclass
class Differentiation(Pass):
    """Generate the bodies of gradient and tangent declarations; stage becomes optimizable.

    `checkpoint`: in loops, recompute a block's pure values in the reverse sweep
    instead of storing them on the tape.
    """

    name = "differentiation"
    summary = "turn gradient and tangent declarations into functions"
    checkpoint: bool = False

    def run(self, module: Module, ctx: PassContext) -> bool:
        generator = Generator(module, self.checkpoint)
        try:
            count = generator.run()
        except DifferentiationError as e:
            from dlvm.ir import PassError

            raise PassError(str(e)) from None
        ctx.stat("derivative functions generated", count)
        ctx.stat("values stored on the tape per pass through the blocks", generator.tape_values)
        if module.stage == "raw":
            module.stage = "optimizable"
        module.invalidate()
        return count > 0
