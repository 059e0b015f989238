"""The counter-based stream `random` draws from (`dlvm.ir.random_stream`): a pure function
of (seed, index), so any target computes any element, and the same numbers everywhere."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.random_stream import GAMMA, MIX1, MIX2, CounterStream, key_of, stream_bits

MASK = (1 << 64) - 1


def splitmix64(state: int) -> tuple[int, int]:
    """The published SplitMix64 step, in Python integers: (next state, output)."""
    state = (state + GAMMA) & MASK
    z = state
    z = ((z ^ (z >> 30)) * MIX1) & MASK
    z = ((z ^ (z >> 27)) * MIX2) & MASK
    return state, z ^ (z >> 31)


def test_the_stream_is_splitmix64_from_the_key_of_the_seed() -> None:
    for seed in (0, 1, 12345, 2**63 + 7):
        state, expected = key_of(seed), []
        for _ in range(10):
            state, out = splitmix64(state)
            expected.append(out)
        assert stream_bits(key_of(seed), 0, 10).tolist() == expected


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 40))
def test_any_element_is_computed_from_its_index_alone(key: int, start: int, count: int
                                                      ) -> None:
    whole = stream_bits(key, start, count + 5)
    assert stream_bits(key, (start + 5) & MASK, count).tolist() == whole[5:].tolist()


def test_draws_continue_where_the_last_one_stopped() -> None:
    one, two = CounterStream(9), CounterStream(9)
    a = one.draw((3, 4), 0.0, 1.0, np.float32)
    b = one.draw((5,), -3, 3, np.int64)
    assert one.counter == 17
    assert a.ravel().tolist() == two.draw((12,), 0.0, 1.0, np.float32).tolist()
    assert b.tolist() == two.draw((5,), -3, 3, np.int64).tolist()


def test_values_are_uniform_over_the_half_open_range() -> None:
    stream = CounterStream(1)
    u = stream.draw((200_000,), -2.0, 3.0, np.float64)
    assert u.min() >= -2.0 and u.max() < 3.0
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 25 / 12) < 0.03
    counts = np.bincount(stream.draw((100_000,), 0, 10, np.int32))
    assert counts.shape == (10,) and counts.min() > 9_500 and counts.max() < 10_500


def test_a_value_that_rounds_up_to_the_upper_bound_becomes_the_lower_one() -> None:
    # f16 has 11 significant bits: most draws in [1, 1 + 2^-10) round to the upper bound
    h = CounterStream(2).draw((1000,), 1.0, 1.0 + 2.0**-10, np.float16)
    assert set(h.tolist()) == {1.0}


def test_the_whole_int64_range_and_narrow_integers() -> None:
    lo, hi = -(2**63), 2**63 - 1
    x = CounterStream(3).draw((1000,), lo, hi, np.int64)
    assert (x < 0).any() and (x > 0).any() and x.max() < hi
    assert set(CounterStream(3).draw((500,), -128, 127, np.int8).tolist()) <= set(
        range(-128, 127))


@pytest.mark.parametrize(("lo", "hi", "dtype"), [(1.0, 1.0, np.float32), (2, 1, np.int32),
                                                 (-1e308, 1e308, np.float64)])
def test_an_empty_or_unrepresentable_range_takes_nothing(lo: float, hi: float, dtype: type
                                                         ) -> None:
    stream = CounterStream(0)
    with pytest.raises(ValueError, match="range"):
        stream.draw((3,), lo, hi, dtype)
    assert stream.counter == 0


def test_the_interpreter_draws_from_the_stream_of_its_seed() -> None:
    module = ir.parse("""
func @noise: () -> (<2 x 3 x f32>, <4 x i16>) {
'entry():
    %a = random 2 x 3 from -1.0: f32 upto 1.0: f32
    %b = random 4 from 0: i16 upto 1000: i16
    return (%a: <2 x 3 x f32>, %b: <4 x i16>): (<2 x 3 x f32>, <4 x i16>)
}
""")
    exe = ir.compile(module, "interp", seed=5)
    expected = CounterStream(5)
    for _ in range(2):
        a, b = exe.call("noise")
        assert a.tolist() == expected.draw((2, 3), np.float32(-1), np.float32(1),
                                           np.float32).tolist()
        assert b.dtype == np.int16
        assert b.tolist() == expected.draw((4,), 0, 1000, np.int16).tolist()
