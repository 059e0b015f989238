"""Lowering whole functions: blocks, block arguments, calls, ownership, errors.

Every DLVM function (one per `Spec`) becomes

    define internal i32 @dlvm.fn.NAME(ptr %ctx, ptr %out, <arguments>)

that returns 0 and stores its result at `%out`, or records an error site in the context and
returns 1 (callers return at once, passing it up to Python). Blocks become LLVM blocks and
block arguments φ-nodes; each edge gets a block of its own where ownership needs retains and
releases (see `ownership.py`). Instructions lower through the opcode table `LOWER`, which
the modules `lower_*` fill (terminators included); element-wise code and reductions lower
through `regions.py`. What this module needs from those modules — literals, globals, enum
references, the fallback for instructions without a native rule — it reads from `RULES`,
which `lowering.py` fills: the modules build on this one, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir as ll

from dlvm.ir import (
    Argument,
    Block,
    Function,
    GlobalVariable,
    Instruction,
    LiteralValue,
    Module,
    Value,
)
from dlvm.ir.runtime import format_np_shape
from dlvm.ir.types import (
    BF16,
    ArrayType,
    NominalType,
    PointerType,
    StackType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
)

from .bfloat import bits_of
from .emit import (
    alloca,
    declare,
    gep,
    global_variable,
    i32,
    i64,
    is_const,
    memcpy,
    mul,
    product,
)
from .layout import (
    I1,
    I8,
    I32,
    I64,
    PTR,
    Layout,
    element_size,
    element_type,
    scalar_type,
    tensor_struct,
)
from .mathlib import MathLib
from .ownership import CONSUMING, Ownership, consumed_values
from .specialize import Spec, Specializer
from .support import CTX_DEPTH, Runtime

MAX_CALL_DEPTH = 2000

Lowerer = Callable[["FunctionLowering", Instruction], "ll.Value | None"]
LOWER: dict[str, Lowerer] = {}
FALLS_BACK = {"builtin"}  # opcodes whose rule covers only some of their forms


@dataclass
class Rules:
    """What lowering a function takes from the modules that build on this one (filled by
    `lowering.py` when it imports them)."""

    literal: Callable[[FunctionLowering, LiteralValue], ll.Value] | None = None
    global_pointer: Callable[[FunctionLowering, GlobalVariable], ll.Value] | None = None
    enum_refs: Callable[[FunctionLowering, ll.Value, Type, bool], None] | None = None
    fallback: Lowerer | None = None  # an instruction through the interpreter
    # `apply` of a `!kernel` as one fused region (None: call it as a function)
    kernel_call: Callable[[FunctionLowering, Instruction, Spec], ll.Value | None] | None = None
    native_builtins: tuple[str, ...] = field(default_factory=tuple)  # builtins with a rule


RULES = Rules()


def has_scalar_rule(inst: Instruction) -> bool:
    return inst.builtin in RULES.native_builtins if inst.opcode == "builtin" else True


def lowers(*opcodes: str) -> Callable[[Lowerer], Lowerer]:
    def register(fn: Lowerer) -> Lowerer:
        for op in opcodes:
            LOWER[op] = fn
        return fn

    return register


class CompileError(Exception):
    """The module uses something this target cannot compile (said in one line)."""


@dataclass(frozen=True)
class ErrorSite:
    """A run-time error the code can raise: its message (with `{0}`…`{3}` for the values the
    code records) and where, as the interpreter says it. `at` is the instruction's place
    (see `locate`): code loaded from the cache may serve a module read from another file,
    whose locations `where` is made from again."""

    message: str
    where: str = ""
    types: bool = False  # the first parameter is a stack item type id
    at: tuple[str, int, int] | None = None

    def format(self, params: Sequence[int], type_names: Sequence[str] = ()) -> str:
        values: list[object] = list(params)
        if self.types and values:
            k = int(params[0])
            values[0] = type_names[k - 1] if 0 < k <= len(type_names) else "?"
        text = self.message.format(*values) if "{" in self.message else self.message
        return f"{self.where}{text}"


def where(inst: Instruction | None) -> str:
    if inst is None:
        return ""
    loc = f"{inst.location}: " if inst.location is not None else ""
    return f"{loc}'{inst.opcode}': "


def locate(inst: Instruction) -> tuple[str, int, int] | None:
    """Where an instruction is, stably across processes and across modules of the same
    text: (function, block, index); None for one outside a function."""
    block = inst.block
    if block is None or block.function is None:
        return None
    fn = block.function
    return (fn.name or "", fn.blocks.index(block), block.instructions.index(inst))


def instruction_at(module: Module, at: Sequence[Any]) -> Instruction:
    """The instruction at a place `locate` gave (in a module of the same text)."""
    function, block, index = at
    fn = module.function(function)
    assert fn is not None, f"no function '@{function}'"
    return fn.blocks[int(block)].instructions[int(index)]


# ---------------------------------------------------------------- the compile unit


class CompileUnit:
    """One LLVM module: the specializations it holds and everything they share."""

    def __init__(self, module: Module, name: str, *, threads: int = 1,
                 export: bool = False, timeout: float | None = None) -> None:
        self.module = module
        self.layout = Layout(module)
        self.llmod = ll.Module(name=name)
        self.rt = Runtime(self.llmod)
        self.math = MathLib(self.llmod)
        self.specializer = Specializer(module)
        self.sites: list[ErrorSite] = [ErrorSite("no error")]
        self.site_index: dict[ErrorSite, int] = {}
        self.functions: dict[Spec, ll.Function] = {}
        self.queue: list[Spec] = []
        self.ownerships: dict[Function, Ownership] = {}
        self.type_ids: dict[str, int] = {}
        self.type_names: list[str] = []
        self.counter = 0
        self.threads = threads
        self.export = export  # functions keep external linkage (for emitted objects)
        self.timeout = timeout  # loops and calls check the call's deadline
        self.fallbacks: list[list[Any]] = []  # instructions run by their numpy semantics
        self._fallback_base: ll.GlobalVariable | None = None

    def fallback_base(self) -> ll.GlobalVariable:
        """The number of this object's first fallback instruction in its executable."""
        if self._fallback_base is None:
            g = global_variable(self.llmod, I64, f"{self.llmod.name}.fallback_base")
            g.initializer = ll.Constant(I64, 0)
            self._fallback_base = g
        return self._fallback_base

    def site(self, message: str, inst: Instruction | None = None, prefix: str | None = None,
             types: bool = False) -> int:
        if prefix is None:
            s = ErrorSite(message, where(inst), types, locate(inst) if inst else None)
        else:
            s = ErrorSite(message, prefix, types)
        index = self.site_index.get(s)
        if index is None:
            index = self.site_index[s] = len(self.sites)
            self.sites.append(s)
        return index

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}.{self.counter}"

    def ownership(self, fn: Function) -> Ownership:
        own = self.ownerships.get(fn)
        if own is None:
            own = self.ownerships[fn] = Ownership(fn, self.layout)
        return own

    def signature(self, spec: Spec) -> ll.FunctionType:
        args = [self.layout.lower(t) for t in spec.fn.type_.arguments]
        return ll.FunctionType(I32, [PTR, PTR, *args])

    def function(self, spec: Spec) -> ll.Function:
        """The LLVM function of `spec`, declared now and lowered by `lower_all`."""
        fn = self.functions.get(spec)
        if fn is None:
            fn = ll.Function(self.llmod, self.signature(spec), spec.symbol)
            fn.linkage = "external" if self.export else "internal"
            self.functions[spec] = fn
            self.queue.append(spec)
        return fn

    def type_id(self, t: Type) -> int:
        """A number per stack item type (dimensions do not matter: pop checks them apart)."""
        key = erased(self.layout.resolve(t), self.module)
        n = self.type_ids.get(key)
        if n is None:
            n = self.type_ids[key] = len(self.type_names) + 1
            self.type_names.append(str(t))
        return n

    def lower_all(self) -> None:
        while self.queue:
            spec = self.queue.pop()
            FunctionLowering(self, spec, self.functions[spec]).lower()


