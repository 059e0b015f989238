"""ONNX's rules for the indices, axes and target shapes a node takes from its attributes and
constant inputs, checked before the node is converted, evaluated on constants or used in shape
arithmetic — so that no path wraps, clamps or ignores what ONNX Runtime refuses.

Negative indices and axes count from the end as ONNX defines them (−1 is the last); anything
out of range is refused, naming the node. Where ONNX itself clamps (Slice's starts and ends,
Shape's start and end) nothing is refused. A check only judges what is known at import: a
dimension that is dynamic (`_`) or an input computed at run time is left to the converters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import onnx

from .errors import Invalid
from .shapes import size_problem

Shape = tuple[int | None, ...]


@dataclass
class NodeView:
    """What the checks see of a node: its inputs' shapes where known (None: unknown or
    absent), its constant inputs, its attributes and the model's opset."""

    node: onnx.NodeProto
    shapes: list[Shape | None]
    constants: list[np.ndarray | None]
    opset: int

    def __post_init__(self) -> None:
        self.attrs = {a.name: onnx.helper.get_attribute_value(a) for a in self.node.attribute}

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def shape(self, i: int) -> Shape | None:
        return self.shapes[i] if i < len(self.shapes) else None

    def rank(self, i: int) -> int | None:
        shape = self.shape(i)
        return None if shape is None else len(shape)

    def ints(self, i: int) -> list[int] | None:
        """A constant integer input, flattened (None: absent or not known at import)."""
        x = self.constants[i] if i < len(self.constants) else None
        if x is None or x.dtype.kind not in "iu":
            return None
        return [int(v) for v in x.reshape(-1)]

    def outputs(self) -> int:
        return len(self.node.output)


# ------------------------------------------------------------------ the rules


def axis(a: int, rank: int, what: str = "axis", extra: int = 0) -> int:
    """`a` in [−rank, rank − 1 + extra] as a position from the start (−1 is the last axis;
    Flatten's `extra` 1 admits the rank itself)."""
    low, high = -rank, rank - 1 + extra
    if not low <= a <= high:
        if high < 0:
            raise Invalid(f"{what} {a} for a scalar, which has no axes")
        raise Invalid(f"{what} {a} is out of range for rank {rank} (ONNX allows {low} to "
                      f"{high})")
    return a + rank if a < 0 else a


def axes(values: list[int], rank: int, what: str = "axes", unique: bool = True) -> list[int]:
    """Each of `values` as `axis`; with `unique`, one referred to twice is refused."""
    out = [axis(a, rank) for a in values]
    if unique and len(set(out)) < len(out):
        twice = next(a for a in out if out.count(a) > 1)
        raise Invalid(f"{what} {values} refer to axis {twice} more than once")
    return out


def index(i: int, size: int, where: str) -> int:
    """An index into `size` elements, −size to size − 1, from the start."""
    if not -size <= i < size:
        valid = f"ONNX allows {-size} to {size - 1}" if size else "it is empty"
        raise Invalid(f"index {i} is out of range for {where} of size {size} ({valid})")
    return i + size if i < 0 else i


def indices(values: np.ndarray, size: int | None, where: str) -> None:
    if size is None or values.size == 0:
        return
    low, high = int(values.min()), int(values.max())
    for i in (low, high):
        index(i, size, where)


def element_count(shape: list[int], what: str) -> None:
    """A shape of sizes ≥ 0 and at most DLVM's largest number of elements."""
    problem = size_problem(shape)
    if problem is not None:
        raise Invalid(f"{what} {shape} has {problem}")


def positive(values: list[int] | None, what: str, length: int | None = None) -> None:
    if values is None:
        return
    if length is not None and len(values) != length:
        raise Invalid(f"{what} {values} has {len(values)} values, not {length}")
    if any(v <= 0 for v in values):
        raise Invalid(f"{what} {values} must be positive")


# ------------------------------------------------------------------ per operator

Check = Callable[[NodeView], None]
CHECKS: dict[str, Check] = {}


