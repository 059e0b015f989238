"""Normalizations and attention."""

from __future__ import annotations

import math

import numpy as np

from dlvm.ir import Value, constant
from dlvm.ir.types import BOOL, F16, F32, F64, I64, DataType, TensorType, scalar

from .context import NodeContext, positions
from .errors import Invalid, Unsupported
from .ops import binary, channel_vector, converts, count, keep_axes, slice_axis

# ONNX's codes for the precisions of stash_type and softmax_precision that DLVM has
PRECISIONS: dict[int, DataType] = {1: F32, 10: F16, 11: F64}


# ------------------------------------------------------------------ helpers


def precision(c: NodeContext, name: str, code: int) -> DataType:
    if code not in PRECISIONS:
        raise Unsupported(f"{name}={code} (only float, float16 and double)")
    return PRECISIONS[code]


def as_type(c: NodeContext, x: Value, dtype: DataType) -> Value:
    return x if c.type_of(x).dtype == dtype else c.b.dataTypeCast(x, dtype)


def floats(c: NodeContext, *xs: Value) -> DataType:
    """The one floating-point element type of xs (refused otherwise)."""
    types = {c.type_of(x).dtype for x in xs}
    if len(types) != 1 or not next(iter(types)).is_float:
        names = sorted(str(t) for t in types)
        raise Unsupported(f"inputs of element types {', '.join(names)} (one float type only)")
    return types.pop()


def outputs(c: NodeContext) -> int:
    """How many of the node's outputs are used (named)."""
    return len([o for o in c.node.output if o])


def wanted(c: NodeContext, i: int) -> bool:
    return i < len(c.node.output) and bool(c.node.output[i])


def mean(c: NodeContext, x: Value, axes: list[int]) -> Value:
    """the mean over `axes`, which stay as 1-dimensions"""
    total = c.b.reduce(x, "add", c.number(0, x), axes)
    return keep_axes(c, c.b.divide(total, count(c, x, axes)), axes)


def moments(c: NodeContext, x: Value, axes: list[int]) -> tuple[Value, Value, Value]:
    """(mean, x − mean, variance) over `axes` (kept as 1-dimensions)"""
    mu = mean(c, x, axes)
    d = c.b.subtract(x, mu)
    return mu, d, mean(c, c.b.multiply(d, d), axes)


def standardize(c: NodeContext, x: Value, axes: list[int], eps: float
                ) -> tuple[Value, Value, Value]:
    """(mean, x − mean, 1/√(var + ε)) over `axes` (kept as 1-dimensions)"""
    mu, d, var = moments(c, x, axes)
    return mu, d, c.b.rsqrt(c.b.add(var, c.number(eps, x)))


def lift(c: NodeContext, x: Value, rank: int) -> Value:
    """x with leading 1-dimensions up to `rank` (numpy's broadcasting)"""
    while c.rank(x) < rank:
        x = c.b.padShape(x, 0)
    return x



def size_of(c: NodeContext, x: Value, axis: int) -> Value:
    """x's size along `axis`, an int64 scalar (known at run time)"""
    n = c.type_of(x).shape[axis]
    if n is not None:
        return constant(n, scalar(I64))
    return c.b.extract(c.b.shape(x), [axis])


def one_dynamic(shape: tuple[int | None, ...]) -> bool:
    """whether `shapeCast` can make this shape (it infers at most one size)"""
    return sum(d is None for d in shape) <= 1


