"""`dlvm plugins`: tables and JSON, including plugins that failed to load or clashed; and
every command keeps working whatever a plugin does."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

import dlvm.ir as ir
from dlvm.ir.plugin import PluginInfo, hookimpl, make_registry, set_registry

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
    # the fastest installed target: native code when dlvm-llvm is there
    assert data["default_target"] == ("llvm-cpu" if "llvm-cpu" in targets else "interp")
    assert {"strip-names", "verify"} <= {p["name"] for p in data["passes"]}
    assert {"name", "qualified_name", "distribution", "plugin", "summary", "alias_of",
            "plain"} <= set(data["passes"][0])
    assert "frontends" in data
    assert "pipelines" in data
    assert data["clashes"] == []


def test_instructions_are_listed_with_their_provider(invoke: Invoke) -> None:
    data = json.loads(invoke("plugins", "--json").stdout)
    add = next(i for i in data["instructions"] if i["name"] == "add")
    assert add == {"name": "add", "distribution": "dlvm-ir", "plugin": "ir", "summary": "a + b",
                   "aliases": []}
    table = invoke("plugins").stdout
    assert "Instructions" in table
    assert re.search(r"│ add +│ dlvm-ir +│ a \+ b +│", table)


class BrokenPlugin:
    """A plugin whose registration hook raises."""

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


class BrokenCommands:
    @hookimpl
    def register_passes(self, register: ir.plugin.RegisterPass) -> None:
        register("still-here", "dlvm.ir.builtin_passes:VerifyPass", "its passes keep working")

    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        raise SystemExit("commands exit")


@pytest.mark.usefixtures("fresh_registry")
def test_a_plugin_whose_commands_failed_is_shown_failed(invoke: Invoke) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(BrokenCommands(), PluginInfo("cmds", "dlvm-cmds", "1.0"))
    set_registry(reg)
    result = invoke("plugins", "--json")
    assert result.exit_code == 0, result.output
    cmds = next(p for p in json.loads(result.stdout)["plugins"] if p["name"] == "cmds")
    assert (cmds["status"], cmds["error"]) == ("failed",
                                               "register_commands: SystemExit: commands exit")
    assert "still-here" in invoke("plugins").stdout


# ------------------------------------------------------------------ targets that cannot be made


@dataclass
class NoDevice(ir.Target):
    name = "fast"

    def __post_init__(self) -> None:
        raise RuntimeError("no device")

    def compile(self, module: ir.Module) -> ir.Executable:
        raise AssertionError("never compiled")


class FastButBroken:
    @hookimpl
    def register_targets(self, register: ir.plugin.RegisterTarget) -> None:
        register("fast", NoDevice, "needs a device it does not find", priority=100)


@pytest.mark.usefixtures("fresh_registry")
def test_exec_runs_on_a_target_that_can_be_made(invoke: Invoke, double: Path,
                                                tmp_path: Path) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(FastButBroken(), PluginInfo("fastplug", "dlvm-fast", "1.0"))
    set_registry(reg)
    args = tmp_path / "in.npz"
    np.savez(args, arg0=np.array([1.5, -2.0], np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["out0: <2 x f32>", "[ 3. -4.]"]
    assert result.stderr == (
        "dlvm: warning: target 'fast' of plugin 'fastplug' (dlvm-fast) could not be created: "
        "RuntimeError: no device; it is not used as the default target\n")
    chosen = invoke("exec", str(double), "-f", "f", "--args", str(args), "--target", "fast")
    assert chosen.exit_code == 1
    assert chosen.stderr.startswith("dlvm: error: target 'fast' of plugin 'fastplug' "
                                    "(dlvm-fast) could not be created: RuntimeError: no device")


# ------------------------------------------------------------------ installed plugins, end to end


def install(root: Path, dist: str, entry_point: str, source: str) -> None:
    """A distribution as `importlib.metadata` finds it on PYTHONPATH: module + dist-info."""
    module = f"{dist.replace('-', '_')}_module"
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[dlvm.plugins]\n{entry_point} = {module}\n")


def dlvm(root: Path, *args: str, input: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`dlvm ARGS…` in a fresh process that also sees the distributions in `root`, with the
    variables of `env` set."""
    env = {**{k: v for k, v in os.environ.items() if k not in (
        "DLVM_DEBUG", "DLVM_DISABLE_PLUGIN_AUTOLOAD", "DLVM_STRICT_PLUGINS")}, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], input=input,
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_help_works_when_plugins_exit_on_import_or_in_a_hook(tmp_path: Path) -> None:
    install(tmp_path, "dlvm-exiting", "exiting", "raise SystemExit(3)")
    install(tmp_path, "dlvm-exiting-commands", "exiting-commands", """
        from dlvm.ir.plugin import hookimpl

        @hookimpl
        def register_commands(app):
            raise SystemExit("no commands today")
    """)
    help_ = dlvm(tmp_path, "--help")
    assert help_.returncode == 0, help_.stderr
    assert "verify" in help_.stdout
    assert help_.stderr == (
        "dlvm: warning: plugin 'exiting-commands' (dlvm-exiting-commands) failed to register "
        "commands: SystemExit: no commands today; skipped\n")
    listing = dlvm(tmp_path, "plugins", "--json")
    assert listing.returncode == 0, listing.stderr
    assert "dlvm: warning: plugin 'exiting' (dlvm-exiting) failed to load: SystemExit: 3" \
        in listing.stderr
    status = {p["name"]: (p["status"], p["error"]) for p in json.loads(listing.stdout)["plugins"]}
    assert status["exiting"] == ("failed", "SystemExit: 3")
    assert status["exiting-commands"] == ("failed",
                                          "register_commands: SystemExit: no commands today")


