"""`constant-fold`: evaluate what the operands already determine, and the branches they decide.

Rules, applied until none applies:
  1. a pure instruction whose operands are all literals is evaluated by its own
     `evaluate` (the interpreter's numpy semantics, so every instruction is covered)
     and its uses get the result as a literal; `literal` instructions just hand over
     their literal. The result becomes a scalar, a splat when all elements are equal,
     or else a tensor (tuple, array, struct, enum) literal of at most `max_elements`
     elements per tensor. Element-wise instructions on splats are evaluated on one
     element, so `add 1: <1000 x 1000 x f32>, 2: f32` folds to `3: <1000 x 1000 x f32>`
     without building a million elements; other instructions are not evaluated when a
     tensor operand or result has more than `max_elements` elements. An evaluation that
     fails (integer division by zero, …) leaves the instruction to fail at run time;
  2. a non-entry block argument that receives the same literal on every edge from a
     reachable block (or itself, on back edges) is replaced by it and removed, with
     the operands passed to it;
  3. `conditional` on a literal condition becomes a `branch` to the taken target, and
     `branchEnum` on an enum literal a `branch` passing the case's values;
  4. `rank`, `shape` and `unitCount` fold whatever their operand, when its type says:
     `rank` always, `shape` and `unitCount` when every dimension is static (the
     operand need not be a literal: `unitCount of %m: <256 x f32>` is `256: i64`).

`random` is never evaluated. A literal replaces a value only when its type is exactly
the value's type, so every use keeps the type it is written with.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlvm.ir import (
    AggregateLiteral,
    Argument,
    ArrayType,
    Block,
    BranchTarget,
    Builder,
    Function,
    FunctionPass,
    Instruction,
    KeywordLiteral,
    LiteralValue,
    Module,
    NominalType,
    PassContext,
    ScalarLiteral,
    TensorType,
    TupleType,
    Type,
    Value,
)
from dlvm.ir.analysis import ControlFlowGraph
from dlvm.ir.core import erase_instructions, iter_nested
from dlvm.ir.interp import Frame, Interpreter
from dlvm.ir.runtime import EnumValue, numpy_dtype
from dlvm.ir.types import EnumDecl, StructDecl

from .cse import literal_key

METADATA = frozenset({"rank", "shape", "unitCount"})  # decided by the operand's type
NEVER_FOLDED = frozenset({"random"})  # a fresh draw each time it runs
EXPLICIT_EDGES = frozenset({"branch", "conditional"})  # edges that pass explicit values


@dataclass
class ConstantFolding(FunctionPass):
    name = "constant-fold"
    summary = "evaluate instructions whose operands are all literals"

    max_elements: int = 1024

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        assert fn.module is not None
        folder = Folder(fn.module, self.max_elements)
        changed = False
        while True:
            insts = fold_instructions(fn, folder)
            branches = fold_branches(fn)
            args = fold_arguments(fn)
            ctx.stat("instructions folded", insts)
            ctx.stat("branches folded", branches)
            ctx.stat("block arguments folded", args)
            if not (insts or branches or args):
                return changed
            changed = True


# ---------------------------------------------------------------- helpers


def is_constant(v: Value) -> bool:
    """A literal with only literals nested in it."""
    return isinstance(v, LiteralValue) and all(
        isinstance(n, LiteralValue) for n in iter_nested(v))


def tensor_count(t: Type) -> int:
    """Elements of a static tensor type; 0 for other types (a literal aggregate is as
    large as its text)."""
    return (t.count or 0) if isinstance(t, TensorType) else 0


def python_scalar(x: np.generic) -> bool | int | float:
    """The Python number a literal holds for `x`, shortest first (f32 0.1 prints `0.1`)."""
    if x.dtype.kind == "b":
        return bool(x)
    if x.dtype.kind in "iu":
        return int(x)
    exact = float(x)
    if x.dtype.itemsize < 8 and math.isfinite(exact):
        short = float(str(x))
        if np.asarray(short, x.dtype).tobytes() == np.asarray(x).tobytes():
            return short
    return exact


def scalar_literal(x: np.generic, t: Type, rt: TensorType) -> LiteralValue | None:
    """`x` as a literal of type `t`; None for an integer outside the data type's range
    (an `i1` is held in an int8, whose arithmetic can leave [-1, 0])."""
    value = python_scalar(x)
    bits = rt.dtype.bits
    if rt.dtype.is_int and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        return None
    return LiteralValue(ScalarLiteral(value), t)


def top_level_operands(inst: Instruction) -> list[LiteralValue]:
    """The literal operands written in `inst`'s fields (not the elements nested in them)."""
    out: list[LiteralValue] = []

    def visit(x: Any) -> None:
        if isinstance(x, LiteralValue):
            out.append(x)
        elif isinstance(x, list | tuple):
            for e in x:
                visit(e)

    for name in inst.op.value_fields:
        visit(inst.fields.get(name))
    return out


