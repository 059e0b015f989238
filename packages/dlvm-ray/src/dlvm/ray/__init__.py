"""Data-parallel training on Ray: the `dlvm run` engine `ray`.

    [train.distributed]
    engine = "ray"
    workers = 4
    address = "auto"        # a running cluster (`ray start --head`); "local" starts one

Each worker holds the compiled module and the training data; each step, every worker runs
the step on its share of the global batch, and the results are averaged, weighted by the
shares' sizes: the parameters equal the one-process run's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.lazy import lazy_exports

if TYPE_CHECKING:
    from .engine import RayEngine

# loaded on first use: every `dlvm` command imports the plugin module beside this one
__getattr__ = lazy_exports(__name__, {"RayEngine": ".engine"})

__all__ = ["RayEngine"]
