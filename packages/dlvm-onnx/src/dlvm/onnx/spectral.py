"""`DFT`: the discrete Fourier transform as products with constant matrices.

A signal of length n along `axis` (real: last dimension 1; complex: 2, real and imaginary
parts) times the matrices C[t, k] = cos(2πtk/N) and S[t, k] = sin(2πtk/N), computed in float64
at import for the transform's length N (`dft_length`, else n; the signal truncated or, as
zeros, extended to it):

    forward:  X = (re·C + im·S) + i·(im·C − re·S)     (k < N, or ⌊N/2⌋ + 1 if onesided)
    inverse:  x = ((re·C − im·S) + i·(re·S + im·C)) / N
    inverse of a one-sided spectrum (a real signal): x = Σₖ wₖ·(re·C − im·S) / N, wₖ = 2
    except for k = 0 and k = N/2, which appear once

The products run in float64, as numpy's FFT does, and the result is rounded to the input's
type once. Lengths must be known at import; the cost is O(n·N) per line, where an FFT would
take O(N log N).
"""

from __future__ import annotations

import numpy as np

from dlvm.ir import Value
from dlvm.ir.types import F64

from .context import NodeContext
from .errors import Invalid, Unsupported
from .ops import converts, matmul


def along_last(c: NodeContext, x: Value, axis: int, matrix: np.ndarray) -> Value:
    """x contracted with `matrix` [n, K] along `axis` (K replaces n there)"""
    rank = c.rank(x)
    order = [k for k in range(rank) if k != axis] + [axis]
    moved = c.b.transpose(x, order) if order != list(range(rank)) else x
    out = matmul(c, moved, c.literal(matrix))
    back = [order.index(k) for k in range(rank)]
    return c.b.transpose(out, back) if back != list(range(rank)) else out


def cut(c: NodeContext, x: Value, axis: int, length: int) -> Value:
    """the first `length` elements along `axis`"""
    rank = c.rank(x)
    front = c.b.transpose(x, [axis, *[k for k in range(rank) if k != axis]]) if axis else x
    part = c.b.slice(front, 0, length - 1)
    if not axis:
        return part
    order = [axis, *[k for k in range(rank) if k != axis]]
    return c.b.transpose(part, [order.index(k) for k in range(rank)])


def settings(c: NodeContext) -> tuple[int, int | None]:
    """(axis, dft_length) from the attributes (before opset 20) or the inputs"""
    if c.opset >= 20:
        axis = c.const(2) if c.has(2) else np.array(-2)
        if axis is None:
            raise Unsupported("DFT with an axis computed at run time")
        axis = int(axis)
    else:
        axis = int(c.attr("axis", 1))
    length = None
    if c.has(1):
        given = c.const(1)
        if given is None:
            raise Unsupported("DFT with a dft_length computed at run time")
        length = int(given)
        if length < 1:
            raise Invalid(f"dft_length must be positive, found {length}")
    return axis, length


@converts("DFT")
def _dft(c: NodeContext) -> list[Value]:
    """the DFT along `axis`, forward or inverse, full or one-sided (see the module)"""
    x = c.value(0)
    t = c.type_of(x)
    if t.rank < 2 or t.shape[-1] not in (1, 2):
        raise Invalid(f"DFT's input must end in a dimension of 1 (real) or 2 (complex), "
                      f"found {t}")
    axis, length = settings(c)
    rank = t.rank
    if not (-rank <= axis < rank) or axis % rank == rank - 1:
        raise Invalid(f"DFT's axis {axis} is not a signal axis of a rank-{rank} input")
    axis %= rank
    n = t.shape[axis]
    if n is None:
        raise Unsupported("DFT of a signal of dynamic length")
    inverse, onesided = bool(c.attr("inverse", 0)), bool(c.attr("onesided", 0))
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    b = c.b
    wide = x if t.dtype == F64 else b.dataTypeCast(x, F64)
    parts = [b.squeezeShape(b.slice(b.transpose(wide, [rank - 1, *range(rank - 1)]), k, k), 0)
             for k in range(t.shape[-1])]  # [re] or [re, im], each of rank − 1
    m = min(n, length)  # the signal truncated to N; beyond n it is zeros
    if m < n:
        parts = [cut(c, p, axis, m) for p in parts]
    if inverse and onesided:
        count = length // 2 + 1
        m = min(m, count)
        if m < c.type_of(parts[0]).shape[axis]:
            parts = [cut(c, p, axis, m) for p in parts]
        tk = np.outer(np.arange(m), np.arange(length)) * (2 * np.pi / length)
        weight = np.full(m, 2.0)
        weight[0] = 1.0
        if length % 2 == 0 and length // 2 < m:
            weight[length // 2] = 1.0
        cos, sin = (np.cos(tk) * weight[:, None] / length, np.sin(tk) * weight[:, None] / length)
        out = along_last(c, parts[0], axis, cos)
        if len(parts) == 2:
            out = b.subtract(out, along_last(c, parts[1], axis, sin))
        pieces = [out]
    else:
        count = length // 2 + 1 if onesided and not inverse else length
        tk = np.outer(np.arange(m), np.arange(count)) * (2 * np.pi / length)
        scale = 1.0 / length if inverse else 1.0
        cos, sin = np.cos(tk) * scale, np.sin(tk) * scale
        sign = 1.0 if inverse else -1.0  # e^(±iθ) = cos θ ± i·sin θ
        re = along_last(c, parts[0], axis, cos)
        im = along_last(c, parts[0], axis, sign * sin)
        if len(parts) == 2:
            re = b.subtract(re, along_last(c, parts[1], axis, sign * sin))
            im = b.add(im, along_last(c, parts[1], axis, cos))
        pieces = [re, im]
    last = [b.padShape(p, rank - 1) for p in pieces]
    out = last[0] if len(last) == 1 else b.concatenate(last, rank - 1)
    return [out if t.dtype == F64 else b.dataTypeCast(out, t.dtype)]