def erased(t: Type, module: Module) -> str:
    """A type's text with every dimension `_`."""
    if isinstance(t, TensorType):
        return str(t.with_shape((None,) * t.rank))
    if isinstance(t, TupleType):
        return "(" + ", ".join(erased(module.resolve(e), module) for e in t.elements) + ")"
    return str(t)


# ---------------------------------------------------------------- tensors


class Tensor:
    """A tensor value under lowering: its LLVM struct and its (specialized) type.

    The fields are taken apart where the value is looked at (not later, inside some loop,
    where they would not dominate other uses); static sizes are constants."""

    def __init__(self, b: ll.IRBuilder, value: ll.Value, t: TensorType) -> None:
        self.b, self.value, self.type = b, value, t
        self.buf = b.extract_value(value, 0)
        self.data = b.extract_value(value, 1)
        self.dims = [i64(d) if d is not None else b.extract_value(value, [2, k])
                     for k, d in enumerate(t.shape)]

    def count(self) -> ll.Value:
        return product(self.b, self.dims)


def make_tensor(b: ll.IRBuilder, buf: ll.Value, data: ll.Value,
                dims: Sequence[ll.Value]) -> ll.Value:
    v: ll.Value = ll.Constant(tensor_struct(len(dims)), None)
    v = b.insert_value(v, buf, 0)
    v = b.insert_value(v, data, 1)
    for k, d in enumerate(dims):
        v = b.insert_value(v, d, [2, k])
    return v