def is_splat(arr: np.ndarray) -> bool:
    """Whether all elements are bit-identical (0.0 and -0.0 differ)."""
    bits = arr.reshape(-1).view(f"u{arr.itemsize}")
    return bool(np.all(bits == bits[0]))


# ---------------------------------------------------------------- evaluation


class Folder:
    """Evaluates instructions with the reference interpreter and turns results into literals."""

    def __init__(self, module: Module, max_elements: int) -> None:
        self.module = module
        self.max_elements = max_elements
        self.interp = Interpreter(module)

    def fold(self, inst: Instruction) -> LiteralValue | None:
        """The literal `inst` computes, if its operands determine it."""
        if not inst.has_trait("pure") or inst.is_terminator or inst.opcode in NEVER_FOLDED:
            return None
        operands = inst.operands
        if inst.opcode in METADATA:
            return self.metadata(inst)
        if not all(isinstance(v, LiteralValue) for v in operands):
            return None
        if inst.opcode == "literal":
            value = inst.fields["value"]
            return value if value.type == inst.type else None
        result = self.evaluate(inst, operands)
        return None if result is None else self.literal(result, inst.type)

    def metadata(self, inst: Instruction) -> LiteralValue | None:
        """`rank`, `shape` or `unitCount` of an operand whose type determines it."""
        t = self.module.resolve(inst.fields["x"].type)
        if not isinstance(t, TensorType) or (inst.opcode != "rank" and not t.is_static):
            return None
        dims = [d for d in t.shape if d is not None]
        value = {"rank": np.int64(t.rank), "unitCount": np.int64(math.prod(dims)),
                 "shape": np.asarray(dims, np.int64)}[inst.opcode]
        return self.literal(value, inst.type)

    def evaluate(self, inst: Instruction, operands: list[Value]) -> Any:
        """The run-time value of `inst`, or None if it cannot (or should not) be computed.

        The operands are handed to a copy of `inst` as fresh placeholders, so that a
        splat operand can stand in as a single element (see `splat_operands`).
        """
        splat = self.splat_operands(inst, operands)
        if not splat and any(tensor_count(self.module.resolve(t)) > self.max_elements
                             for t in [inst.type, *(v.type for v in operands)]):
            return None
        evaluate = inst.op.evaluate
        if evaluate is None:
            return None
        frame = Frame(self.interp)
        placeholders: dict[int, Value] = {}
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for v in top_level_operands(inst):
                    if id(v) not in placeholders:
                        p = placeholders[id(v)] = Argument(v.type)
                        frame.values[p] = self.operand_value(v, frame, splat)
                copy = Instruction(inst.op, dict(inst.fields), inst.type)
                copy.map_operands(lambda x: placeholders.get(id(x), x))
                result = evaluate(copy, frame)
        except Exception:  # any failure is the program's, left for it to meet at run time
            return None
        if splat:  # a (1, …, 1) array standing for the whole splat
            ok = isinstance(result, np.ndarray) and result.size == 1
            return SplatResult(result.reshape(())) if ok else None
        return result

    def operand_value(self, v: LiteralValue, frame: Frame, splat: bool) -> Any:
        """A literal operand's value; for the splat case, one element of the operand's rank."""
        t = self.module.resolve(v.type)
        if splat:
            assert isinstance(t, TensorType) and isinstance(v.literal, ScalarLiteral)
            return np.full((1,) * t.rank, v.literal.value, numpy_dtype(t.dtype))
        return self.interp.literal(v, frame)

    def splat_operands(self, inst: Instruction, operands: list[Value]) -> bool:
        """Element-wise on splats of static types, giving a static result: one element will do."""
        if not inst.has_trait("elementwise") or not operands:
            return False
        types = [self.module.resolve(t) for t in [inst.type, *(v.type for v in operands)]]
        return all(isinstance(t, TensorType) and t.is_static for t in types) and all(
            isinstance(v, LiteralValue) and isinstance(v.literal, ScalarLiteral)
            for v in operands)

    # ------------------------------------------------------------ results as literals

    def literal(self, value: Any, t: Type) -> LiteralValue | None:
        """A literal of type `t` holding `value`, or None if it cannot (or is too large)."""
        rt = self.module.resolve(t)
        if isinstance(rt, TensorType):
            return self.tensor_literal(value, t, rt)
        if isinstance(rt, TupleType | ArrayType) and isinstance(value, tuple):
            types = rt.elements if isinstance(rt, TupleType) else (rt.element,) * rt.count
            kind = "tuple" if isinstance(rt, TupleType) else "array"
            return self.aggregate(kind, value, types, t)
        decl = self.module.type_decls.get(rt.name) if isinstance(rt, NominalType) else None
        if isinstance(decl, StructDecl) and isinstance(value, dict):
            keys = tuple(k for k, _ in decl.fields)
            if set(value) != set(keys):
                return None
            return self.aggregate("struct", tuple(value[k] for k in keys),
                                  [ft for _, ft in decl.fields], t, keys)
        if isinstance(decl, EnumDecl) and isinstance(value, EnumValue):
            types = decl.case_types(value.case)
            if types is None:
                return None
            return self.aggregate("enum", value.values, types, t, (value.case,))
        return None

    def aggregate(self, kind: str, values: Sequence[Any], types: Sequence[Type], t: Type,
                  keys: tuple[str, ...] = ()) -> LiteralValue | None:
        if len(values) != len(types):
            return None
        elements = [self.literal(v, et) for v, et in zip(values, types, strict=True)]
        if any(e is None for e in elements):
            return None
        return LiteralValue(AggregateLiteral(kind, tuple(elements), keys), t)  # type: ignore[arg-type]

    def tensor_literal(self, value: Any, t: Type, rt: TensorType) -> LiteralValue | None:
        if isinstance(value, SplatResult):
            if value.element.dtype != numpy_dtype(rt.dtype) or not rt.is_static:
                return None
            return scalar_literal(value.element[()], t, rt)
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray) or value.dtype != numpy_dtype(rt.dtype):
            return None
        if value.ndim != rt.rank or any(d is not None and d != s
                                        for d, s in zip(rt.shape, value.shape, strict=True)):
            return None
        if value.ndim == 0:
            return scalar_literal(value[()], t, rt)
        if rt.is_static and (value.size == 0 or is_splat(value)):
            first = value.reshape(-1)[0] if value.size else np.zeros((), value.dtype)[()]
            return scalar_literal(first, t, rt)
        if value.size > self.max_elements or value.size == 0:
            return None
        row = rt.with_shape(rt.shape[1:])
        return self.aggregate("tensor", list(value), [row] * len(value), t)


