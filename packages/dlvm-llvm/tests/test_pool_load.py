"""Timing checks of the thread budget (run with DLVM_SLOW_TESTS=1, on an otherwise quiet
machine): the MLP training step of benchmarks/llvm_cpu.py with one busy process beside it
stays within 1.5× of its idle time, and more threads are never more than 10 % slower than
half as many, oversubscribed counts (more threads than cores) included."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import module_from_path
from dlvm.llvm.runtime import threads

pytestmark = pytest.mark.skipif(os.environ.get("DLVM_SLOW_TESTS") != "1",
                                reason="timing check: set DLVM_SLOW_TESTS=1")

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "llvm_cpu.py"


def benchmark_module() -> Any:
    return module_from_path(BENCHMARK, "llvm_cpu_benchmark")


def best_median(fn: Callable[[], Any], rounds: int = 5, per: int = 15) -> float:
    for _ in range(3):
        fn()
    medians = []
    for _ in range(rounds):
        times = []
        for _ in range(per):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        medians.append(statistics.median(times))
    return min(medians)


@pytest.fixture(scope="module")
def mlp_step() -> Iterator[Callable[[], Any]]:
    bench = benchmark_module()
    rng = np.random.default_rng(0)
    p = bench.mlp_params(rng)
    x = rng.random((128, 784), np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    threads.set_num_threads(4 * threads.usable_cpus())  # built for every count tried here
    step = ir.compile(ir.parse(bench.mlp_text(128)), "llvm-cpu")["train_step"]
    yield lambda: step(*p, x, y, np.float32(0.1))
    threads.set_num_threads(None)


def test_one_busy_process_beside_costs_at_most_half_again(mlp_step: Callable[[], Any]
                                                          ) -> None:
    threads.set_num_threads(None)  # the default budget: every usable CPU
    idle = best_median(mlp_step)
    with benchmark_module().busy_process():
        loaded = best_median(mlp_step)
    assert loaded <= 1.5 * idle, f"idle {idle * 1e3:.2f} ms, loaded {loaded * 1e3:.2f} ms"


def test_more_threads_are_never_slower(mlp_step: Callable[[], Any]) -> None:
    cores = threads.usable_cpus()
    counts = [1, 2] + [n for n in (4, 8, 16, 32) if n <= 4 * max(cores, 2)]
    times = {}
    for n in counts:
        threads.set_num_threads(n)
        times[n] = best_median(mlp_step)
    shown = ", ".join(f"{n}: {t * 1e3:.2f} ms" for n, t in times.items())
    for n in counts[1:]:
        assert times[n] <= 1.1 * times[n // 2], shown
