"""`dlvm plugins`: what is installed, who provides each name, and what failed or clashed.

It only reads the registry (which imports no pass, only the default target), so it
works — and is most useful — when some plugin is broken.
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
            "frontend": ("frontends", "Front ends"), "pipeline": ("pipelines", "Pipelines"),
            "engine": ("engines", "Training engines")}
STATUS_STYLES = {"ok": "green", "failed": "bold red", "blocked": "yellow"}


def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """List plugins and every pass, target, front end, pipeline, engine and instruction.

    Each name is shown with the distribution that provides it, with failures and clashes."""
    if unrelated_dlvm_installed():
        warning("the unrelated PyPI package 'dlvm' is installed and may shadow this one's "
                "namespace: pip uninstall dlvm")
    reg = registry()
    for p in reg.plugins:  # whole, on one line each: table cells wrap long messages
        if p.status == "failed":
            warning(f"{p.label} failed to load: {p.error}")
    for clash in reg.clashes:
        warning(f"name clash: {clash}")
    if as_json:
        typer.echo(json.dumps(describe(reg), indent=2))
    else:
        print_tables(reg)


def default_target(reg: Registry) -> str | None:
    try:
        return reg.default_target()
    except Exception:  # no usable target is worth showing, not failing on
        return None


def registrations(reg: Registry, kind: str) -> list[Entry]:
    """Every registration of a kind: the plain names, then those reachable only qualified."""
    plain = [reg.entries[kind][name] for name in reg.names(kind)]
    shadowed = [reg.qualified[kind][q] for q in reg.qualified_names(kind)
                if reg.entries[kind].get(reg.qualified[kind][q].name) is not reg.qualified[kind][q]]
    return plain + shadowed


def describe(reg: Registry) -> dict[str, Any]:
    """The registry as plain data, for `--json`."""
    data: dict[str, Any] = {
        "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version,
                     "status": p.status, "error": p.error} for p in reg.plugins],
        "default_target": default_target(reg),
    }
    for kind, (key, _) in SECTIONS.items():
        data[key] = [entry_data(reg, e) for e in registrations(reg, kind)]
    data["instructions"] = [
        {"name": e.name, "distribution": e.plugin.distribution, "plugin": e.plugin.name,
         "summary": e.summary, "aliases": list(e.factory.aliases)}
        for e in reg.instructions()]
    data["clashes"] = [
        {"kind": c.kind, "name": c.name, "kept": c.kept.plugin.distribution,
         "shadowed": c.shadowed.plugin.distribution,
         "qualified_name": c.shadowed.qualified_name, "message": str(c)}
        for c in reg.clashes]
    return data


def entry_data(reg: Registry, e: Entry) -> dict[str, Any]:
    """One registration; `plain` says whether its plain name reaches it (no clash lost)."""
    data = {"name": e.name, "qualified_name": e.qualified_name,
            "plain": reg.entries[e.kind].get(e.name) is e,
            "distribution": e.plugin.distribution, "plugin": e.plugin.name,
            "summary": e.summary, "alias_of": e.alias_of}
    if e.kind == "target" and e.alias_of is None:
        data["unavailable"] = unavailable(e)
    return data


def unavailable(e: Entry) -> str | None:
    """Why a target cannot run code here (its `availability()`), or None."""
    try:
        check = getattr(e.load(), "availability", None)
        return check() if callable(check) else None
    except Exception as err:  # a broken target is reported, never fatal here
        return f"{type(err).__name__}: {err}"


def print_tables(reg: Registry) -> None:
    from rich.console import Console

    console = Console()
    console.print(plugin_table(reg))
    default = default_target(reg)
    for kind, (_, title) in SECTIONS.items():
        console.print(entry_table(reg, title, registrations(reg, kind),
                                  default if kind == "target" else None))
    console.print(entry_table(reg, "Instructions", reg.instructions(), None))


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


def entry_table(reg: Registry, title: str, entries: list[Entry], default: str | None) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for column in ("Name", "Provided by", "Summary"):
        table.add_column(column, overflow="fold")
    for e in entries:
        summary = f"alias of {e.alias_of}" if e.alias_of else e.summary
        why = unavailable(e) if e.kind == "target" and not e.alias_of else None
        if why:
            summary = f"{summary} [unavailable: {why}]"
        if e.kind == "instruction" or reg.entries[e.kind].get(e.name) is e:
            name = f"{e.name} (default)" if e.name == default else e.name
        else:  # lost a name clash: reachable by its qualified name only
            owner = reg.entries[e.kind][e.name].plugin.distribution
            name = e.qualified_name
            summary = f"('{e.name}' is {owner}'s) {summary}"
        table.add_row(Text(name), Text(e.plugin.distribution), Text(summary))
    if not entries:
        table.add_row(Text("(none)", style="dim"), "", "")
    return table
