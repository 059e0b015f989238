"""The Typer app: the core commands, the global options and plugin sub-commands.

Errors are mapped in `DlvmGroup.invoke`, so the same messages and exit codes
come out of `dlvm`, `python -m dlvm.cli` and `CliRunner` in tests.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup
from typer.main import get_command_name

from dlvm.cli import errors
from dlvm.cli.command_tree import adjust_tree, debug_asked, hide_flag_placeholder

if TYPE_CHECKING:
    from dlvm.ir.plugin import Registry

CORE_COMMANDS = ("verify", "opt", "compile", "exec", "run", "plugins")
DISTRIBUTION_PREFIX = "dlvm-"


def click_exception_types() -> tuple[type[BaseException], ...]:
    """Exceptions that Typer reports itself (usage errors: 2, deliberate exits: their code).

    Found through the MRO because typer ≥0.26 vendors click under a private name.
    """
    click_exc = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return (click_exc, typer.Exit, typer.Abort)


class DlvmGroup(TyperGroup):
    """The root command group; turns every error a command raises into a message and exit 1.

    Every command under it, plugin ones included, accepts `--debug` and shows its flags
    without a placeholder (`dlvm.cli.command_tree`); an unknown command name is followed
    by the notes on plugins that failed, as other unknown names are.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        adjust_tree(self)
        self.unknown_command_seen = False

    def get_params(self, ctx: Any) -> list[Any]:
        """The root's options, Typer's completion options (added after `__init__`) too."""
        params: list[Any] = super().get_params(ctx)
        for param in params:
            hide_flag_placeholder(param)
        return params

    def main(self, *args: Any, **kwargs: Any) -> Any:
        self.unknown_command_seen = False
        try:
            return super().main(*args, **kwargs)
        finally:  # after click's "No such command" message, as notes follow errors
            if self.unknown_command_seen:
                errors.note_failed_plugins()

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except click_exception_types():
            if not ctx.resilient_parsing:  # shell completion stays quiet
                self.unknown_command_seen = True
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            with plugin_warnings_reported():
                return super().invoke(ctx)
        except click_exception_types():
            raise
        except BrokenPipeError:
            raise  # Typer's main silences the pipe and exits quietly
        except KeyboardInterrupt:  # Typer would exit 130 without a word
            if debug_asked(ctx) or errors.debug_from_env():
                raise
            raise typer.Exit(errors.interrupted()) from None
        except Exception as e:
            if debug_asked(ctx) or errors.debug_from_env():
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
    """Every installed `dlvm-*` distribution with its version, one per line."""
    if not value:
        return
    versions = installed_versions()
    typer.echo("\n".join(f"{name} {version}" for name, version in versions.items())
               if versions else "no dlvm-* distribution is installed")
    raise typer.Exit()


def installed_versions() -> dict[str, str]:
    """`{normalized name: version}` of the installed `dlvm-*` distributions, by name; the
    first found on the path wins, as for imports (the unrelated `dlvm` is not one of them)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = normalized_name(dist.metadata["Name"] or "")
        if name.startswith(DISTRIBUTION_PREFIX) and name not in found:
            found[name] = dist.version
    return dict(sorted(found.items()))


def normalized_name(name: str) -> str:
    """A distribution name as PEP 503 compares them: `DLVM_Opt` is `dlvm-opt`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def root(
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show Python tracebacks (also: DLVM_DEBUG=1).")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=show_version, is_eager=True, help="Print versions and exit.")
    ] = False,
) -> None:
    """DLVM: verify, optimize and execute DLVM IR, with passes and targets from plugins."""


def module_inputs_help(reg: Registry) -> str:
    """What FILE may be, from the front ends installed now: shown under the module commands'
    `--help`."""
    readers: list[str] = []
    for name in reg.names("frontend"):
        entry = reg.entries["frontend"][name]
        suffixes = entry.options.get("suffixes", ()) if entry.alias_of is None else ()
        readers.extend(f"{suffix} ({name}, {entry.plugin.distribution})" for suffix in suffixes)
    stdin = "'-' reads DLVM IR text from stdin"
    if not readers:
        return f"FILE is a module in DLVM IR text; {stdin}."
    return (f"FILE is a module, in a file that an installed front end reads: "
            f"{', '.join(readers)}; {stdin}.")


def build_app() -> typer.Typer:
    """The app with the core commands only (plugins add theirs in `dlvm.cli.main`)."""
    from dlvm.cli.commands.compile import compile_
    from dlvm.cli.commands.exec_ import exec_
    from dlvm.cli.commands.opt import opt
    from dlvm.cli.commands.plugins import plugins
    from dlvm.cli.commands.run import run
    from dlvm.cli.commands.verify import verify
    from dlvm.ir.plugin import registry

    app = typer.Typer(cls=DlvmGroup, name="dlvm", no_args_is_help=True,
                      pretty_exceptions_enable=False,
                      context_settings={"help_option_names": ["-h", "--help"]})
    app.callback()(root)
    inputs = module_inputs_help(registry())
    app.command("verify", epilog=inputs)(verify)
    app.command("opt", epilog=inputs)(opt)
    app.command("compile", epilog=inputs)(compile_)
    app.command("exec", epilog=inputs)(exec_)
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
