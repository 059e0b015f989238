"""Running module text on the reference interpreter, for tests and quick experiments.

    run(text, "f", x, y)    # → a tuple of numpy arrays
    run1(text, "f", x)      # → the single result

`mlp_cross_entropy(...)` writes the classic training loss, a tanh MLP's mean softmax
cross-entropy with its gradient declaration, at any sizes. `COUNTED_LOOP` is the smallest
program with a back edge, a trip count given as an argument and a gradient declaration: the
loop the control-flow passes and AD are first tried on.

Each distinct text is parsed, verified and compiled once, for the interpreter or for the
target `$DLVM_TEST_TARGET` names.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from .api import compile
from .parser import parse
from .target import Executable
from .verifier import verify

# The target the helpers compile for: the interpreter, or (to run the interpreter's tests on
# a code generator, which must compute the same) the one `DLVM_TEST_TARGET` names.
TARGET_ENV = "DLVM_TEST_TARGET"


def target_under_test() -> str:
    return os.environ.get(TARGET_ENV) or "interp"


@functools.cache
def executable(text: str, target: str | None = None) -> Executable:
    module = parse(text)
    verify(module)
    return compile(module, target=target or target_under_test())


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


def mlp_cross_entropy(batch: str = "_", inputs: int = 4, hidden: int = 5, outputs: int = 3,
                      dtype: str = "f64", header: bool = True) -> str:
    """`@loss(x, y, w1, b1, w2, b2)`: the mean softmax cross-entropy of tanh(x·w1 + b1)·w2 + b2
    against one-hot `y` (row maximum subtracted before `exp`), and `@dloss`, its gradient in
    the four parameters keeping the loss. `batch` is a size or `_`."""
    n, i, h, o, t = batch, inputs, hidden, outputs, dtype
    args = (f"<{n} x {i} x {t}>, <{n} x {o} x {t}>, <{i} x {h} x {t}>, <{h} x {t}>, "
            f"<{h} x {o} x {t}>, <{o} x {t}>")
    grads = f"<{i} x {h} x {t}>, <{h} x {t}>, <{h} x {o} x {t}>, <{o} x {t}>"
    params = (f"%x: <{n} x {i} x {t}>, %y: <{n} x {o} x {t}>, %w1: <{i} x {h} x {t}>, "
              f"%b1: <{h} x {t}>, %w2: <{h} x {o} x {t}>, %b2: <{o} x {t}>")
    text = f"""
// mean softmax cross-entropy of a tanh MLP: the classic training loss
func @loss: ({args}) -> {t} {{
'entry({params}):
    %z1 = dot %x: <{n} x {i} x {t}>, %w1: <{i} x {h} x {t}>
    %bb1 = padShape %b1: <{h} x {t}> at 0
    %a1 = add %z1: <{n} x {h} x {t}>, %bb1: <1 x {h} x {t}>
    %h = tanh %a1: <{n} x {h} x {t}>
    %z2 = dot %h: <{n} x {h} x {t}>, %w2: <{h} x {o} x {t}>
    %bb2 = padShape %b2: <{o} x {t}> at 0
    %logits = add %z2: <{n} x {o} x {t}>, %bb2: <1 x {o} x {t}>
    %m = reduce %logits: <{n} x {o} x {t}> by max init -inf: {t} along 1
    %mp = padShape %m: <{n} x {t}> at 1
    %zc = subtract %logits: <{n} x {o} x {t}>, %mp: <{n} x 1 x {t}>
    %e = exp %zc: <{n} x {o} x {t}>
    %s = reduce %e: <{n} x {o} x {t}> by add init 0.0: {t} along 1
    %ls = log %s: <{n} x {t}>
    %lsp = padShape %ls: <{n} x {t}> at 1
    %logp = subtract %zc: <{n} x {o} x {t}>, %lsp: <{n} x 1 x {t}>
    %py = multiply %logp: <{n} x {o} x {t}>, %y: <{n} x {o} x {t}>
    %total = reduce %py: <{n} x {o} x {t}> by add init 0.0: {t}
    %rows = unitCount of %m: <{n} x {t}>
    %n = dataTypeCast %rows: i64 to {t}
    %mean = divide %total: {t}, %n: {t}
    %loss = negate %mean: {t}
    return %loss: {t}
}}

[gradient @loss wrt 2, 3, 4, 5 keeping 0]
func @dloss: ({args}) -> ({grads}, {t})
"""
    return ('module "mlp"\nstage raw\n' + text) if header else text
