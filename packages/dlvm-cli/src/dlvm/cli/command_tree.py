"""What every command of the `dlvm` tree gets, core and plugin ones alike.

- `--debug` is accepted wherever it is typed before a `--` (`dlvm exec x.dl --debug`,
  `dlvm --debug exec x.dl`), so the "re-run with --debug" hint is true for every command;
- flags (`--dry-run`, `--help`, …) show no `<bool>` placeholder in `--help`: they take no value.

Applied once to the built click tree, so commands a plugin makes with plain Typer
behave like the core ones. A command with an option of its own named `--debug` keeps it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

DEBUG_KEY = "debug"
DEBUG_FLAG = "--debug"
# Where a command's `--debug` records itself: `ctx.meta` is shared by every context of a run.
DEBUG_META = "dlvm.debug"
DEFAULT_HELP_NAMES = ("--help",)


def debug_asked(ctx: Any) -> bool:
    """Whether `--debug` was given, before the subcommand or after it."""
    return bool(ctx.params.get(DEBUG_KEY) or ctx.meta.get(DEBUG_META))


def record_debug(ctx: Any, param: Any, value: Any) -> Any:
    if value:
        ctx.meta[DEBUG_META] = True
    return value


def adjust_tree(root: Any) -> None:
    """Give every command under `root` the root's `--debug`, and drop flags' placeholders."""
    root_debug = next((p for p in root.params if p.name == DEBUG_KEY), None)
    help_names = root.context_settings.get("help_option_names", DEFAULT_HELP_NAMES)
    for command, names in walk(root, list(help_names)):
        if command is not root and root_debug is not None and not takes_debug(command):
            command.params.append(debug_option(root_debug))
        for param in [*command.params, command.get_help_option(SimpleNamespace(
                help_option_names=names))]:
            hide_flag_placeholder(param)


def walk(command: Any, help_names: list[str]) -> Iterator[tuple[Any, list[str]]]:
    """Each command once, top-down, with the help option names its context will have
    (its own `context_settings`, else its parent's, as click resolves them)."""
    seen: set[int] = set()
    pending = [(command, help_names)]
    while pending:
        current, inherited = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        names = list(current.context_settings.get("help_option_names", inherited))
        yield current, names
        subcommands = getattr(current, "commands", None) or {}
        pending.extend((sub, names) for sub in subcommands.values())


def takes_debug(command: Any) -> bool:
    """The command already has a `--debug` (or a parameter called `debug`) of its own."""
    return any(p.name == DEBUG_KEY or DEBUG_FLAG in (*p.opts, *p.secondary_opts)
               for p in command.params)


def debug_option(root_debug: Any) -> Any:
    """The root's `--debug` (same class, help and flag), recording itself in `ctx.meta`
    instead of becoming an argument of the command's function; eager, so it counts even
    when converting another option's value fails."""
    option = copy.copy(root_debug)
    option.expose_value = False
    option.is_eager = True
    option.callback = record_debug
    return option


def hide_flag_placeholder(param: Any) -> None:
    """A flag takes no value: an empty metavar keeps Typer's help from showing `<bool>`."""
    if param is None or not getattr(param, "is_flag", False) or getattr(param, "count", False):
        return
    if param.metavar is None:
        param.metavar = ""
