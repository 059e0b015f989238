"""dlvm-nnkit's registrations: the front end `nnkit` for Python files of staged functions."""

from __future__ import annotations

from dlvm.ir.plugin import RegisterFrontend, hookimpl


@hookimpl
def register_frontends(register: RegisterFrontend) -> None:
    register("nnkit", "dlvm.nnkit.frontend:load_file",
             "NNKit: a Python file of staged functions", suffixes=(".py",))
