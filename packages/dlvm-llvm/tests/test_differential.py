"""Every program of the repository computes on llvm-cpu what the interpreter computes.

The lit corpus, the examples, and random programs with loops, branches and gradients are
run on both targets with the same random arguments: results must agree (float32 within
1e-5 relative, float64 within 1e-12), and where the interpreter stops with an error, native
code stops with an error too, at the same instruction. (`test_error_agreement.py` holds the
table of every instruction's run-time errors.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.strategies import loop_programs
from dlvm.ir.testing import assert_agree as agree
from dlvm.ir.testing import callable_functions, check_random_program, corpus
from dlvm.ir.testing import check_same as compare
from dlvm.ir.testing import random_argument as argument

ROOT = Path(__file__).resolve().parents[3]


def programs() -> list[Path]:
    return corpus(ROOT)


@pytest.mark.parametrize("path", programs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_corpus_computes_the_same(path: Path) -> None:
    module = ir.parse_file(str(path))
    ir.verify(module)
    # one oracle per native executable: each draws `random` from its own generator
    oracle = ir.compile(module, "interp", max_steps=200_000)
    oracle2 = ir.compile(module, "interp", max_steps=200_000)
    native = ir.compile(module, "llvm-cpu", passes="")
    optimized = ir.compile(module, "llvm-cpu")  # after O3: fused kernels
    rng = np.random.default_rng(0)
    for fn in callable_functions(oracle.module):
        args = [argument(t, oracle.module, rng) for t in fn.type_.arguments]
        compare(fn, args, native, oracle, same_place=True)
        compare(fn, args, optimized, oracle2, errors=False)


def test_the_examples_arguments_give_the_same_results() -> None:
    """The website demo with its own inputs, and the digits MLP's training step."""
    demo = ROOT / "examples" / "website-demo"
    module = ir.parse_file(str(demo / "website-demo.dl"))
    with np.load(demo / "inputs.npz") as npz:
        args = [npz[f"arg{i}"] for i in range(len(npz.files))]
    agree(ir.compile(module, "llvm-cpu").call("f", *args),
          ir.compile(module, "interp").call("f", *args), "website demo")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=loop_programs(), x=st.floats(0.2, 1.5), y=st.floats(0.2, 1.5),
       n=st.integers(0, 4), k=st.integers(-2, 3))
def test_random_programs_with_loops_and_gradients(text: str, x: float, y: float, n: int,
                                                  k: int) -> None:
    check_random_program(text, x, y, n, k, "llvm-cpu", passes="")
