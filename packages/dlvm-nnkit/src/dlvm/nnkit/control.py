"""Staged control flow that stays control flow: `cond`, `while_loop`, `fori_loop`.

Each emits blocks and branches into the function being staged (JAX's signatures), so the
IR keeps a real branch or loop — and `differentiation` differentiates the loop itself
(through its stack tape), not an unrolled copy. Loop-carried values are block arguments;
a carried value whose size changes from one iteration to the next gets `_` there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dlvm.ir import Block, Value
from dlvm.ir.core import Argument, BranchTarget
from dlvm.opt.transforms.cfg_canonicalize import unique_block_name

from .checks import check_callable
from .errors import type_error
from .staging import Stage, as_rep, current_stage
from .tensor import StagedTensor
from .types import TensorSpec, bool_, i64

Rep = StagedTensor


def _stage(values: Sequence[Any]) -> Stage:
    for v in values:
        if isinstance(v, Rep):
            return v.stage
    stage = current_stage()
    if stage is None:
        raise type_error("staged control flow writes staged code: use it inside a function "
                         "staged by nn.lambda_ or @nn.function, and call that function "
                         "on arrays")
    return stage


def _flatten(x: Any) -> tuple[list[Any], bool]:
    """The values of a carried state (one value or a tuple of them), and whether it was a
    tuple."""
    if isinstance(x, tuple | list):
        return list(x), True
    return [x], False


def _pack(values: list[Rep], was_tuple: bool) -> Any:
    return tuple(values) if was_tuple else values[0]


def _joined(a: TensorSpec, b: TensorSpec, what: str) -> TensorSpec:
    if a.dtype != b.dtype or a.rank != b.rank:
        raise type_error(f"{what}: {a} on one path and {b} on the other")
    return TensorSpec(a.dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape,
                                                                         strict=True)))


def _block(stage: Stage, name: str, specs: Sequence[TensorSpec]) -> Block:
    fn = stage.builder.block.function if stage.builder.block is not None else None
    assert fn is not None
    block = Block(unique_block_name(fn, name), [Argument(s.ir()) for s in specs])
    fn.append_block(block)
    return block


def _args(block: Block, specs: Sequence[TensorSpec], stage: Stage) -> list[Rep]:
    return [Rep(a, s, stage) for a, s in zip(block.arguments, specs, strict=True)]


def _branch(stage: Stage, to: Block, values: Sequence[Value]) -> None:
    stage.builder.branch(BranchTarget(to, list(values)))


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         *operands: Any) -> Any:
    """`true_fn(*operands)` if `pred` (a bool scalar) holds, else `false_fn(*operands)`:
    a conditional branch and a join block whose arguments are the result."""
    check_callable(true_fn, "the true branch of nnkit.cond", "a function of the operands")
    check_callable(false_fn, "the false branch of nnkit.cond", "a function of the operands")
    stage = _stage([pred, *operands])
    p = as_rep(pred, stage, "the condition of 'cond'")
    if p.spec != TensorSpec(bool_, ()):
        raise type_error(f"the condition of 'cond' must be a bool scalar, found {p.spec}")
    b = stage.builder
    then_block, else_block = _block(stage, "then", []), _block(stage, "else", [])
    b.conditional(p.value, BranchTarget(then_block, []), BranchTarget(else_block, []))
    outcomes = []
    for block, branch_fn in ((then_block, true_fn), (else_block, false_fn)):
        b.position_at_end(block)
        values, was_tuple = _flatten(branch_fn(*operands))
        reps = [as_rep(v, stage, "a result of a 'cond' branch") for v in values]
        outcomes.append((b.block, reps, was_tuple))
    (end_a, a, tuple_a), (end_b, c, _) = outcomes
    if len(a) != len(c):
        raise type_error(f"the branches of 'cond' return {len(a)} and {len(c)} values")
    specs = [_joined(x.spec, y.spec, f"result {k} of 'cond'")
             for k, (x, y) in enumerate(zip(a, c, strict=True))]
    join = _block(stage, "join", specs)
    for end, reps in ((end_a, a), (end_b, c)):
        b.position_at_end(end)
        _branch(stage, join, [r.value for r in reps])
    b.position_at_end(join)
    return _pack(_args(join, specs, stage), tuple_a)


def while_loop(cond_fn: Callable[[Any], Any], body_fn: Callable[[Any], Any], init: Any) -> Any:
    """`state = init; while cond_fn(state): state = body_fn(state)`, as a loop in the IR:
    a header block with the state as arguments, a body, and an exit."""
    check_callable(cond_fn, "the condition of nnkit.while_loop", "a function of the state")
    check_callable(body_fn, "the body of nnkit.while_loop", "a function of the state")
    init_values, was_tuple = _flatten(init)
    stage = _stage(init_values)
    b = stage.builder
    first = [as_rep(v, stage, "the initial state of 'while_loop'") for v in init_values]
    specs = [r.spec for r in first]
    # stage the body once with the initial types; where it changes a size, the header's
    # argument gets `_` and the loop is staged again
    for _attempt in range(2):
        entry_end = b.block
        mark = len(entry_end.function.blocks) if entry_end is not None and \
            entry_end.function is not None else 0
        head = _block(stage, "loop", specs)
        body = _block(stage, "body", [])
        done = _block(stage, "done", [])
        b.position_at_end(head)
        state = _pack(_args(head, specs, stage), was_tuple)
        test = as_rep(cond_fn(state), stage, "the condition of 'while_loop'")
        if test.spec != TensorSpec(bool_, ()):
            raise type_error("the condition of 'while_loop' must be a bool scalar, found "
                             f"{test.spec}")
        b.conditional(test.value, BranchTarget(body, []), BranchTarget(done, []))
        b.position_at_end(body)
        out_values, _ = _flatten(body_fn(state))
        out = [as_rep(v, stage, "the state 'while_loop' carries") for v in out_values]
        if len(out) != len(specs):
            raise type_error(f"the body of 'while_loop' returns {len(out)} values, the "
                             f"state has {len(specs)}")
        joined = [_joined(s, r.spec, f"state {k} of 'while_loop'")
                  for k, (s, r) in enumerate(zip(specs, out, strict=True))]
        if joined == specs:
            _branch(stage, head, [r.value for r in out])
            b.position_at_end(entry_end)
            _branch(stage, head, [r.value for r in first])
            b.position_at_end(done)
            return _pack(_args(head, specs, stage), was_tuple)
        # sizes change in the loop: drop this attempt's blocks and stage again with `_`
        fn = entry_end.function
        for block in list(fn.blocks[mark:]):
            fn.remove_block(block)
        b.position_at_end(entry_end)
        specs = joined
    raise type_error("the state of 'while_loop' does not settle on one type")


def fori_loop(lower: Any, upper: Any, body_fn: Callable[[Any, Any], Any], init: Any) -> Any:
    """`state = init; for i in range(lower, upper): state = body_fn(i, state)` as a loop in
    the IR (`i` is an i64 scalar)."""
    check_callable(body_fn, "the body of nnkit.fori_loop", "a function of the index and "
                   "the state")
    init_values, was_tuple = _flatten(init)
    stage = _stage([lower, upper, *init_values])
    lo = _index(lower, stage, "the lower bound of 'fori_loop'")
    hi = _index(upper, stage, "the upper bound of 'fori_loop'")
    carried = (lo, *init_values)

    def test(state: tuple[Any, ...]) -> Any:
        return state[0] < hi

    def step(state: tuple[Any, ...]) -> Any:
        i, rest = state[0], state[1:]
        out = body_fn(i, _pack(list(rest), was_tuple))
        values, _ = _flatten(out)
        return (i + 1, *values)

    result = while_loop(test, step, carried)
    return _pack(list(result[1:]), was_tuple)


def _index(x: Any, stage: Stage, what: str) -> Rep:
    rep = as_rep(x, stage, what)
    if rep.spec != TensorSpec(i64, ()):
        raise type_error(f"{what} must be an i64 scalar (a Python int), found {rep.spec}")
    return rep


__all__ = ["cond", "fori_loop", "while_loop"]
