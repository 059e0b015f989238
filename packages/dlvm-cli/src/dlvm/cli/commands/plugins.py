"""`dlvm plugins`: what is installed, who provides each name, and what failed to load.

It only reads the registry (which imports no pass or target), so it works —
and is most useful — when some plugin is broken.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dlvm.cli.errors import warning
from dlvm.ir.plugin import Entry, Registry, registry, unrelated_dlvm_installed

if TYPE_CHECKING:
    from rich.table import Table

# registry kind -> (JSON key, table title)
SECTIONS = {"pass": ("passes", "Passes"), "target": ("targets", "Targets"),
            "frontend": ("frontends", "Front ends"), "pipeline": ("pipelines", "Pipelines")}
STATUS_STYLES = {"ok": "green", "failed": "bold red", "blocked": "yellow"}


def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """List plugins, and every pass, target, front end and pipeline with its provider."""
    if unrelated_dlvm_installed():
        warning("the unrelated PyPI package 'dlvm' is installed and may shadow this one's "
                "namespace: pip uninstall dlvm")
    reg = registry()
    for p in reg.plugins:  # whole, on one line each: table cells wrap long messages
        if p.status == "failed":
            warning(f"plugin '{p.name}' ({p.distribution}) failed to load: {p.error}")
    if as_json:
        typer.echo(json.dumps(describe(reg), indent=2))
    else:
        print_tables(reg)


def default_target(reg: Registry) -> str | None:
    try:
        return reg.default_target()
    except Exception:  # no target installed is worth showing, not failing on
        return None


def describe(reg: Registry) -> dict[str, Any]:
    """The registry as plain data, for `--json`."""
    data: dict[str, Any] = {
        "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version,
                     "status": p.status, "error": p.error} for p in reg.plugins],
        "default_target": default_target(reg),
    }
    for kind, (key, _) in SECTIONS.items():
        data[key] = [entry_data(reg.entries[kind][name]) for name in reg.names(kind)]
    return data


def entry_data(e: Entry) -> dict[str, Any]:
    return {"name": e.name, "distribution": e.plugin.distribution, "summary": e.summary,
            "alias_of": e.alias_of}


def print_tables(reg: Registry) -> None:
    from rich.console import Console

    console = Console()
    console.print(plugin_table(reg))
    default = default_target(reg)
    for kind, (_, title) in SECTIONS.items():
        entries = [reg.entries[kind][name] for name in reg.names(kind)]
        console.print(entry_table(title, entries, default if kind == "target" else None))


def plugin_table(reg: Registry) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Plugins", title_justify="left")
    for column in ("Name", "Distribution", "Version", "Status", "Error"):
        table.add_column(column, overflow="fold")
    for p in reg.plugins:
        table.add_row(Text(p.name), Text(p.distribution), Text(p.version),
                      Text(p.status, style=STATUS_STYLES.get(p.status, "")), Text(p.error))
    return table


def entry_table(title: str, entries: list[Entry], default: str | None) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for column in ("Name", "Provided by", "Summary"):
        table.add_column(column, overflow="fold")
    for e in entries:
        name = f"{e.name} (default)" if e.name == default else e.name
        summary = f"alias of {e.alias_of}" if e.alias_of else e.summary
        table.add_row(Text(name), Text(e.plugin.distribution), Text(summary))
    if not entries:
        table.add_row(Text("(none)", style="dim"), "", "")
    return table