CSE_PLUGIN = """
    from dataclasses import dataclass

    from dlvm.ir import Pass
    from dlvm.ir.plugin import hookimpl

    @dataclass
    class MyCSE(Pass):
        name = "cse"

        def run(self, module, ctx):
            ctx.stat("my cse ran")
            return False

    @hookimpl
    def register_passes(register):
        register("cse", MyCSE, "another cse")
"""


@pytest.mark.skipif(importlib.util.find_spec("dlvm.opt") is None,
                    reason="dlvm-opt is not installed")
def test_a_pass_name_clash_keeps_both_plugins(tmp_path: Path, double: Path) -> None:
    install(tmp_path, "aaa-cse", "myplugin", CSE_PLUGIN)  # sorts, and loads, before dlvm-opt
    listing = dlvm(tmp_path, "plugins", "--json")
    assert listing.returncode == 0, listing.stderr
    assert ("dlvm: warning: name clash: pass 'cse' is provided by both dlvm-opt and aaa-cse: "
            "'cse' is dlvm-opt's, aaa-cse's is 'myplugin:cse'") in listing.stderr
    data = json.loads(listing.stdout)
    assert data["clashes"] == [{
        "kind": "pass", "name": "cse", "kept": "dlvm-opt", "shadowed": "aaa-cse",
        "qualified_name": "myplugin:cse", "message": data["clashes"][0]["message"]}]
    assert {p["distribution"]: p["status"] for p in data["plugins"]}["dlvm-opt"] == "ok"
    assert "myplugin:cse" in dlvm(tmp_path, "plugins").stdout

    mine = dlvm(tmp_path, "opt", str(double), "-p", "myplugin:cse", "--stats")
    assert mine.returncode == 0, mine.stderr
    assert "my cse ran" in mine.stderr
    theirs = dlvm(tmp_path, "opt", str(double), "-p", "cse,opt:cse", "--stats")
    assert theirs.returncode == 0, theirs.stderr
    assert "my cse ran" not in theirs.stderr
    assert dlvm(tmp_path, "opt", str(double), "-p", "O2").returncode == 0  # dlvm-opt's own use


def test_time_passes_and_stats_name_a_shadowed_pass_by_its_qualified_name(
        tmp_path: Path, double: Path) -> None:
    install(tmp_path, "aaa-cse", "tropical", CSE_PLUGIN)
    result = dlvm(tmp_path, "opt", str(double), "-p", "cse,tropical:cse,opt:cse", "--stats",
                  "--time-passes", "--print-after-all")
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.endswith("changed")] == [
        "cse: unchanged", "tropical:cse: unchanged", "cse: unchanged"]
    assert re.search(r"│ tropical:cse +│", result.stderr)
    assert "IR Dump After tropical:cse (unchanged)" in result.stderr


# ------------------------------------------------------------------ notes and strict mode


