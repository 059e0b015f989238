"""Running module text on the reference interpreter, for tests and quick experiments.

    run(text, "f", x, y)    # → a tuple of numpy arrays
    run1(text, "f", x)      # → the single result

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
