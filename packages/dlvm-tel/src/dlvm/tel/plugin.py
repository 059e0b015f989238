"""dlvm-tel's registrations: the front end `tel` for `.tel` files, and `dlvm tel generate`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.plugin import RegisterFrontend, hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_frontends(register: RegisterFrontend) -> None:
    register("tel", "dlvm.tel.compiler:compile_file",
             "TEL: the Tensor Expression Language", suffixes=(".tel",))


@hookimpl
def register_commands(app: typer.Typer) -> None:
    from .command import app as tel_app

    app.add_typer(tel_app, name="tel")
