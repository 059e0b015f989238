"""dlvm-onnx's registrations: the front end `onnx` for `.onnx` files, and `dlvm onnx`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.plugin import RegisterFrontend, hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_frontends(register: RegisterFrontend) -> None:
    register("onnx", "dlvm.onnx:load", "ONNX models", suffixes=(".onnx",))


@hookimpl
def register_commands(app: typer.Typer) -> None:
    from .command import app as onnx_app

    app.add_typer(onnx_app, name="onnx")
