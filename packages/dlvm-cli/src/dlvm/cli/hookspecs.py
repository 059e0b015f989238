"""The CLI-only hook: plugins add sub-commands to the `dlvm` Typer app.

It lives here rather than in `dlvm.ir.plugin` because only the CLI has an app
to add to; `dlvm.cli.main` adds it to the registry's plugin manager at startup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.plugin import hookspec

if TYPE_CHECKING:
    import typer


class CliHooks:
    """Hook specifications that only the `dlvm` command calls."""

    @hookspec
    def register_commands(self, app: typer.Typer) -> None:
        """Add commands to `app`: top-level ones (`app.command("hello")(hello)`) or a
        sub-app (`app.add_typer(sub, name="gpu")`), which keeps several commands together.

        A plugin must not reuse a command name that exists (the core `verify`, `opt`,
        `compile`, `exec`, `run`, `plugins`, or another plugin's): if it does, or if the
        hook raises, everything it added is removed and `dlvm plugins` shows it as failed.
        Every command added accepts `--debug` like the core ones.
        """