# ---------------------------------------------------------------- functions


class FunctionLowering:
    def __init__(self, unit: CompileUnit, spec: Spec, llfn: ll.Function) -> None:
        self.unit = unit
        self.spec = spec
        self.fn = spec.fn
        self.llfn = llfn
        self.layout = unit.layout
        self.rt = unit.rt
        self.own = unit.ownership(spec.fn)
        self.values: dict[Value, ll.Value] = {}
        self.blocks: dict[Block, ll.Block] = {}
        self.phis: dict[Argument, ll.PhiInstr] = {}
        self.b = ll.IRBuilder(llfn.append_basic_block("prologue"))
        self.ctx = llfn.args[0]
        self.out = llfn.args[1]
        self.temporaries: list[tuple[ll.Value, Type]] = []
        self.current: Instruction | None = None
        self.taken: set[Value] = set()  # dying operands an instruction took over
        self.virtual: set[Instruction] = set()  # transposes only `dot` reads, as flags

    # ------------------------------------------------------------ types and values

    def type(self, v: Value) -> Type:
        return self.layout.resolve(self.spec.type(v))

    def tensor_type(self, v: Value) -> TensorType:
        t = self.type(v)
        assert isinstance(t, TensorType), f"{v!r} is not a tensor"
        return t

    def tensor(self, v: Value) -> Tensor:
        return Tensor(self.b, self.value(v), self.tensor_type(v))

    def value(self, v: Value) -> ll.Value:
        found = self.values.get(v)
        if found is not None:
            return found
        if isinstance(v, LiteralValue):
            return self.literal(v)
        if isinstance(v, Function):
            return self.unit.function(self.unit.specializer.spec(v)) if v.blocks else \
                ll.Constant(PTR, None)
        if isinstance(v, GlobalVariable):
            assert RULES.global_pointer is not None, "import dlvm.llvm.codegen.lowering first"
            return RULES.global_pointer(self, v)
        raise AssertionError(f"value {v!r} used before its definition")

    def literal(self, v: LiteralValue) -> ll.Value:
        assert RULES.literal is not None, "import dlvm.llvm.codegen.lowering first"
        return RULES.literal(self, v)

    # ------------------------------------------------------------ errors and calls

    def site(self, message: str, inst: Instruction | None = None) -> int:
        return self.unit.site(message, inst if inst is not None else self.current)

    def fail(self, site: int, params: Sequence[ll.Value] = ()) -> None:
        """Record `site` and return 1 (the builder must be where the error happens)."""
        self.rt.fail(self.b, self.ctx, site, list(params))

    def fail_if(self, cond: ll.Value, message: str, params: Sequence[ll.Value] = (),
                inst: Instruction | None = None) -> None:
        if isinstance(cond, ll.Constant) and not cond.constant:
            return  # decided while compiling: never
        site = self.site(message, inst)
        with self.b.if_then(cond, likely=False):
            self.rt.fail(self.b, self.ctx, site, list(params))

    def fail_unless_equal(self, x: ll.Value, y: ll.Value, message: str,
                          params: Sequence[ll.Value] | None = None) -> None:
        """Fail when two sizes differ. Two constants are compared here: a build for given
        argument shapes makes sizes constant that the type rules never compared."""
        if isinstance(x, ll.Constant) and isinstance(y, ll.Constant):
            differ: ll.Value = ll.Constant(I1, int(x.constant != y.constant))
        else:
            differ = self.b.icmp_signed("!=", x, y)
        self.fail_if(differ, message, [x, y] if params is None else params)

    def check(self, status: ll.Value) -> None:
        """Return a callee's error status at once."""
        with self.b.if_then(self.b.icmp_signed("!=", status, i32(0)), likely=False):
            self.b.ret(status)

    # ------------------------------------------------------------ memory

    def alloc(self, nbytes: ll.Value) -> ll.Value:
        """A new buffer (count 1) of `nbytes`, or an out-of-memory error."""
        buf = self.b.call(self.rt.get("alloc"), [self.ctx, nbytes])
        self.fail_if(self.b.icmp_unsigned("==", buf, ll.Constant(PTR, None)),
                     "out of memory (unable to allocate {0} bytes)", [nbytes])
        return buf

    def alloc_array(self, count: ll.Value, size: ll.Value) -> ll.Value:
        """A new buffer for `count` items of `size` bytes (count ≥ 0), or an out-of-memory
        error, also when their bytes do not fit in an i64 (wrapped, they would look few)."""
        b = self.b
        if is_const(count) and is_const(size) and count.constant * size.constant < 1 << 62:
            return self.alloc(i64(count.constant * size.constant))
        pair = ll.LiteralStructType([I64, I1])
        smul = declare(self.unit.llmod, "llvm.smul.with.overflow.i64", pair, [I64, I64])
        result = b.call(smul, [count, size])
        self.fail_if(b.extract_value(result, 1),
                     "out of memory (unable to allocate {0} items of {1} bytes)", [count, size])
        return self.alloc(b.extract_value(result, 0))

    def new_tensor(self, t: TensorType, dims: Sequence[ll.Value]) -> tuple[ll.Value, ll.Value]:
        """(struct, data) of a new tensor of type `t` with `dims`."""
        buf = self.alloc_array(product(self.b, dims), i64(element_size(t.dtype)))
        data = self.rt.data(self.b, buf)
        return make_tensor(self.b, buf, data, dims), data

    def retain(self, v: ll.Value, t: Type) -> None:
        self.walk_refs(v, t, releasing=False)

    def release(self, v: ll.Value, t: Type) -> None:
        self.walk_refs(v, t, releasing=True)

    def walk_refs(self, v: ll.Value, t: Type, releasing: bool) -> None:
        """Retain or release every counted reference inside a value of type `t`."""
        t = self.layout.resolve(t)
        b = self.b
        if isinstance(t, TensorType):
            if t.rank:
                buf = b.extract_value(v, 0)
                if releasing:
                    b.call(self.rt.get("release"), [self.ctx, buf])
                else:
                    b.call(self.rt.get("retain"), [buf])
        elif isinstance(t, TupleType):
            for k, e in enumerate(t.elements):
                if self.layout.managed(e):
                    self.walk_refs(b.extract_value(v, k), e, releasing)
        elif isinstance(t, ArrayType):
            if self.layout.managed(t.element):
                for k in range(t.count):
                    self.walk_refs(b.extract_value(v, k), t.element, releasing)
        elif isinstance(t, NominalType):
            decl = self.unit.module.type_decls.get(t.name)
            if isinstance(decl, StructDecl):
                for k, (_, ft) in enumerate(decl.fields):
                    if self.layout.managed(ft):
                        self.walk_refs(b.extract_value(v, k), ft, releasing)
            elif self.layout.is_enum(t):
                assert RULES.enum_refs is not None, "import dlvm.llvm.codegen.lowering first"
                RULES.enum_refs(self, v, t, releasing)
        elif isinstance(t, PointerType):  # the block the pointer addresses
            block = b.extract_value(v, 0)
            if releasing:
                b.call(self.rt.get("block_release"), [self.ctx, block])
            else:
                b.call(self.rt.get("block_retain"), [block])
        elif isinstance(t, StackType):
            if releasing:
                b.call(self.rt.get("stack_release"), [self.ctx, v])
            else:
                b.call(self.rt.get("stack_retain"), [v])

    def keep(self, v: ll.Value, t: Type) -> ll.Value:
        """`v` made fit to outlive the call, as memory and enums hold what they are given:
        each tensor borrowed from the caller (its array is the caller's again once the call
        returns) is replaced by a copy of its own. A counted tensor is shared as it is (the
        reference handed over keeps it); an enum's payload was kept when it was built."""
        t = self.layout.resolve(t)
        if not self.layout.managed(t):
            return v
        b = self.b
        if isinstance(t, TensorType):
            return self.keep_tensor(v, t)
        if isinstance(t, TupleType):
            parts = list(t.elements)
        elif isinstance(t, ArrayType):
            parts = [t.element] * t.count
        elif isinstance(t, NominalType) and isinstance(
                decl := self.unit.module.type_decls.get(t.name), StructDecl):
            parts = [ft for _, ft in decl.fields]
        else:
            return v
        for k, pt in enumerate(parts):
            if self.layout.managed(pt):
                v = b.insert_value(v, self.keep(b.extract_value(v, k), pt), k)
        return v

    def keep_tensor(self, v: ll.Value, t: TensorType) -> ll.Value:
        """A borrowed tensor's elements copied into a buffer of its own (count 1), else `v`."""
        b = self.b
        tensor = Tensor(b, v, t)
        before = b.block
        with b.if_then(b.call(self.rt.get("borrowed"), [tensor.buf]), likely=False):
            copy, data = self.new_tensor(t, tensor.dims)
            memcpy(b, data, tensor.data, mul(b, tensor.count(), i64(element_size(t.dtype))))
            copied = b.block
        kept = b.phi(v.type)
        kept.add_incoming(v, before)
        kept.add_incoming(copy, copied)
        return kept

    # ------------------------------------------------------------ the function

    def lower(self) -> None:
        b = self.b
        depth_slot = self.rt.slot(b, self.ctx, CTX_DEPTH)
        depth = b.add(b.load(depth_slot, typ=I64), i64(1))
        self.fail_if(b.icmp_signed(">", depth, i64(MAX_CALL_DEPTH)),
                     f"call stack overflow (more than {MAX_CALL_DEPTH} nested calls)")
        b.store(depth, depth_slot)
        self.tick()
        order = self.own.order
        for block in order:
            self.blocks[block] = self.llfn.append_basic_block(self.block_label(block))
        params = self.llfn.args[2:]
        for a, p in zip(self.fn.entry.arguments, params, strict=True):
            self.values[a] = p
        self.check_entry_arguments()
        if self.own.entry_is_target:
            for a, p in zip(self.fn.entry.arguments, params, strict=True):
                self.retain(p, self.type(a))
        prologue = b.block
        b.branch(self.blocks[self.fn.entry])
        targets = order if self.own.entry_is_target else order[1:]
        for block in targets:  # every φ first: edges are emitted before their targets
            b.position_at_end(self.blocks[block])
            for a in block.arguments:
                phi = b.phi(self.layout.lower(self.type(a)), name=a.name or "")
                if block is self.fn.entry:
                    phi.add_incoming(self.values[a], prologue)
                self.phis[a] = phi
                self.values[a] = phi
        for block in order:
            b.position_at_end(self.blocks[block])
            for a in block.arguments:
                if a in self.own.unused:
                    self.release(self.values[a], self.type(a))
            for inst in block.instructions:
                self.instruction(inst)
        for phi in self.phis.values():
            if not phi.incomings:  # a block reached only from unreachable code
                phi.add_incoming(ll.Constant(phi.type, None), self.llfn.blocks[0])

    def tick(self) -> None:
        """Where a call may run long (a loop's back edge, a call): check the deadline."""
        if self.unit.timeout is not None:
            site = self.unit.site(f"'@{self.fn.name}' exceeded the timeout of "
                                  f"{self.unit.timeout:g} s", prefix="")
            self.rt.tick(self.b, self.ctx, site)

    def block_label(self, block: Block) -> str:
        return block.name or f"b{self.fn.blocks.index(block)}"

    def instruction(self, inst: Instruction) -> None:
        self.current = inst
        self.temporaries = []
        self.taken = set()
        if inst.is_terminator:  # edges handle ownership themselves
            LOWER[inst.opcode](self, inst)
            return
        for v in self.own.consume_retains(inst):
            self.retain(self.value(v), self.type(v))
        rule = LOWER.get(inst.opcode)
        if rule is None or (inst.opcode in FALLS_BACK and not has_scalar_rule(inst)):
            assert RULES.fallback is not None, "import dlvm.llvm.codegen.lowering first"
            result = RULES.fallback(self, inst)
        else:
            result = rule(self, inst)
        if result is not None:
            self.values[inst] = result
        consumed = set(consumed_values(inst))
        for v in self.own.dying.get(inst, ()):
            if v not in consumed and v not in self.taken:
                self.release(self.value(v), self.type(v))
        if inst.opcode not in CONSUMING and inst.opcode != "literal":
            for value, t in self.temporaries:  # literals built for a borrowing use
                self.release(value, t)
        if inst in self.own.unused and result is not None:
            self.release(result, self.type(inst))

    def result_slot(self, t: ll.Type) -> ll.Value:
        """A stack slot in the function's prologue (an alloca in a loop would grow the stack)."""
        prologue = self.llfn.blocks[0]
        saved = self.b.block
        self.b.position_at_start(prologue)
        slot = alloca(self.b, t)
        self.b.position_at_end(saved)
        return slot

    def conform(self, value: ll.Value, have: Type, want: Type, what: str) -> None:
        """Check at run time the static dimensions of `want` that `have` does not fix."""
        have, want = self.layout.resolve(have), self.layout.resolve(want)
        b = self.b
        if isinstance(want, TensorType) and isinstance(have, TensorType) and want.rank:
            unknown = [k for k, (h, w) in enumerate(zip(have.shape, want.shape, strict=True))
                       if w is not None and h != w]
            if not unknown:
                return
            t = Tensor(b, value, have)
            bad = None
            for k in unknown:
                ne = b.icmp_signed("!=", t.dims[k], i64(want.shape[k]))  # type: ignore[arg-type]
                bad = ne if bad is None else b.or_(bad, ne)
            text, params = self.shape_text(t.dims)
            assert bad is not None
            self.fail_if(bad, f"{what} has shape {text}, expected {want}", params, inst=None)
        elif isinstance(want, TupleType) and isinstance(have, TupleType):
            for k, (h, w) in enumerate(zip(have.elements, want.elements, strict=True)):
                self.conform(b.extract_value(value, k), h, w, f"{what}, element {k},")
        elif isinstance(want, ArrayType) and isinstance(have, ArrayType):
            for k in range(want.count):
                self.conform(b.extract_value(value, k), have.element, want.element,
                             f"{what}, element {k},")

    def check_entry_arguments(self) -> None:
        """The callee checks the static dimensions its parameters declare (a caller may pass
        values whose dimensions it knows only at run time)."""
        for k, (a, t) in enumerate(zip(self.fn.entry.arguments, self.fn.type_.arguments,
                                       strict=True)):
            have = dynamic_like(self.layout.resolve(t))
            self.conform(self.values[a], have, t, f"argument {k} of '@{self.fn.name}'")

    def dying(self, inst: Instruction) -> set[Value]:
        return self.own.dying.get(inst, set())

    def take(self, v: Value) -> None:
        """`v` is dying and the current instruction took its reference over."""
        self.taken.add(v)

    # ------------------------------------------------------------ shapes

    def shape_text(self, dims: Sequence[ll.Value]) -> tuple[str, list[ll.Value]]:
        """A message fragment `<{0} x {1}>` and the values to fill it (four at most)."""
        if not dims:
            return "scalar", []
        shown = list(dims[:4])
        text = "<" + " x ".join(f"{{{k}}}" for k in range(len(shown))) + (
            " x …>" if len(dims) > 4 else ">")
        return text, shown

    def store_scalar(self, v: ll.Value, ptr: ll.Value) -> None:
        """Store an element of a buffer (bools are bytes)."""
        if v.type == I1:
            v = self.b.zext(v, I8)
        self.b.store(v, ptr)

    def load_scalar(self, ptr: ll.Value, t: TensorType) -> ll.Value:
        v = self.b.load(ptr, typ=element_type(t.dtype))
        return self.b.trunc(v, I1) if t.dtype.is_bool else v


def dynamic_like(t: Type) -> Type:
    """`t` with every tensor dimension dynamic."""
    if isinstance(t, TensorType):
        return t.with_shape((None,) * t.rank)
    if isinstance(t, TupleType):
        return TupleType(tuple(dynamic_like(e) for e in t.elements))
    if isinstance(t, ArrayType):
        return ArrayType(t.count, dynamic_like(t.element))
    return t


def element_pointer(b: ll.IRBuilder, t: TensorType, data: ll.Value, index: ll.Value
                    ) -> ll.Value:
    return gep(b, element_type(t.dtype), data, index)


def scalar_constant(t: TensorType, value: bool | int | float) -> ll.Constant:
    st = scalar_type(t.dtype)
    if t.dtype.is_bool:
        return ll.Constant(I1, int(bool(value)))
    if t.dtype == BF16:
        return ll.Constant(st, bits_of(float(value)))
    if t.dtype.is_float:
        return ll.Constant(st, float(value))
    return ll.Constant(st, int(value))


def shape_of(t: TensorType) -> str:
    return format_np_shape(tuple(d if d is not None else -1 for d in t.shape))

