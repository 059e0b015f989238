"""dlvm-ad's registrations, through the same entry point as any plugin."""

from __future__ import annotations

from collections.abc import Callable

from dlvm.ir.plugin import hookimpl


@hookimpl
def register_passes(register: Callable[..., None]) -> None:
    register("differentiation", "dlvm.ad.differentiation:Differentiation",
             "turn gradient and tangent declarations into functions", aliases=("AD",))