def split_last(c: NodeContext, x: Value, parts: int) -> Value:
    """[… x n] as [… x parts x n/parts] (row-major)"""
    shape = c.type_of(x).shape
    *lead, last = shape
    target = (*lead, parts, last // parts)  # type: ignore[operator]
    if last is None or not one_dynamic(target):
        raise Unsupported("interleaved pairs of a tensor with several dynamic dimensions")
    return c.b.shapeCast(x, target)


# ------------------------------------------------------------------ normalizations


@converts("LayerNormalization")
def _layer_norm(c: NodeContext) -> list[Value]:
    """(x − mean) / √(var + ε) · scale + bias over the axes from `axis` on (+ mean, 1/√(var + ε))

    The statistics are computed in stash_type's precision, and are outputs 2 and 3."""
    x = c.value(0)
    t = c.type_of(x)
    floats(c, x)
    axes = list(range(c.axis(c.attr("axis", -1), t.rank), t.rank))
    stash = precision(c, "stash_type", c.attr("stash_type", 1))
    mu, d, inv = standardize(c, as_type(c, x, stash), axes, c.attr("epsilon", 1e-5))
    out = binary(c, "multiply", as_type(c, c.b.multiply(d, inv), t.dtype), c.value(1))
    if c.has(2):
        out = binary(c, "add", out, c.value(2))
    return [out, mu, inv]


@converts("RMSNormalization")
def _rms_norm(c: NodeContext) -> list[Value]:
    """x / √(mean(x²) + ε) · scale over the dimensions from `axis` on"""
    x, scale = c.value(0), c.value(1)
    t = c.type_of(x)
    floats(c, x, scale)
    axes = list(range(c.axis(c.attr("axis", -1), t.rank), t.rank))
    xs = as_type(c, x, precision(c, "stash_type", c.attr("stash_type", 1)))
    ms = mean(c, c.b.multiply(xs, xs), axes)
    rms = c.b.sqrt(c.b.add(ms, c.number(c.attr("epsilon", 1e-5), xs)))
    return [binary(c, "multiply", as_type(c, c.b.divide(xs, rms), t.dtype), scale)]


@converts("BatchNormalization")
def _batch_norm(c: NodeContext) -> list[Value]:
    """(x − mean) / √(var + ε) · scale + bias per channel (training: the batch's mean and var)

    With training_mode=1 the statistics are the batch's own, and outputs 2 and 3 are the
    running ones updated: running·momentum + batch·(1 − momentum)."""
    x = c.value(0)
    rank = c.rank(x)
    floats(c, *(c.value(i) for i in range(5)))  # input_mean and input_var as well
    training = c.opset >= 14 and bool(c.attr("training_mode", 0))
    if not training and outputs(c) > 1:
        if c.opset < 14:
            raise Unsupported("BatchNormalization-9's training outputs")
        raise Invalid("the running-statistics outputs without training_mode=1")
    scale, bias = (channel_vector(c, c.value(i), rank) for i in (1, 2))
    eps = c.number(c.attr("epsilon", 1e-5), x)
    b = c.b
    if not training:
        mu, var = (channel_vector(c, c.value(i), rank) for i in (3, 4))
        inv = b.rsqrt(b.add(var, eps))
        return [b.add(b.multiply(b.multiply(b.subtract(x, mu), inv), scale), bias)]
    # statistics of float16 inputs are computed in float (the spec's words)
    dtype = c.type_of(x).dtype
    xs = as_type(c, x, F32 if dtype == F16 else dtype)
    axes = [0, *range(2, rank)]
    mu, d, var = moments(c, xs, axes)
    inv = b.rsqrt(b.add(as_type(c, var, dtype), eps))
    y = b.add(b.multiply(b.multiply(as_type(c, d, dtype), inv), scale), bias)
    momentum = c.attr("momentum", 0.9)
    running = []
    for i, stat in ((3, mu), (4, var)):
        batch = as_type(c, per_channel(c, stat, rank), dtype)
        running.append(b.add(b.multiply(c.value(i), c.number(momentum, x)),
                             b.multiply(batch, c.number(1 - momentum, x))))
    return [y, *running]


def per_channel(c: NodeContext, stat: Value, rank: int) -> Value:
    """[1 x C x 1 …] statistics as [C]"""
    for axis in [*range(rank - 1, 1, -1), 0]:
        stat = c.b.squeezeShape(stat, axis)
    return stat


@converts("InstanceNormalization")
def _instance_norm(c: NodeContext) -> list[Value]:
    """(x − mean) / √(var + ε) · scale + bias, statistics per instance and channel"""
    x = c.value(0)
    rank = c.rank(x)
    floats(c, x, c.value(1), c.value(2))
    if rank < 3:
        raise Invalid(f"an input of rank {rank} (N x C x D1 … needs at least 3)")
    _, d, inv = standardize(c, x, list(range(2, rank)), c.attr("epsilon", 1e-5))
    scale, bias = (channel_vector(c, c.value(i), rank) for i in (1, 2))
    return [c.b.add(c.b.multiply(c.b.multiply(d, inv), scale), bias)]


@converts("GroupNormalization")
def _group_norm(c: NodeContext) -> list[Value]:
    """(x − mean) / √(var + ε) · scale + bias, statistics per instance and group of channels

    Scale and bias are per channel (opset 21; ONNX's checker refuses opset 18's, of scale
    and bias per group, as deprecated)."""
    x = c.value(0)
    t = c.type_of(x)
    floats(c, x, c.value(1), c.value(2))
    groups = c.attr("num_groups")
    channels = t.shape[1] if t.rank >= 2 else None
    if groups is None or groups < 1:
        raise Invalid("GroupNormalization needs num_groups ≥ 1")
    if channels is None:
        raise Unsupported("a dynamic number of channels")
    if channels % groups:
        raise Invalid(f"{groups} groups do not divide {channels} channels")
    if c.opset < 21:
        raise Unsupported("GroupNormalization-18 (scale and bias per group)")
    grouped = (t.shape[0], groups, channels // groups, *t.shape[2:])
    if not one_dynamic(grouped):
        raise Unsupported("GroupNormalization of an input with several dynamic dimensions")
    stash = precision(c, "stash_type", c.attr("stash_type", 1))
    xg = c.b.shapeCast(as_type(c, x, stash), grouped)
    _, d, inv = standardize(c, xg, list(range(2, len(grouped))), c.attr("epsilon", 1e-5))
    normalized = c.b.shapeCast(as_type(c, c.b.multiply(d, inv), t.dtype), t.shape)
    scale, bias = (channel_vector(c, c.value(i), t.rank) for i in (1, 2))
    return [c.b.add(c.b.multiply(normalized, scale), bias)]


@converts("MeanVarianceNormalization")
def _mvn(c: NodeContext) -> list[Value]:
    """(x − E[x]) / (√(E[x²] − E[x]²) + 10⁻⁹) over `axes` (default 0, 2, 3)"""
    x = c.value(0)
    rank = c.rank(x)
    floats(c, x)
    axes = sorted({c.axis(a, rank) for a in c.attr("axes", [0, 2, 3])})
    b = c.b
    mu = mean(c, x, axes)
    var = b.subtract(mean(c, b.multiply(x, x), axes), b.multiply(mu, mu))
    eps = c.number(float(np.float32(1e-9)), x)  # ONNX's function: a float constant
    return [b.divide(b.subtract(x, mu), b.add(b.sqrt(var), eps))]


@converts("LRN")
def _lrn(c: NodeContext) -> list[Value]:
    """x / (bias + α/size · Σ x²)^β, the sum over the `size` channels around each channel

    The window holds ⌊(size − 1)/2⌋ channels before and ⌈(size − 1)/2⌉ after."""
    x = c.value(0)
    rank = c.rank(x)
    floats(c, x)
    size = c.attr("size")
    if size is None or size < 1:
        raise Invalid("LRN needs size ≥ 1")
    if rank < 3:
        raise Invalid(f"an input of rank {rank} (N x C x D1 … needs at least 3)")
    b = c.b
    window = [1, size, *[1] * (rank - 2)]
    # "half" pads size − 1 in all: ⌊(size − 1)/2⌋ before, the rest after, as ONNX's region
    total = b.reduceWindow(b.multiply(x, x), "add", c.number(0, x), window, [1] * rank, "half")
    alpha, beta = c.attr("alpha", 1e-4), c.attr("beta", 0.75)
    base = b.add(b.multiply(total, c.number(alpha / size, x)), c.number(c.attr("bias", 1.0), x))
    return [b.divide(x, b.power(base, c.number(beta, x)))]


# ------------------------------------------------------------------ attention


def split_heads(c: NodeContext, x: Value, heads: int) -> Value:
    """[B x S x H·D] as [B x H x S x D]"""
    b, s, hidden = c.type_of(x).shape
    if hidden is None:
        raise Unsupported("a dynamic hidden size")
    if hidden % heads:
        raise Invalid(f"{heads} heads do not divide the hidden size {hidden}")
    d = hidden // heads
    if one_dynamic((b, s, heads, d)):
        return c.b.transpose(c.b.shapeCast(x, (b, s, heads, d)), [0, 2, 1, 3])
    parts = [c.b.padShape(slice_axis(c, x, 2, h * d, (h + 1) * d), 1) for h in range(heads)]
    return c.b.concatenate(parts, 1) if heads > 1 else parts[0]


def merge_heads(c: NodeContext, y: Value) -> Value:
    """[B x H x S x D] as [B x S x H·D]"""
    b, h, s, d = c.type_of(y).shape
    if h is None or d is None:
        raise Unsupported("a dynamic number or size of heads")
    if one_dynamic((b, s, h * d)):
        return c.b.shapeCast(c.b.transpose(y, [0, 2, 1, 3]), (b, s, h * d))
    parts = [c.b.squeezeShape(slice_axis(c, y, 1, k, k + 1), 1) for k in range(h)]
    return c.b.concatenate(parts, 2) if h > 1 else parts[0]


def repeat_heads(c: NodeContext, x: Value, times: int) -> Value:
    """[B x H x T x D] with each head repeated `times` times in a row (numpy's repeat)"""
    if times == 1:
        return x
    b, h, t, d = c.type_of(x).shape
    assert h is not None
    target = (b, h * times, t, d)
    if one_dynamic(target):
        wide = c.b.padShape(x, 2)  # [B x H x 1 x T x D]
        return c.b.shapeCast(c.b.concatenate([wide] * times, 2), target)
    heads = [slice_axis(c, x, 1, k, k + 1) for k in range(h)]
    return c.b.concatenate([p for p in heads for _ in range(times)], 1)


def mask_bias(c: NodeContext, mask: Value, keys: Value, dtype: DataType) -> Value:
    """attn_mask as an additive bias of `dtype` (a boolean mask: 0 where true, −∞ where
    false), its last dimension padded with −∞ to the total number of keys"""
    t = c.type_of(mask)
    neg = constant(-math.inf, scalar(dtype))
    if t.dtype == BOOL:
        bias = c.b.select(constant(0.0, scalar(dtype)), neg, mask)
    elif t.dtype.is_float:
        bias = as_type(c, mask, dtype)
    else:
        raise Unsupported(f"an attn_mask of {t.dtype} (bool or float only)")
    if not 1 <= t.rank <= 4:
        raise Invalid(f"an attn_mask of rank {t.rank}")
    last, total = t.shape[-1], c.type_of(keys).shape[2]
    if last is not None and total is not None:
        if last > total:
            raise Invalid(f"an attn_mask of {last} keys for {total} keys")
        if last == total:
            return bias
        one = slice_axis(c, bias, t.rank - 1, 0, 1)  # −∞ of the mask's shape, one key wide
        pad = c.b.select(neg, neg, c.b.equal(one, one))
        pad = c.b.add(pad, c.b.literal(0.0, TensorType((1,) * (t.rank - 1) + (total - last,),
                                                       dtype)))
        return c.b.concatenate([bias, pad], t.rank - 1)
    # sizes known at run time: keys past the mask's last are −∞ (a mask one key wide, or as
    # wide as the keys; another width stops at run time, as broadcasting)
    inside = c.b.lessThan(positions(c, keys, 2), size_of(c, mask, t.rank - 1))
    return c.b.select(bias, neg, lift(c, inside, t.rank))


def allowed_keys(c: NodeContext, q: Value, keys: Value, past: Value | None,
                 nonpad: Value | None) -> Value | None:
    """[… x S x T] where query i may attend key j: the causal frontier j ≤ i + offset, the
    sliding window (opset 25) and the keys before nonpad_kv_seqlen (None: every key)"""
    causal = bool(c.attr("is_causal", 0))
    left = c.attr("left_window_size", -1) if c.opset >= 25 else -1
    right = c.attr("right_window_size", -1) if c.opset >= 25 else -1
    if left < -1 or right < -1:
        raise Invalid("window sizes are −1 or ≥ 0")
    b = c.b
    i = b.padShape(positions(c, q, 2), 1)  # [S x 1]
    j = b.padShape(positions(c, keys, 2), 0)  # [1 x T]
    if nonpad is not None:
        kept = binary(c, "lessThan", j, per_batch(c, nonpad_batch(c, nonpad)))
    rule: Value | None = kept if nonpad is not None else None
    if not causal and left < 0 and right < 0:
        return rule
    # the absolute position of query i: i + offset, where offset counts the keys before it
    if past is not None:
        at = b.add(i, size_of(c, past, 2))
    elif nonpad is not None:
        start = b.subtract(nonpad_batch(c, nonpad), size_of(c, q, 2))
        at = binary(c, "add", i, per_batch(c, start))
    else:
        at = i
    rules = []
    if causal:
        rules.append(binary(c, "lessThanOrEqual", j, at))
    if left >= 0:  # at − j ≤ left
        rules.append(binary(c, "lessThanOrEqual", binary(c, "subtract", at, j),
                            constant(left, scalar(I64))))
    if right >= 0:  # j − at ≤ right
        rules.append(binary(c, "lessThanOrEqual", binary(c, "subtract", j, at),
                            constant(right, scalar(I64))))
    for r in rules:
        rule = r if rule is None else binary(c, "and", rule, r)
    return rule


def per_batch(c: NodeContext, x: Value) -> Value:
    """[B] as [B x 1 x 1 x 1]"""
    for _ in range(3):
        x = c.b.padShape(x, 1)
    return x


def nonpad_batch(c: NodeContext, nonpad: Value) -> Value:
    t = c.type_of(nonpad)
    if t.rank != 1:
        raise Invalid(f"nonpad_kv_seqlen of rank {t.rank} (a vector [batch])")
    return as_type(c, nonpad, I64)


def softmax_rows(c: NodeContext, x: Value) -> Value:
    """softmax along the last axis; a row of −∞ alone gives zeros (not NaN)"""
    b = c.b
    axis = c.rank(x) - 1
    neg, zero, one = c.number(-math.inf, x), c.number(0, x), c.number(1, x)
    top = b.padShape(b.reduce(x, "max", neg, [axis]), axis)
    top = b.select(zero, top, b.equal(top, neg))
    e = b.exp(b.subtract(x, top))
    total = b.padShape(b.reduce(e, "add", zero, [axis]), axis)
    return b.divide(e, b.select(one, total, b.equal(total, zero)))


def attention_heads(c: NodeContext) -> tuple[Value, Value, Value, int, int]:
    """Q, K, V as [B x H x S x D] and the numbers of query and key-value heads"""
    q, k, v = c.value(0), c.value(1), c.value(2)
    rank = c.rank(q)
    if rank not in (3, 4) or c.rank(k) != rank or c.rank(v) != rank:
        raise Invalid("Q, K and V must all be 3-D or all 4-D")
    given = c.attr("q_num_heads"), c.attr("kv_num_heads")
    if rank == 3:
        if None in given:
            raise Invalid("3-D inputs need q_num_heads and kv_num_heads")
        hq, hkv = given
        return split_heads(c, q, hq), split_heads(c, k, hkv), split_heads(c, v, hkv), hq, hkv
    if c.opset >= 25 and given != (None, None):
        raise Invalid("q_num_heads and kv_num_heads are for 3-D inputs only")
    hq, hkv, hv = (c.type_of(x).shape[1] for x in (q, k, v))
    if hq is None or hkv is None or hv is None:
        raise Unsupported("a dynamic number of heads")
    if hv != hkv or given[0] not in (None, hq) or given[1] not in (None, hkv):
        raise Invalid(f"{hq} query, {hkv} key and {hv} value heads "
                      f"(q_num_heads={given[0]}, kv_num_heads={given[1]})")
    return q, k, v, hq, hkv


@converts("Attention")
def _attention(c: NodeContext) -> list[Value]:
    """softmax(softcap(√s·Q · (√s·K)ᵀ) + mask) · V per head, K and V shared by query groups

    s is 1/√(head size) by default; K and V follow the past keys and values; the mask adds
    attn_mask (−∞ where a boolean one is false), the causal frontier, the sliding window and
    nonpad_kv_seqlen's padding; a query with no key left gets zeros."""
    q, k, v, hq, hkv = attention_heads(c)
    dtype = floats(c, q, k, v)
    b = c.b
    past = [c.value(i) if c.has(i) else None for i in (4, 5)]
    if (past[0] is None) != (past[1] is None):
        raise Invalid("past_key and past_value go together")
    nonpad = c.value(6) if c.has(6) else None
    if nonpad is not None and past[0] is not None:
        raise Invalid("nonpad_kv_seqlen with past_key and past_value")
    if past[0] is not None:
        k, v = (b.concatenate([p, x], 2) for p, x in zip(past, (k, v), strict=True))
    if hq % hkv:
        raise Invalid(f"{hkv} key-value heads do not divide {hq} query heads")
    scale = c.attr("scale")
    if scale is None:
        size = c.type_of(q).shape[3]
        if size is None:
            raise Unsupported("a dynamic head size without `scale`")
        scale = 1 / np.sqrt(size)
    root = c.number(float(np.sqrt(scale)), q)
    keys = repeat_heads(c, k, hq // hkv)
    scores = b.dot(b.multiply(q, root), b.transpose(b.multiply(keys, root), [0, 1, 3, 2]))
    raw = scores
    softcap = c.attr("softcap", 0.0)
    if softcap > 0:
        cap = c.number(softcap, scores)
        scores = b.multiply(b.tanh(b.divide(scores, cap)), cap)
    bias = mask_bias(c, c.value(3), k, dtype) if c.has(3) else None
    rule = allowed_keys(c, q, k, past[0], nonpad)
    if rule is not None:
        shut = b.select(constant(0.0, scalar(dtype)), constant(-math.inf, scalar(dtype)), rule)
        bias = shut if bias is None else binary(c, "add", bias, shut)
    biased = scores if bias is None else binary(c, "add", scores, bias)
    code = c.attr("softmax_precision")
    inner = dtype if code is None else precision(c, "softmax_precision", code)
    probs = softmax_rows(c, as_type(c, biased, inner))
    if bias is not None:  # a query whose every key is masked attends nothing
        axis = c.rank(bias) - 1
        top = b.padShape(b.reduce(bias, "max", c.number(-math.inf, bias), [axis]), axis)
        shut_rows = lift(c, b.equal(top, c.number(-math.inf, top)), 4)
        probs = b.select(c.number(0, probs), probs, shut_rows)
    probs = as_type(c, probs, dtype)
    y = b.dot(probs, repeat_heads(c, v, hq // hkv))
    if c.rank(c.value(0)) == 3:
        y = merge_heads(c, y)
    return [y, k, v, qk_output(c, raw, scores, biased, probs, softcap)]


def qk_output(c: NodeContext, raw: Value, capped: Value, biased: Value, probs: Value,
              softcap: float) -> Value:
    """The optional 4th output by qk_matmul_output_mode: the scores (0), after softcap (1),
    after softcap and mask (2), the probabilities (3)"""
    mode = c.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise Invalid(f"qk_matmul_output_mode={mode}")
    if mode == 0 and softcap > 0 and wanted(c, 3):
        # the spec says before softcap; ONNX's reference implementation gives it after
        raise Unsupported("qk_matmul_output with softcap in qk_matmul_output_mode 0")
    return (raw, capped, biased, probs)[mode]


# ------------------------------------------------------------------ rotary embedding


def gather_rows(c: NodeContext, table: Value, ids: Value) -> Value:
    """table[ids] for a table [P x K] and int64 ids [B x S]: [B x S x K], as a sum of the
    rows selected by ids = p, which is exact whatever the table holds (DLVM has no gather;
    this makes a [B x S x P x K] tensor; an id outside 0 … P − 1 picks no row: zeros)"""
    b = c.b
    rows = positions(c, table, 0)  # [P]
    hit = b.equal(b.padShape(as_type(c, ids, I64), 2), lift(c, rows, 3))  # [B x S x P]
    zero = c.number(0, table)
    picked = b.select(lift(c, table, 4), zero, b.padShape(hit, 3))  # [B x S x P x K]
    return b.reduce(picked, "add", zero, [2])


@converts("RotaryEmbedding")
def _rotary(c: NodeContext) -> list[Value]:
    """(x₁, x₂) ↦ (x₁·cos − x₂·sin, x₁·sin + x₂·cos) with x₁, x₂ the halves of each head

    Only the first rotary_embedding_dim elements of a head turn; interleaved=1 pairs its even
    and odd elements instead of halves; cos and sin are the caches' rows at position_ids."""
    x, cos, sin = c.value(0), c.value(1), c.value(2)
    floats(c, x, cos, sin)
    rank = c.rank(x)
    b = c.b
    if rank == 3:
        heads = c.attr("num_heads")
        if not heads:
            raise Invalid("a 3-D input needs num_heads")
        x4 = split_heads(c, x, heads)
    elif rank == 4:
        x4 = x
    else:
        raise Invalid(f"an input of rank {rank} (3-D or 4-D)")
    size = c.type_of(x4).shape[3]
    if size is None:
        raise Unsupported("a dynamic head size")
    dim = c.attr("rotary_embedding_dim", 0) or size
    if dim % 2 or dim > size:
        raise Invalid(f"rotary_embedding_dim {dim} for heads of {size}")
    if c.has(3):
        ids = c.value(3)
        if c.rank(ids) != 2 or c.rank(cos) != 2 or c.rank(sin) != 2:
            raise Invalid("position_ids [B x S] index caches [positions x rotary_dim/2]")
        cos, sin = (gather_rows(c, t, ids) for t in (cos, sin))
    for t in (cos, sin):
        if c.rank(t) != 3 or c.type_of(t).shape[2] not in (None, dim // 2):
            raise Invalid(f"a cache of shape {list(c.type_of(t).shape)} for "
                          f"rotary_embedding_dim {dim}")
    cos, sin = (b.padShape(t, 1) for t in (cos, sin))  # [B x 1 x S x dim/2]
    turned = x4 if dim == size else slice_axis(c, x4, 3, 0, dim)
    if c.attr("interleaved", 0):
        pairs = split_last(c, turned, dim // 2)  # [… x dim/2 x 2]
        x1, x2 = (b.squeezeShape(slice_axis(c, pairs, 4, k, k + 1), 4) for k in (0, 1))
    else:
        x1, x2 = (slice_axis(c, turned, 3, k * dim // 2, (k + 1) * dim // 2) for k in (0, 1))
    real = b.subtract(b.multiply(cos, x1), b.multiply(sin, x2))
    imag = b.add(b.multiply(sin, x1), b.multiply(cos, x2))
    if c.attr("interleaved", 0):
        both = b.concatenate([b.padShape(real, 4), b.padShape(imag, 4)], 4)
        shape = c.type_of(turned).shape
        out = b.shapeCast(both, shape)  # the shape `split_last` made its pairs of
    else:
        out = b.concatenate([real, imag], 3)
    if dim < size:
        out = b.concatenate([out, slice_axis(c, x4, 3, dim, size)], 3)
    return [merge_heads(c, out) if rank == 3 else out]
