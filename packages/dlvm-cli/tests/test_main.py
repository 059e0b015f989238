"""`main()`: plugin commands, error mapping, --debug, and the process-level behaviour."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

import dlvm.ir as ir
from dlvm.cli.main import main, make_app
from dlvm.ir.plugin import PluginInfo, hookimpl, make_registry, set_registry

Invoke = Callable[..., Any]


# ------------------------------------------------------------------ plugin commands


class GoodCommands:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        sub = typer.Typer()

        @sub.command()
        def hello() -> None:
            typer.echo("hello from a plugin")

        @sub.command()
        def fail() -> None:
            raise ir.DlvmError("plugin command failed")

        app.add_typer(sub, name="demo")


class BrokenCommands:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        app.command("half-registered")(lambda: None)
        raise ValueError("boom\nsecond line")


class ClashingCommands:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        app.command("opt")(lambda: typer.echo("hijacked"))


@pytest.fixture
def plugin_registry(fresh_registry: None) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(GoodCommands(), PluginInfo("good", "dlvm-good", "1.0"))
    reg.add_plugin(BrokenCommands(), PluginInfo("broken", "dlvm-broken", "1.0"))
    reg.add_plugin(ClashingCommands(), PluginInfo("clash", "dlvm-clash", "1.0"))
    set_registry(reg)


@pytest.mark.usefixtures("plugin_registry")
def test_plugin_commands(capsys: pytest.CaptureFixture[str], double: Path,
                         runner: CliRunner) -> None:
    app = make_app()
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith("dlvm: warning: plugin 'broken' (dlvm-broken) failed to "
                                  "register commands: ValueError: boom second line")
    assert "command 'opt' is already defined" in warnings[1]
    assert "'clash' (dlvm-clash)" in warnings[1]

    assert runner.invoke(app, ["demo", "hello"]).stdout == "hello from a plugin\n"
    failed = runner.invoke(app, ["demo", "fail"])
    assert failed.exit_code == 1
    assert failed.stderr == "dlvm: error: plugin command failed\n"
    assert runner.invoke(app, ["half-registered"]).exit_code == 2  # rolled back
    opt = runner.invoke(app, ["opt", str(double)])  # the core command survives
    assert opt.exit_code == 0
    assert "func @f" in opt.stdout


class ExitingCommands:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        app.command("half-registered")(lambda: None)
        raise SystemExit(4)


class MisnamedArgument:
    @hookimpl
    def register_commands(self, application: typer.Typer) -> None:
        raise AssertionError("never called: the hook passes 'app'")


@pytest.mark.usefixtures("fresh_registry")
def test_a_command_hook_that_exits_or_does_not_match_is_skipped(
        capsys: pytest.CaptureFixture[str], runner: CliRunner) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(MisnamedArgument(), PluginInfo("misnamed", "dlvm-misnamed", "1.0"))
    reg.add_plugin(ExitingCommands(), PluginInfo("exiting", "dlvm-exiting", "1.0"))
    reg.add_plugin(GoodCommands(), PluginInfo("good", "dlvm-good", "1.0"))
    set_registry(reg)
    app = make_app()
    assert capsys.readouterr().err.splitlines() == [
        "dlvm: warning: plugin 'misnamed' (dlvm-misnamed) failed to register commands: "
        "PluginValidationError: unknown arguments application (the hook passes only: app); "
        "skipped",
        "dlvm: warning: plugin 'exiting' (dlvm-exiting) failed to register commands: "
        "SystemExit: 4; skipped"]
    assert runner.invoke(app, ["demo", "hello"]).stdout == "hello from a plugin\n"
    assert runner.invoke(app, ["half-registered"]).exit_code == 2  # rolled back
    assert [(p.name, p.status) for p in reg.plugins[-3:]] == [
        ("misnamed", "failed"), ("exiting", "failed"), ("good", "ok")]


@pytest.mark.usefixtures("fresh_registry")
def test_make_app_twice_in_one_process() -> None:
    set_registry(make_registry(autoload=False))
    make_app()
    make_app()  # the hookspec is added once


# ------------------------------------------------------------------ error mapping


def run_main(args: list[str]) -> int | str | None:
    with pytest.raises(SystemExit) as info:
        main(args)
    return info.value.code


def test_main_exit_codes(double: Path, two_errors: Path) -> None:
    assert run_main(["verify", str(double)]) == 0
    assert run_main(["verify", str(two_errors)]) == 1
    assert run_main(["opt", "--no-such-option", str(double)]) == 2


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch, double: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(ir, "run_passes", broken)
    monkeypatch.delenv("DLVM_DEBUG", raising=False)
    assert run_main(["opt", str(double)]) == 1
    err = capsys.readouterr().err
    assert err == ("dlvm: internal error: ZeroDivisionError: oops "
                   "(re-run with --debug for a traceback)\n")


def test_debug_reraises(monkeypatch: pytest.MonkeyPatch, double: Path) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(ir, "run_passes", broken)
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "opt", str(double)])
    monkeypatch.setenv("DLVM_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["opt", str(double)])


def test_debug_shows_dlvm_errors_too(double: Path) -> None:
    with pytest.raises(ir.PipelineError):
        main(["--debug", "opt", str(double), "-p", "no-such-pass"])


def test_keyboard_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, double: Path) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(ir, "run_passes", interrupted)
    assert run_main(["opt", str(double)]) == 130


def test_pass_error_exits_1(monkeypatch: pytest.MonkeyPatch, double: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    def failing(*args: Any, **kwargs: Any) -> Any:
        raise ir.PassError("pass 'x' produced malformed IR")

    monkeypatch.setattr(ir, "run_passes", failing)
    assert run_main(["opt", str(double)]) == 1
    assert capsys.readouterr().err == "dlvm: error: pass 'x' produced malformed IR\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--version"]) == 0
    assert "dlvm-cli" in capsys.readouterr().out


def dist_info(root: Path, name: str, version: str) -> None:
    """A distribution as `importlib.metadata` finds it on the path: just its metadata."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_version_lists_every_installed_dlvm_distribution_one_per_line(
        invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import importlib.metadata

    dist_info(tmp_path, "DLVM_Extra.Plugin", "2.5")  # spelled as PEP 503 allows
    dist_info(tmp_path, "dlvm", "9.9")  # the unrelated PyPI package
    dist_info(tmp_path, "notdlvm-x", "1.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines == sorted(lines)
    for dist in ("dlvm-cli", "dlvm-ir"):
        assert f"{dist} {importlib.metadata.version(dist)}" in lines
    assert "dlvm-extra-plugin 2.5" in lines
    assert all(line.startswith("dlvm-") for line in lines)
    assert len(lines) > 2  # not just the two of the command itself


def test_version_from_a_source_tree_without_distributions_says_so(
        invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter(()))
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == "no dlvm-* distribution is installed\n"


# ------------------------------------------------------------------ --debug anywhere


def break_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(ir, "run_passes", broken)
    monkeypatch.delenv("DLVM_DEBUG", raising=False)


@pytest.mark.parametrize("args", [
    ["--debug", "opt", "{file}"],
    ["opt", "--debug", "{file}"],
    ["opt", "{file}", "--debug"],
    ["opt", "{file}", "-p", "cse", "--debug"],
], ids=["before", "after-command", "last", "between-options"])
def test_debug_is_accepted_anywhere_before_a_double_dash(
        invoke: Invoke, monkeypatch: pytest.MonkeyPatch, double: Path, args: list[str]) -> None:
    break_passes(monkeypatch)
    result = invoke(*(a.format(file=double) for a in args))
    assert isinstance(result.exception, ZeroDivisionError)  # re-raised: a traceback


def test_without_debug_the_internal_error_says_how_to_get_a_traceback(
        invoke: Invoke, monkeypatch: pytest.MonkeyPatch, double: Path) -> None:
    break_passes(monkeypatch)
    result = invoke("opt", str(double))
    assert result.exit_code == 1
    assert result.stderr == ("dlvm: internal error: ZeroDivisionError: oops "
                             "(re-run with --debug for a traceback)\n")


def test_main_reraises_for_a_debug_after_the_subcommand(
        monkeypatch: pytest.MonkeyPatch, double: Path) -> None:
    break_passes(monkeypatch)
    with pytest.raises(ZeroDivisionError):
        main(["opt", str(double), "--debug"])


def test_after_a_double_dash_debug_is_an_argument(invoke: Invoke,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DLVM_DEBUG", raising=False)
    result = invoke("verify", "--", "--debug")
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error: cannot read module '--debug'")


class CommandsThatBreak:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        @app.command("boom")
        def boom(flag: bool = False) -> None:
            raise ZeroDivisionError("plugin bug")

        @app.command("own-debug")
        def own_debug(debug: Annotated[bool, typer.Option("--debug")] = False) -> None:
            typer.echo(f"the command's own --debug: {debug}")

        sub = typer.Typer()

        @sub.command("inner")
        def inner() -> None:
            raise ZeroDivisionError("plugin bug inside a group")

        app.add_typer(sub, name="group")


@pytest.fixture
def breaking_commands(fresh_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DLVM_DEBUG", raising=False)
    reg = make_registry(autoload=False)
    reg.add_plugin(CommandsThatBreak(), PluginInfo("breaks", "dlvm-breaks", "1.0"))
    set_registry(reg)


@pytest.mark.usefixtures("breaking_commands")
@pytest.mark.parametrize("args", [["boom"], ["group", "inner"]])
def test_plugin_commands_accept_debug_anywhere_too(invoke: Invoke, args: list[str]) -> None:
    plain = invoke(*args)
    assert plain.exit_code == 1
    assert "(re-run with --debug for a traceback)" in plain.stderr
    for where in range(1, len(args) + 1):
        debugged = invoke(*args[:where], "--debug", *args[where:])
        assert isinstance(debugged.exception, ZeroDivisionError), (where, debugged.output)


@pytest.mark.usefixtures("breaking_commands")
def test_a_plugin_command_keeps_its_own_debug_option(invoke: Invoke) -> None:
    result = invoke("own-debug", "--debug")
    assert result.exit_code == 0, result.output
    assert result.stdout == "the command's own --debug: True\n"


BUGGY_PLUGIN = """\
from dlvm.ir.plugin import hookimpl


@hookimpl
def register_commands(app):
    @app.command("buggy")
    def buggy():
        raise ZeroDivisionError("plugin bug")
"""


def test_the_dlvm_script_follows_its_own_debug_hint(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("dlvm")
    if not script.exists():
        pytest.skip("the dlvm script is not installed next to this Python")
    (tmp_path / "buggy_plugin.py").write_text(BUGGY_PLUGIN)
    info = tmp_path / "dlvm_buggy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dlvm-buggy\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dlvm.plugins]\nbuggy = buggy_plugin\n")
    env = {k: v for k, v in os.environ.items() if k != "DLVM_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), *args], capture_output=True, text=True, env=env,
                              timeout=120, check=False)

    plain = run("buggy")
    assert plain.returncode == 1
    assert plain.stderr == ("dlvm: internal error: ZeroDivisionError: plugin bug "
                            "(re-run with --debug for a traceback)\n")
    rerun = run("buggy", "--debug")  # the hint, followed by appending it
    assert rerun.returncode == 1
    assert rerun.stderr.startswith("Traceback (most recent call last):")
    assert rerun.stderr.rstrip().endswith("ZeroDivisionError: plugin bug")


# ------------------------------------------------------------------ unknown commands


class FailsToLoad:
    @hookimpl
    def register_passes(self, register: Callable[..., None]) -> None:
        raise RuntimeError("cannot load")


class CommandsFail:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        raise RuntimeError("no commands")


@pytest.mark.usefixtures("fresh_registry")
def test_an_unknown_command_is_followed_by_notes_on_failed_plugins(
        capsys: pytest.CaptureFixture[str], runner: CliRunner) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(FailsToLoad(), PluginInfo("loadfail", "dlvm-loadfail", "1.0"))
    reg.add_plugin(CommandsFail(), PluginInfo("cmdfail", "dlvm-cmdfail", "1.0"))
    set_registry(reg)
    app = make_app()
    capsys.readouterr()  # the warning about cmdfail's commands
    result = runner.invoke(app, ["frob"])
    assert result.exit_code == 2
    assert "No such command 'frob'" in result.stderr
    assert result.stderr.splitlines()[-2:] == [
        "dlvm: note: plugin 'loadfail' (dlvm-loadfail) failed to load: RuntimeError: "
        "cannot load; see 'dlvm plugins'",
        "dlvm: note: plugin 'cmdfail' (dlvm-cmdfail) failed to load: register_commands: "
        "RuntimeError: no commands; see 'dlvm plugins'"]


@pytest.mark.usefixtures("fresh_registry")
def test_an_unknown_command_without_failed_plugins_has_no_note(invoke: Invoke) -> None:
    set_registry(make_registry(autoload=False))
    result = invoke("frob")
    assert result.exit_code == 2
    assert "No such command 'frob'" in result.stderr
    assert "note:" not in result.stderr


# ------------------------------------------------------------------ top-level plugin commands


def top_level(name: str, text: str) -> type:
    """A plugin class whose `register_commands` adds one plain command `name`."""

    class TopLevel:
        @hookimpl
        def register_commands(self, app: typer.Typer) -> None:
            app.command(name)(lambda: typer.echo(text))

    return TopLevel


class GroupNamedHello:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        sub = typer.Typer()
        sub.command("inner")(lambda: None)
        app.add_typer(sub, name="hello")


@pytest.mark.usefixtures("fresh_registry")
def test_a_plugin_may_add_a_top_level_command(runner: CliRunner) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(top_level("hello", "hello, top level")(), PluginInfo("hi", "dlvm-hi", "1.0"))
    set_registry(reg)
    app = make_app()
    assert runner.invoke(app, ["hello"]).stdout == "hello, top level\n"
    assert "hello" in runner.invoke(app, ["--help"]).stdout
    assert [p.status for p in reg.plugins if p.name == "hi"] == ["ok"]


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize("name", ["verify", "compile", "plugins"])
def test_a_top_level_plugin_command_may_not_take_a_core_name(
        capsys: pytest.CaptureFixture[str], runner: CliRunner, double: Path, name: str) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(top_level(name, "hijacked")(), PluginInfo("thief", "dlvm-thief", "1.0"))
    set_registry(reg)
    app = make_app()
    assert capsys.readouterr().err == (
        f"dlvm: warning: plugin 'thief' (dlvm-thief) failed to register commands: "
        f"RegistryError: command '{name}' is already defined; skipped\n")
    assert [p.status for p in reg.plugins if p.name == "thief"] == ["failed"]
    core = runner.invoke(app, [name, "--help"])
    assert core.exit_code == 0
    assert "hijacked" not in core.stdout


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize("first", [top_level("hello", "first"), GroupNamedHello],
                         ids=["command", "sub-app"])
def test_a_top_level_plugin_command_may_not_take_another_plugins_name(
        capsys: pytest.CaptureFixture[str], runner: CliRunner, first: type) -> None:
    reg = make_registry(autoload=False)
    reg.add_plugin(first(), PluginInfo("first", "dlvm-first", "1.0"))
    reg.add_plugin(top_level("hello", "second")(), PluginInfo("second", "dlvm-second", "1.0"))
    set_registry(reg)
    app = make_app()
    assert capsys.readouterr().err == (
        "dlvm: warning: plugin 'second' (dlvm-second) failed to register commands: "
        "RegistryError: command 'hello' is already defined; skipped\n")
    assert {p.name: p.status for p in reg.plugins if p.name in ("first", "second")} == {
        "first": "ok", "second": "failed"}
    assert "second" not in runner.invoke(app, ["hello"]).stdout


# ------------------------------------------------------------------ as a process


def dlvm(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DLVM_DEBUG"}
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False, **kwargs)


def test_python_dash_m(double: Path, two_errors: Path) -> None:
    ok = dlvm("verify", "-v", str(double))
    assert ok.returncode == 0
    assert ok.stdout == f"{double}: ok\n"
    bad = dlvm("verify", str(two_errors))
    assert bad.returncode == 1
    assert f"{two_errors}:4:10: error:" in bad.stderr


def test_no_traceback_on_binary_garbage(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(os.urandom(4096) + b"\xff\xfe")
    for command in (["verify"], ["opt"], ["exec", "-f", "f"]):
        proc = dlvm(*command, str(garbage))
        assert proc.returncode == 1
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("dlvm: error:")


def test_closed_stdout_is_quiet(double: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dlvm.cli", "opt", str(double)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()  # like `| head -0`
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) in (0, 1)
    assert "Traceback" not in err
    assert "BrokenPipe" not in err


def test_importing_main_is_cheap() -> None:
    code = ("import sys, dlvm.cli.main\n"
            "heavy = [m for m in ('typer', 'rich', 'numpy', 'dlvm.ir') if m in sys.modules]\n"
            "print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert proc.stdout.strip() == ""


def test_dlvm_is_a_namespace_package() -> None:
    import dlvm

    assert getattr(dlvm, "__file__", None) is None
    import dlvm.cli.plugin  # the entry point's module imports on its own
