"""Running module text on the reference interpreter, for tests and quick experiments.

    run(text, "f", x, y)    # → a tuple of numpy arrays
    run1(text, "f", x)      # → the single result

`COUNTED_LOOP` is the smallest program with a back edge, a trip count given as an argument
and a gradient declaration: the loop the control-flow passes and AD are first tried on.

Each distinct text is parsed, verified and compiled once.
"""

from __future__ import annotations

import functools

import numpy as np

from .api import compile
from .parser import parse
from .target import Executable
from .verifier import verify


@functools.cache
def executable(text: str) -> Executable:
    module = parse(text)
    verify(module)
    return compile(module, target="interp")


def run(text: str, fn: str, *args: object) -> tuple[np.ndarray, ...]:
    return executable(text).call(fn, *args)


def run1(text: str, fn: str, *args: object) -> np.ndarray:
    outs = run(text, fn, *args)
    assert len(outs) == 1, f"'@{fn}' returned {len(outs)} values, expected one"
    return outs[0]


COUNTED_LOOP = """module "loop"
stage raw

func @p: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %s = sin %x: f64
    branch 'loop(0: i64, %s: f64)
'loop(%i: i64, %y: f64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'exit()
'body():
    %t = tanh %y: f64
    %y2 = multiply %t: f64, %x: f64
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %y2: f64)
'exit():
    return %y: f64
}

[gradient @p wrt 0]
func @dp: (f64, i64) -> (f64)
"""