@dataclass(frozen=True)
class SplatResult:
    """An element-wise result computed on one element, standing for a whole splat."""

    element: np.ndarray


# ---------------------------------------------------------------- 1. instructions


def fold_instructions(fn: Function, folder: Folder) -> int:
    """Replace the uses of every foldable instruction by its literal and erase it."""
    cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
    order = cfg.rpo + [b for b in fn.blocks if not cfg.is_reachable(b)]
    mapping: dict[Value, Value] = {}
    folded: list[Instruction] = []
    for block in order:  # definitions before uses, so chains fold in one sweep
        for inst in block.instructions:
            if mapping:
                inst.replace_uses(mapping)
            lit = folder.fold(inst)
            if lit is not None:
                mapping[inst] = lit
                folded.append(inst)
    if mapping:
        for inst in fn.instructions():
            inst.replace_uses(mapping)
    erase_instructions(folded)
    return len(folded)


# ---------------------------------------------------------------- 2. terminators


def taken_target(term: Instruction) -> BranchTarget | None:
    """The edge a terminator takes when its condition (or enum) is a literal."""
    if term.opcode == "conditional":
        cond = term.fields["condition"]
        if isinstance(cond, LiteralValue) and isinstance(cond.literal, ScalarLiteral):
            return term.fields["then" if cond.literal.value else "else"]  # true ? a : b = a
        if isinstance(cond, LiteralValue) and cond.literal == KeywordLiteral("zero"):
            return term.fields["else"]
        return None
    value = term.fields.get("value") if term.opcode == "branchEnum" else None
    if not (is_constant(value) and isinstance(value.literal, AggregateLiteral)
            and value.literal.kind == "enum"):
        return None
    case = value.literal.keys[0]
    for name, target in term.fields["cases"]:
        if name == case:  # ?c(v…) selects 'c_block, which binds v…
            return BranchTarget(target.block, list(value.literal.elements))
    return None


