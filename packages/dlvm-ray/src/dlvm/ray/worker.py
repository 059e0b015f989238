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

    def maybe_fail(self, epoch: int, number: int) -> None:
        if self.fault != f"{epoch}:{number}:{self.index}":
            return
        marker = Path(os.environ.get("DLVM_RAY_FAIL_MARKER", ".dlvm-ray-failed"))
        if marker.exists():
            return
        marker.write_text("failed once\n")
        os._exit(1)
