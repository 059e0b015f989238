"""Programs several test files of the GPU target run."""

from __future__ import annotations

import pytest

# a tanh recurrence over a loop, and its backpropagation through time (a stack tape)
RNN = """
func @rnn: (<8 x 8 x f32>, <4 x 8 x f32>, i64) -> f32 {
'entry(%w: <8 x 8 x f32>, %h0: <4 x 8 x f32>, %n: i64):
    branch 'loop(0: i64, %h0: <4 x 8 x f32>)
'loop(%i: i64, %h: <4 x 8 x f32>):
    %more = lessThan %i: i64, %n: i64
    conditional %more: bool then 'body() else 'done()
'body():
    %z = dot %h: <4 x 8 x f32>, %w: <8 x 8 x f32>
    %t = tanh %z: <4 x 8 x f32>
    %j = add %i: i64, 1: i64
    branch 'loop(%j: i64, %t: <4 x 8 x f32>)
'done():
    %s = reduce %h: <4 x 8 x f32> by add init 0.0: f32
    return %s: f32
}

[gradient @rnn wrt 0, 1]
func @drnn: (<8 x 8 x f32>, <4 x 8 x f32>, i64) -> (<8 x 8 x f32>, <4 x 8 x f32>)
"""


@pytest.fixture
def rnn_text() -> str:
    return RNN
