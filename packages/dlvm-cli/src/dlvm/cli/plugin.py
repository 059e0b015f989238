"""dlvm-cli's entry in the `dlvm.plugins` group: the built-in training engine `local`.

The core commands are built into the app. This module must stay cheap to import, because
every registry load imports it.
"""

from __future__ import annotations

from dlvm.ir.plugin import RegisterEngine, hookimpl


@hookimpl
def register_engines(register: RegisterEngine) -> None:
    register("local", "dlvm.cli.run.engines:LocalEngine", "every step in this process")
