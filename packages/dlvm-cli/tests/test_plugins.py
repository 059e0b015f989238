"""`dlvm plugins`: tables and JSON, including plugins that failed to load."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dlvm.ir.plugin import PluginInfo, make_registry, set_registry

Invoke = Callable[..., Any]


def test_table_lists_interp_and_dlvm_ir(invoke: Invoke) -> None:
    result = invoke("plugins")
    assert result.exit_code == 0, result.output
    for word in ("interp", "dlvm-ir", "strip-names", "verify", "Targets", "Passes"):
        assert word in result.stdout


def test_json(invoke: Invoke) -> None:
    result = invoke("plugins", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    dists = {p["distribution"]: p for p in data["plugins"]}
    assert dists["dlvm-ir"]["status"] == "ok"
    targets = {t["name"]: t for t in data["targets"]}
    assert targets["interp"]["distribution"] == "dlvm-ir"
    assert data["default_target"] == "interp"
    assert {"strip-names", "verify"} <= {p["name"] for p in data["passes"]}
    assert {"name", "distribution", "summary", "alias_of"} <= set(data["passes"][0])
    assert "frontends" in data
    assert "pipelines" in data


class BrokenPlugin:
    """A plugin whose registration hook raises."""

    from dlvm.ir.plugin import hookimpl

    @hookimpl
    def register_passes(self, register: Callable[..., None]) -> None:
        raise RuntimeError("kaboom [not markup]")


@pytest.mark.usefixtures("fresh_registry")
def test_works_when_a_plugin_failed(invoke: Invoke) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(BrokenPlugin(), PluginInfo("broken", "dlvm-broken", "9.9"))
    set_registry(reg)
    table = invoke("plugins")
    assert table.exit_code == 0, table.output
    assert "failed" in table.stdout
    assert "kaboom" in table.stdout
    assert table.stderr.startswith("dlvm: warning: plugin 'broken' (dlvm-broken) failed to "
                                   "load: RuntimeError: kaboom [not markup]")
    data = json.loads(invoke("plugins", "--json").stdout)
    broken = next(p for p in data["plugins"] if p["name"] == "broken")
    assert broken["status"] == "failed"
    assert "RuntimeError: kaboom" in broken["error"]
    assert any(t["name"] == "interp" for t in data["targets"])


@pytest.mark.usefixtures("fresh_registry")
def test_unknown_pass_notes_failed_plugins(invoke: Invoke, double: Any) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(BrokenPlugin(), PluginInfo("broken", "dlvm-broken", "9.9"))
    set_registry(reg)
    result = invoke("opt", str(double), "-p", "mystery")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("dlvm: error:")
    assert lines[1].startswith("dlvm: note: plugin 'broken' (dlvm-broken) failed to load")


def test_warns_about_unrelated_dlvm(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    from dlvm.cli.commands import plugins

    monkeypatch.setattr(plugins, "unrelated_dlvm_installed", lambda: True)
    result = invoke("plugins", "--json")
    assert result.exit_code == 0
    assert result.stderr.startswith("dlvm: warning:")
    json.loads(result.stdout)  # the warning stays off stdout