UNKNOWN_OPCODE = """\
func @f: (f32) -> f32 {
'entry(%x: f32):
    %y = frobnicate %x: f32
    return %y: f32
}
"""
BROKEN_NOTE = ("dlvm: note: plugin 'broken' (dlvm-broken) failed to load: RuntimeError: "
               "kaboom [not markup]; see 'dlvm plugins'")


@pytest.fixture
def broken_registry(fresh_registry: None) -> None:
    """dlvm-ir's built-ins and one plugin that failed, as the process-wide registry."""
    reg = make_registry(autoload=False)
    reg.add_plugin(BrokenPlugin(), PluginInfo("broken", "dlvm-broken", "9.9"))
    set_registry(reg)


@pytest.mark.usefixtures("broken_registry")
def test_an_unknown_instruction_notes_failed_plugins(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "f.dl"
    path.write_text(UNKNOWN_OPCODE)
    result = invoke("verify", str(path))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == f"{path}:3:10: error: unknown instruction 'frobnicate'"
    assert lines[-1] == BROKEN_NOTE


@pytest.mark.usefixtures("broken_registry")
def test_an_unknown_target_notes_failed_plugins(invoke: Invoke, double: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--target", "mystery")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "dlvm: error: unknown target 'mystery'; known: interp", BROKEN_NOTE]


@pytest.mark.usefixtures("broken_registry")
@pytest.mark.parametrize(("suffix", "package"), [(".tel", "dlvm-tel"), (".onnx", "dlvm-onnx"),
                                                 (".py", "dlvm-nnkit")])
def test_a_file_whose_front_end_is_missing_names_its_package(
        invoke: Invoke, tmp_path: Path, suffix: str, package: str) -> None:
    path = tmp_path / f"model{suffix}"
    path.write_text('print("a model")\n')
    result = invoke("verify", str(path))
    assert result.exit_code == 1
    error, note = result.stderr.splitlines()
    assert error.startswith(f"dlvm: error: cannot read '{path}': {suffix} files are read by ")
    assert error.endswith(f"(it is provided by {package}: pip install {package})")
    assert note == BROKEN_NOTE


FAILING_ON_IMPORT = 'raise RuntimeError("the plugin cannot start")'
# Strict mode stops at the first plugin that fails: block the one the integration tests
# install, so that the plugin under test is that one.
STRICT = {"DLVM_STRICT_PLUGINS": "1", "DLVM_DISABLE_PLUGINS": "dlvm-broken-plugin"}


def test_strict_plugins_shows_a_loading_error_with_its_traceback(tmp_path: Path,
                                                                 double: Path) -> None:
    install(tmp_path, "dlvm-failing", "failing", FAILING_ON_IMPORT)
    relaxed = dlvm(tmp_path, "verify", str(double))
    assert relaxed.returncode == 0, relaxed.stderr
    assert "Traceback" not in relaxed.stderr
    strict = dlvm(tmp_path, "verify", str(double), env=STRICT)
    assert strict.returncode == 1
    assert strict.stderr.startswith("Traceback (most recent call last):")
    assert "RuntimeError: the plugin cannot start\nraised while loading plugin 'failing' " \
        "(dlvm-failing) (DLVM_STRICT_PLUGINS=1)" in strict.stderr


def test_strict_plugins_shows_an_exit_on_import_as_an_error(tmp_path: Path,
                                                            double: Path) -> None:
    install(tmp_path, "dlvm-exiting", "exiting", "raise SystemExit(3)")
    strict = dlvm(tmp_path, "verify", str(double), env=STRICT)
    assert strict.returncode == 1
    assert "Traceback" in strict.stderr
    assert ("RegistryError: plugin 'exiting' (dlvm-exiting) failed to load: SystemExit: 3"
            in strict.stderr)


def test_strict_plugins_shows_a_failure_to_register_commands(tmp_path: Path,
                                                             double: Path) -> None:
    install(tmp_path, "dlvm-bad-commands", "bad-commands", """
        from dlvm.ir.plugin import hookimpl

        @hookimpl
        def register_commands(app):
            raise ValueError("no such option")
    """)
    strict = dlvm(tmp_path, "verify", str(double), env=STRICT)
    assert strict.returncode == 1
    assert "ValueError: no such option" in strict.stderr
    assert ("RegistryError: plugin 'bad-commands' (dlvm-bad-commands) failed to register "
            "commands: ValueError: no such option") in strict.stderr
