"""A data-parallel worker: the module compiled once, the training data by reference, and
the step run on the rows it is given."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

# Fault injection for tests: DLVM_RAY_FAIL_AT="EPOCH:STEP:WORKER" makes that worker's
# process exit at that step, once (DLVM_RAY_FAIL_MARKER names the file that records it).
FAULT_VARIABLES = ("DLVM_RAY_FAIL_AT", "DLVM_RAY_FAIL_MARKER")


class Worker:
    def __init__(self, index: int, module_text: str, target: str | None,
                 options: dict[str, Any], step: str, data: Any) -> None:
        import dlvm.ir as ir

        self.index = index
        self.exe = ir.compile(ir.parse(module_text, "<pipeline>"), target, **options)
        self.step_name = step
        self.x, self.y = data  # the training split, shared through the object store
        self.fault = os.environ.get("DLVM_RAY_FAIL_AT")

    def ready(self) -> bool:
        return True

    def step(self, params: tuple[np.ndarray, ...], rows: np.ndarray, lr: Any, epoch: int,
             number: int) -> tuple[tuple[np.ndarray, ...], float]:
        """The step on this worker's rows: (new parameters…, loss), and its seconds."""
        self.maybe_fail(epoch, number)
        began = time.perf_counter()
        out = self.exe.call(self.step_name, *params, self.x[rows], self.y[rows], lr)
        return tuple(out), time.perf_counter() - began

    # ------------------------------------------------------------ collective mode

    def join(self, world: int, group: str) -> bool:
        """Join the workers' collective group (gloo): results are then averaged among them."""
        import ray.util.collective as col

        col.init_collective_group(world, self.index, backend="gloo", group_name=group)
        self.group = group
        return True

    def set_parameters(self, params: tuple[np.ndarray, ...]) -> bool:
        self.params = [np.array(p) for p in params]
        return True

    def parameters(self) -> tuple[np.ndarray, ...]:
        return tuple(self.params)

    def step_reduced(self, rows: np.ndarray, weight: float, lr: Any, epoch: int,
                     number: int) -> tuple[float, float, float]:
        """The step on this worker's rows, its results weighted and summed over the group:
        every worker then holds the averaged parameters. Returns (loss, compute seconds,
        all-reduce seconds)."""
        import ray.util.collective as col

        self.maybe_fail(epoch, number)
        began = time.perf_counter()
        if len(rows):
            out = self.exe.call(self.step_name, *self.params, self.x[rows], self.y[rows], lr)
        else:  # no rows this step: a zero share, but the all-reduce still needs this worker
            out = [*(np.zeros_like(p) for p in self.params), np.zeros((), self.params[0].dtype)]
        computed = time.perf_counter()
        parts = [np.asarray(o) for o in out]
        dtype = parts[0].dtype
        if all(p.dtype == dtype for p in parts):  # one buffer, one all-reduce
            flat = np.concatenate([p.reshape(-1) for p in parts]) * dtype.type(weight)
            col.allreduce(flat, group_name=self.group)
            sizes = np.cumsum([p.size for p in parts])[:-1]
            parts = [a.reshape(p.shape) for a, p in zip(np.split(flat, sizes), parts,
                                                        strict=True)]
        else:
            scaled = [np.ascontiguousarray(p * p.dtype.type(weight)) for p in parts]
            for a in scaled:
                col.allreduce(a, group_name=self.group)
            parts = scaled
        self.params = parts[:-1]
        return float(parts[-1]), computed - began, time.perf_counter() - computed

    def maybe_fail(self, epoch: int, number: int) -> None:
        if self.fault != f"{epoch}:{number}:{self.index}":
            return
        marker = Path(os.environ.get("DLVM_RAY_FAIL_MARKER", ".dlvm-ray-failed"))
        if marker.exists():
            return
        marker.write_text("failed once\n")
        os._exit(1)
