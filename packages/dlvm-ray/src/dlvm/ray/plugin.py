"""dlvm-ray's registration: the training engine `ray` (data-parallel workers)."""

from __future__ import annotations

from dlvm.ir.plugin import RegisterEngine, hookimpl


@hookimpl
def register_engines(register: RegisterEngine) -> None:
    register("ray", "dlvm.ray.engine:RayEngine",
             "data-parallel SGD on Ray workers: each takes its share of every batch")
