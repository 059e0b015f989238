"""The hooks: what the plugin provides, by name, with lazy `"module:attr"` factories.

This module is imported whenever the registry loads (every `dlvm` command), so it imports
nothing but `dlvm.ir.plugin`: the pass, the target and the front end are imported only when
used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.plugin import RegisterFrontend, RegisterPass, RegisterTarget, hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_instructions() -> None:
    # Importing the module defines `softsign` (and its derivative rules when dlvm-ad is
    # installed); an import runs once however many times the hook is called.
    from . import instructions  # noqa: F401


@hookimpl
def register_passes(register: RegisterPass) -> None:
    register("sample-double-negation", "dlvm_sample_plugin.passes:DoubleNegation",
             "remove negate(negate x)")


@hookimpl
def register_targets(register: RegisterTarget) -> None:
    # A negative priority: never the default target, only chosen with --target.
    register("sample-counting", "dlvm_sample_plugin.target:CountingTarget",
             "the interpreter, counting calls", priority=-1)


@hookimpl
def register_frontends(register: RegisterFrontend) -> None:
    # `dlvm verify/opt/exec/run` read `.chain` files with it; `ir.load_module` does too.
    register("sample-chain", "dlvm_sample_plugin.frontend:load_file",
             "a chain of element-wise steps", suffixes=(".chain",))


@hookimpl
def register_commands(app: typer.Typer) -> None:
    # dlvm-cli's hook (it exists only where dlvm-cli is installed): one sub-app, `dlvm sample`.
    import typer

    from .commands import trace

    sample = typer.Typer(help="Commands of the sample plugin.")

    @sample.command()
    def hello(name: str = "world") -> None:
        """Say hello."""
        typer.echo(f"hello, {name}, from dlvm-sample-plugin")

    sample.command()(trace)
    app.add_typer(sample, name="sample")
