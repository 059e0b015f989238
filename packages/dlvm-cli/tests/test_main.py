"""`main()`: plugin commands, error mapping, --debug, and the process-level behaviour."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
