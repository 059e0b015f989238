"""The stream that `random` draws from: counter-based, the same on every target.

Element `i` of the stream of seed `s` is a pure function of `(s, i)` — SplitMix64's output
function (Steele, Lea & Flood, 2014) applied to `key + (i + 1)·γ`, where `key = mix(s)` and
γ = 0x9E3779B97F4A7C15 — so a GPU thread computes its element from its index alone, without
the elements before it, and every target (numpy here, native code on the CPU, kernels on the
GPU) produces the same numbers. A generator is the pair (key, counter): a `random` of `n`
elements takes elements `counter … counter + n − 1` and advances the counter by `n`.

The 64 random bits of an element become a value of the result's data type:

- float: `u = (bits >> 11) · 2^-53` (53 random bits, exactly representable) and
  `lower + (upper − lower) · u`, rounded in float64 step by step (no fused multiply-add) and
  then to the data type; a value that rounds up to `upper` becomes `lower`, so the interval
  stays half-open;
- integer: `lower + bits mod (upper − lower)` (the range as an unsigned 64-bit number; the
  bias is below range / 2^64).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
MASK = (1 << 64) - 1


def mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 values (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(MIX1)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(MIX2)
    return z ^ (z >> np.uint64(31))


def key_of(seed: int) -> int:
    """The key of the stream of `seed` (any integer; taken modulo 2^64)."""
    return int(mix(np.array([seed & MASK], np.uint64))[0])


def stream_bits(key: int, start: int, count: int) -> np.ndarray:
    """Elements `start … start + count − 1` of the stream of `key`, as uint64."""
    with np.errstate(over="ignore"):
        index = np.arange(1, count + 1, dtype=np.uint64) + np.uint64(start & MASK)
        return mix(np.uint64(key) + index * np.uint64(GAMMA))


def values_from_bits(bits: np.ndarray, lower: Any, upper: Any, dtype: np.dtype[Any]
                     ) -> np.ndarray:
    """The values of `dtype` in [lower, upper) that `bits` stand for (see the module's
    docstring); ValueError for an empty or unrepresentable range."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        lo, hi = float(lower), float(upper)
        span = hi - lo
        if not lo < hi or not np.isfinite(span):
            raise ValueError(f"the range [{lower}, {upper}) is empty or not finite")
        u = (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        out = (lo + span * u).astype(dtype)
        out[out >= dtype.type(hi)] = dtype.type(lo)
        return out
    lo, hi = int(lower), int(upper)
    if not lo < hi:
        raise ValueError(f"the range [{lower}, {upper}) is empty")
    offset = bits % np.uint64(hi - lo)  # at most 2^64 − 1 for bounds of 64 bits
    with np.errstate(over="ignore"):
        return (offset + np.uint64(lo & MASK)).astype(np.int64).astype(dtype)


class CounterStream:
    """A generator: the key of its seed and how many elements it has handed out. `state`
    holds both as two uint64 words, which native code reads and advances in place."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.state = np.array([key_of(seed), 0], np.uint64)

    @property
    def counter(self) -> int:
        return int(self.state[1])

    def take(self, count: int) -> int:
        """Reserve `count` elements; the index of the first."""
        start = int(self.state[1])
        self.state[1] = np.uint64((start + count) & MASK)
        return start

    def draw(self, shape: tuple[int, ...], lower: Any, upper: Any, dtype: Any) -> np.ndarray:
        """The next `prod(shape)` elements as values in [lower, upper); ValueError for a bad
        range (nothing is taken then)."""
        count = int(np.prod(shape, dtype=np.int64))
        values_from_bits(np.zeros(0, np.uint64), lower, upper, dtype)  # check the range
        bits = stream_bits(int(self.state[0]), self.take(count), count)
        return values_from_bits(bits, lower, upper, dtype).reshape(shape)
