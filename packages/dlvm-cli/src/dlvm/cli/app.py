"""The Typer app: the core commands, the global options and plugin sub-commands.

Errors are mapped in `DlvmGroup.invoke`, so the same messages and exit codes
come out of `dlvm`, `python -m dlvm.cli` and `CliRunner` in tests.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import warnings
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.main import get_command_name

from dlvm.cli import errors

CORE_COMMANDS = ("verify", "opt", "compile", "exec", "run", "plugins")
DEBUG_KEY = "debug"


def click_exception_types() -> tuple[type[BaseException], ...]:
    """Exceptions that Typer reports itself (usage errors: 2, deliberate exits: their code).

    Found through the MRO because typer ≥0.26 vendors click under a private name.
    """
    click_exc = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return (click_exc, typer.Exit, typer.Abort)


class DlvmGroup(TyperGroup):
    """The root command group; turns every error a command raises into a message and exit 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            with plugin_warnings_reported():
                return super().invoke(ctx)
        except click_exception_types():
            raise
        except BrokenPipeError:
            raise  # Typer's main silences the pipe and exits quietly
        except Exception as e:
            if ctx.params.get(DEBUG_KEY) or errors.debug_from_env():
                raise
            raise typer.Exit(errors.report(e)) from None


@contextlib.contextmanager
def plugin_warnings_reported() -> Iterator[None]:
    """Show the registry's `PluginWarning`s (an unusable target, …) as `dlvm: warning:`
    lines rather than as Python warnings with a file and line of DLVM's code."""
    from dlvm.ir.plugin import PluginWarning

    with warnings.catch_warnings():
        warnings.simplefilter("default", PluginWarning)
        show_python_warning = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
            if issubclass(category, PluginWarning):
                errors.warning(str(message))
            else:
                show_python_warning(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def show_version(value: bool) -> None:
    if not value:
        return
    versions = []
    for dist in ("dlvm-cli", "dlvm-ir"):
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    typer.echo(", ".join(versions))
    raise typer.Exit()


def root(
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show Python tracebacks (also: DLVM_DEBUG=1).")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=show_version, is_eager=True, help="Print versions and exit.")
    ] = False,
) -> None:
    """DLVM: verify, optimize and execute DLVM IR, with passes and targets from plugins."""


def build_app() -> typer.Typer:
    """The app with the core commands only (plugins add theirs in `dlvm.cli.main`)."""
    from dlvm.cli.commands.compile import compile_
    from dlvm.cli.commands.exec_ import exec_
    from dlvm.cli.commands.opt import opt
    from dlvm.cli.commands.plugins import plugins
    from dlvm.cli.commands.run import run
    from dlvm.cli.commands.verify import verify

    app = typer.Typer(cls=DlvmGroup, name="dlvm", no_args_is_help=True,
                      pretty_exceptions_enable=False,
                      context_settings={"help_option_names": ["-h", "--help"]})
    app.callback()(root)
    app.command("verify")(verify)
    app.command("opt")(opt)
    app.command("compile")(compile_)
    app.command("exec")(exec_)
    app.command("run")(run)
    app.command("plugins")(plugins)
    return app


def command_names(commands: list[Any], groups: list[Any]) -> list[str]:
    """The top-level names of Typer registrations (`app.registered_commands`/`_groups`).

    Unnamed sub-apps are skipped: Typer itself refuses them at build time.
    """
    names = []
    for c in commands:
        if isinstance(c.name, str):
            names.append(c.name)
        elif c.callback is not None:
            names.append(get_command_name(c.callback.__name__))
    for g in groups:
        name = g.name if isinstance(g.name, str) else None
        if name is None and g.typer_instance is not None:
            info_name = g.typer_instance.info.name
            name = info_name if isinstance(info_name, str) else None
        if name is not None:
            names.append(name)
    return names