def fold_branches(fn: Function) -> int:
    folded = 0
    for block in fn.blocks:
        term = block.terminator
        target = taken_target(term) if term is not None else None
        if target is None:
            continue
        term.erase()
        b = Builder(fn.module)
        b.position_at_end(block)
        b.create("branch", BranchTarget(target.block, list(target.args)))
        folded += 1
    return folded


# ---------------------------------------------------------------- 3. block arguments


def incoming(fn: Function) -> dict[Block, list[tuple[Instruction, BranchTarget]]]:
    """Every edge of `fn` by target block, with the terminator it belongs to."""
    edges: dict[Block, list[tuple[Instruction, BranchTarget]]] = {}
    for block in fn.blocks:
        term = block.terminator
        for target in term.targets if term is not None else []:
            edges.setdefault(target.block, []).append((term, target))
    return edges


def uniform_literal(arg: Argument, values: list[Value]) -> LiteralValue | None:
    """The literal every edge passes to `arg` (ignoring `arg` itself), of `arg`'s type."""
    others = [v for v in values if v is not arg]
    if not others or not all(is_constant(v) for v in others):
        return None
    first = others[0]
    assert isinstance(first, LiteralValue)
    if first.type != arg.type:
        return None
    key = literal_key(first)
    if any(literal_key(v) != key or v.type != first.type for v in others[1:]):  # type: ignore[arg-type]
        return None
    return first


def fold_arguments(fn: Function) -> int:
    """Replace arguments that always receive one literal by it, and remove them."""
    cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
    edges = incoming(fn)
    mapping: dict[Value, Value] = {}
    for block in fn.blocks:
        into = edges.get(block, [])
        if block is fn.entry or not cfg.is_reachable(block) or not block.arguments or any(
                term.opcode not in EXPLICIT_EDGES for term, _ in into):
            continue
        live = [t for term, t in into if term.block is not None and cfg.is_reachable(term.block)]
        drop = []
        for i, arg in enumerate(block.arguments):
            lit = uniform_literal(arg, [t.args[i] for t in live])
            if lit is not None:
                mapping[arg] = lit
                drop.append(i)
        for _, target in into:
            target.args = [v for i, v in enumerate(target.args) if i not in drop]
        for i in reversed(drop):
            block.remove_argument(block.arguments[i])
    if mapping:
        for inst in fn.instructions():
            inst.replace_uses(mapping)
    return len(mapping)