def checks(*op_types: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        for t in op_types:
            CHECKS[t] = fn
        return fn
    return register


# op: (its axis attribute's default — None when it is required, extra positions past the
# last axis: Flatten's axis may be the rank)
AXIS_ATTRIBUTES: dict[str, tuple[int | None, int]] = {
    "Gather": (0, 0), "GatherElements": (0, 0), "ScatterElements": (0, 0),
    "Concat": (None, 0), "Split": (0, 0), "Softmax": (-1, 0), "LogSoftmax": (-1, 0),
    "Hardmax": (-1, 0), "LayerNormalization": (-1, 0), "LpNormalization": (-1, 0),
    "ArgMax": (0, 0), "ArgMin": (0, 0), "Flatten": (1, 1),
}


def attribute_axis(v: NodeView) -> int | None:
    """The node's `axis` attribute checked against its first input's rank (None: unknown)."""
    default, extra = AXIS_ATTRIBUTES[v.node.op_type]
    a = v.attr("axis", default)
    if a is None:
        raise Invalid("the attribute axis is required")
    rank = v.rank(0)
    return None if rank is None else axis(a, rank, extra=extra)


@checks("Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "LpNormalization",
        "ArgMax", "ArgMin", "Flatten")
def _axis_only(v: NodeView) -> None:
    attribute_axis(v)


@checks("Gather")
def _gather(v: NodeView) -> None:
    a = attribute_axis(v)
    shape = v.shape(0)
    x = v.constants[1] if len(v.constants) > 1 else None
    if a is not None and shape is not None and x is not None:
        indices(x, shape[a], f"axis {a}")


@checks("GatherElements", "ScatterElements")
def _gather_elements(v: NodeView) -> None:
    a = attribute_axis(v)
    shape, idx = v.shape(0), v.shape(1)
    if shape is not None and idx is not None and len(idx) != len(shape):
        raise Invalid(f"indices of rank {len(idx)} for data of rank {len(shape)} (they must "
                      "be equal)")
    x = v.constants[1] if len(v.constants) > 1 else None
    if a is not None and shape is not None and x is not None:
        indices(x, shape[a], f"axis {a}")


@checks("GatherND", "ScatterND")
def _gather_nd(v: NodeView) -> None:
    shape = v.shape(0)
    x = v.constants[1] if len(v.constants) > 1 else None
    if x is not None and x.ndim == 0:
        raise Invalid("indices of rank 0 (they need at least one dimension)")
    if shape is None or x is None:
        return
    batch = int(v.attr("batch_dims", 0))
    depth = x.shape[-1]
    if not 0 <= batch < len(shape) or depth > len(shape) - batch:
        raise Invalid(f"indices tuples of {depth} for data of rank {len(shape)} with "
                      f"batch_dims {batch}")
    tuples = x.reshape(-1, depth)
    for k in range(depth):
        indices(tuples[:, k], shape[batch + k], f"axis {batch + k}")


@checks("Concat")
def _concat(v: NodeView) -> None:
    a = attribute_axis(v)
    present = [s for i, s in enumerate(v.shapes) if v.node.input[i] and s is not None]
    if a is None or not present:
        return
    first = present[0]
    for s in present[1:]:
        if len(s) != len(first):
            raise Invalid(f"inputs of ranks {len(first)} and {len(s)} (they must be equal)")
        for k, (p, q) in enumerate(zip(first, s, strict=True)):
            if k != a and p is not None and q is not None and p != q:
                raise Invalid(f"inputs of sizes {p} and {q} along axis {k} (only axis {a} "
                              "may differ)")


REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def reduction_axes(v: NodeView) -> list[int] | None:
    """A reduction's axes as given: an input from opset 13 (ReduceSum) or 18 (the others),
    else an attribute."""
    from_input = v.opset >= (13 if v.node.op_type == "ReduceSum" else 18)
    if from_input:
        return v.ints(1)
    given = v.attr("axes")
    return None if given is None else list(given)


@checks(*REDUCTIONS)
def _reduce(v: NodeView) -> None:
    given, rank = reduction_axes(v), v.rank(0)
    if given is not None and rank is not None:
        axes(given, rank, unique=False)  # ONNX Runtime folds an axis named twice into one


@checks("Slice")
def _slice(v: NodeView) -> None:
    starts, ends, rank = v.ints(1), v.ints(2), v.rank(0)
    given_axes = v.ints(3) if v.node.input[3:4] and v.node.input[3] else None
    steps = v.ints(4) if v.node.input[4:5] and v.node.input[4] else None
    lengths = {len(x) for x in (starts, ends, given_axes, steps) if x is not None}
    if len(lengths) > 1:
        raise Invalid("starts, ends, axes and steps of different lengths")
    if steps is not None and 0 in steps:
        raise Invalid(f"steps {steps}: a step cannot be 0")
    if given_axes is not None and rank is not None:
        axes(given_axes, rank)
    elif starts is not None and rank is not None and len(starts) > rank:
        raise Invalid(f"{len(starts)} starts for rank {rank}")


@checks("Split")
def _split(v: NodeView) -> None:
    shape = v.shape(0)
    a = attribute_axis(v)
    given = v.node.input[1:2] and v.node.input[1]
    sizes = v.ints(1) if given else v.attr("split")
    parts = v.attr("num_outputs")
    if given and parts is not None:
        raise Invalid("both the split sizes and num_outputs are given")
    if sizes is not None:
        sizes = list(sizes)
        if len(sizes) != v.outputs():
            raise Invalid(f"{len(sizes)} split sizes {sizes} for {v.outputs()} outputs")
        if any(s < 0 for s in sizes):
            raise Invalid(f"split sizes {sizes} must not be negative")
        size = None if a is None or shape is None else shape[a]
        if size is not None and sum(sizes) != size:
            raise Invalid(f"split sizes {sizes} add up to {sum(sizes)}, not to the size "
                          f"{size} of axis {a}")
    if parts is not None:
        if parts != v.outputs():
            raise Invalid(f"num_outputs {parts} for {v.outputs()} outputs")
        size = None if a is None or shape is None else shape[a]
        if size is not None:
            equal_parts(size, parts)


def equal_parts(size: int, parts: int) -> list[int]:
    """ONNX's split of `size` into `parts`: ⌈size/parts⌉ each, the last one smaller."""
    if parts < 1:
        raise Invalid(f"{parts} outputs: at least one is needed")
    each = -(-size // parts)
    last = size - each * (parts - 1)
    if last < 0:
        raise Invalid(f"{size} cannot be split into {parts} parts of {each} (the last would "
                      "have a negative size)")
    return [each] * (parts - 1) + [last]


def squeeze_axes(v: NodeView) -> list[int] | None:
    if v.opset >= 13:
        return v.ints(1) if v.node.input[1:2] and v.node.input[1] else None
    given = v.attr("axes")
    return None if given is None else list(given)


@checks("Squeeze")
def _squeeze(v: NodeView) -> None:
    given, shape = squeeze_axes(v), v.shape(0)
    if given is None or shape is None:
        return
    for a in axes(given, len(shape), unique=False):  # ONNX Runtime takes an axis twice
        if shape[a] is not None and shape[a] != 1:
            raise Invalid(f"axis {a} has size {shape[a]}, not 1: it cannot be squeezed")


@checks("Unsqueeze")
def _unsqueeze(v: NodeView) -> None:
    given, rank = squeeze_axes(v), v.rank(0)
    if given is not None and rank is not None:
        axes(given, rank + len(given))


@checks("Transpose")
def _transpose(v: NodeView) -> None:
    perm, rank = v.attr("perm"), v.rank(0)
    if perm is None or rank is None:
        return
    if sorted(perm) != list(range(rank)):
        raise Invalid(f"perm {list(perm)} is not a permutation of the {rank} axes "
                      f"0 to {rank - 1}")


@checks("Expand")
def _expand(v: NodeView) -> None:
    target, shape = v.ints(1), v.shape(0)
    if target is None:
        return
    element_count(target, "the shape")
    if shape is None:
        return
    for k in range(1, min(len(target), len(shape)) + 1):
        p, q = shape[-k], target[-k]
        if p is not None and p != q and 1 not in (p, q):
            raise Invalid(f"the shape {target} does not broadcast with the input's "
                          f"{list(shape)} (sizes {p} and {q})")


@checks("Reshape")
def _reshape(v: NodeView) -> None:
    target = v.ints(1)
    if target is not None:
        reshape_rules(target, v.shape(0), bool(v.attr("allowzero", 0)))


def reshape_rules(target: list[Any], shape: Shape | None, allow_zero: bool) -> None:
    """Reshape's target: one −1 at most, no size below it, 0 copying one of the input's
    dimensions (or, with allowzero, a size 0 and no −1), and as many elements as the input
    where every size is known. Entries that are not integers are computed at run time."""
    sizes = [d for d in target if isinstance(d, int | np.integer)]
    if sizes.count(-1) > 1:
        raise Invalid(f"the shape {target} has more than one -1")
    if any(d < -1 for d in sizes):
        raise Invalid(f"the shape {target} has a size below -1")
    if allow_zero and 0 in sizes and -1 in sizes:
        raise Invalid(f"the shape {target} has both 0 and -1 with allowzero=1")
    if shape is None:
        return
    if not allow_zero and any(isinstance(d, int | np.integer) and d == 0 and k >= len(shape)
                              for k, d in enumerate(target)):
        raise Invalid(f"the shape {target} copies (0) a dimension past the input's rank "
                      f"{len(shape)}")
    copied = [shape[k] if d == 0 and not allow_zero else d for k, d in enumerate(target)]
    if None in shape or len(sizes) < len(target) or None in copied:
        return
    dims = [int(d) for d in copied if d is not None]
    total = math.prod(d for d in shape if d is not None)
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims and (known == 0 or total % known):
        raise Invalid(f"the shape {target} does not fit {total} elements")
    if -1 not in dims and known != total:
        raise Invalid(f"the shape {target} holds {known} elements, the input {total}")
    element_count([d for d in dims if d != -1], "the shape")


@checks("ConstantOfShape")
def _constant_of_shape(v: NodeView) -> None:
    target = v.ints(0)
    if target is not None:
        element_count(target, "the shape")


@checks("Tile")
def _tile(v: NodeView) -> None:
    repeats, shape = v.ints(1), v.shape(0)
    if repeats is None:
        return
    if any(r < 0 for r in repeats):
        raise Invalid(f"repeats {repeats} must not be negative")
    if shape is not None:
        if len(repeats) != len(shape):
            raise Invalid(f"{len(repeats)} repeats for rank {len(shape)}")
        if None not in shape:
            element_count([d * r for d, r in zip(shape, repeats, strict=True)],  # type: ignore[operator]
                          "the result")


@checks("Pad")
def _pad(v: NodeView) -> None:
    pads, shape = v.ints(1), v.shape(0)
    if pads is None or shape is None:
        return
    given = v.ints(3) if v.node.input[3:4] and v.node.input[3] else None
    where = axes(given, len(shape)) if given is not None else list(range(len(shape)))
    if len(pads) != 2 * len(where):
        raise Invalid(f"{len(pads)} pads for {len(where)} axes (two each)")
    for k, a in enumerate(where):
        if shape[a] is not None and shape[a] + pads[k] + pads[k + len(where)] < 0:  # type: ignore[operator]
            raise Invalid(f"pads {pads} remove more than the {shape[a]} elements of axis {a}")


@checks("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool")
def _window(v: NodeView) -> None:
    """Windows: positive kernel sizes, strides and dilations, pads ≥ 0, one value per
    spatial dimension (two for pads), and a group that divides the channels."""
    rank = v.rank(0)
    n = None if rank is None else rank - 2
    if n is not None and n < 1:
        raise Invalid(f"an input of rank {rank} (N x C x at least one spatial dimension)")
    positive(v.attr("kernel_shape"), "kernel_shape", n)
    positive(v.attr("strides"), "strides", n)
    positive(v.attr("dilations"), "dilations", n)
    pads = v.attr("pads")
    if pads is not None:
        if n is not None and len(pads) != 2 * n:
            raise Invalid(f"pads {list(pads)} has {len(pads)} values, not {2 * n}")
        if any(p < 0 for p in pads):
            raise Invalid(f"pads {list(pads)} must not be negative")
    if v.node.op_type == "Conv":
        conv_groups(v)


def conv_groups(v: NodeView) -> None:
    group = int(v.attr("group", 1))
    if group < 1:
        raise Invalid(f"group {group} must be positive")
    x, w = v.shape(0), v.shape(1)
    if x is None or w is None or len(w) != len(x):
        if x is not None and w is not None:
            raise Invalid(f"a kernel of rank {len(w)} for an input of rank {len(x)}")
        return
    channels, per_group, out = x[1], w[1], w[0]
    if channels is not None and per_group is not None and channels != per_group * group:
        raise Invalid(f"{channels} input channels, but the kernel takes {per_group} per group "
                      f"× {group} groups")
    if out is not None and out % group:
        raise Invalid(f"{out} output channels are not divisible by group {group}")


# The sizes of what the operators that make large tensors from small constants would make,
# from those constants (their inputs in order, None where left out): what evaluating them
# at import would allocate.
Constants = list[np.ndarray | None]


def _ints(x: np.ndarray | None) -> list[int]:
    assert x is not None
    return [int(v) for v in x.reshape(-1)]


def _constant_of_shape_size(x: Constants) -> int:
    return math.prod(_ints(x[0]))


def _expand_size(x: Constants) -> int:
    assert x[0] is not None
    return math.prod(np.broadcast_shapes(x[0].shape, tuple(_ints(x[1]))))


def _tile_size(x: Constants) -> int:
    assert x[0] is not None
    return x[0].size * math.prod(_ints(x[1]))


def _pad_size(x: Constants) -> int:
    data, pads = x[0], _ints(x[1])
    assert data is not None
    where = _ints(x[3]) if len(x) > 3 and x[3] is not None else list(range(data.ndim))
    shape = list(data.shape)
    for k, a in enumerate(where):
        shape[a] += pads[k] + pads[k + len(where)]
    return math.prod(max(d, 0) for d in shape)


def _range_size(x: Constants) -> int:
    start, limit, delta = (float(_ints(v)[0]) if v is not None and v.dtype.kind in "iu"
                           else float(np.asarray(v).reshape(-1)[0]) for v in x[:3])
    return max(math.ceil((limit - start) / delta), 0) if delta else 0


def _one_hot_size(x: Constants) -> int:
    assert x[0] is not None and x[1] is not None
    return x[0].size * max(int(x[1].reshape(-1)[0]), 0)


MADE_FROM_CONSTANTS: dict[str, Callable[[Constants], int]] = {
    "ConstantOfShape": _constant_of_shape_size, "Expand": _expand_size, "Tile": _tile_size,
    "Pad": _pad_size, "Range": _range_size, "OneHot": _one_hot_size,
}


def folded_elements(node: onnx.NodeProto, inputs: Constants) -> int | None:
    """How many elements evaluating the node on these constants makes, for the operators
    that may make far more than they are given (None: any other)."""
    size = MADE_FROM_CONSTANTS.get(node.op_type)
    if size is None:
        return None
    try:
        return size(inputs)
    except (AssertionError, ValueError, IndexError, OverflowError, TypeError):
        return None  # malformed: evaluating it says what is wrong


def check(node: onnx.NodeProto, shapes: list[Shape | None],
          constants: list[np.ndarray | None], opset: int) -> None:
    """Raise `Invalid` if the node breaks ONNX's rules for what it takes (see the module)."""
    rule = CHECKS.get(node.op_type)
    if rule is not None and node.domain in ("", "ai.onnx"):
        rule(NodeView(node, shapes, constants, opset))
