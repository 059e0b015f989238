"""`--help`: flags without a type placeholder, and the files the module commands take,
for core and plugin commands alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
import typer

from dlvm.ir.plugin import PluginInfo, RegisterFrontend, hookimpl, make_registry, set_registry

Invoke = Callable[..., Any]

CORE_HELP = [["--help"], ["verify", "--help"], ["opt", "--help"], ["compile", "--help"],
             ["exec", "--help"], ["run", "--help"], ["plugins", "--help"]]
MODULE_COMMANDS = ["verify", "opt", "compile", "exec"]


class ToyPlugin:
    """A front end for `.toy` files and commands with flags, top level and in a sub-app."""

    @hookimpl
    def register_frontends(self, register: RegisterFrontend) -> None:
        register("toy", "toy_module:load", "toy models", suffixes=(".toy", ".toys"))

    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        @app.command("toy-top")
        def top(fast: Annotated[bool, typer.Option("--fast", help="Go fast.")] = False,
                level: Annotated[int, typer.Option("--level", metavar="N")] = 1) -> None:
            """A top-level command."""

        sub = typer.Typer(help="Toy commands.")

        @sub.command("inner")
        def inner(loud: Annotated[bool, typer.Option("--loud/--quiet")] = False) -> None:
            """A command of a sub-app."""

        app.add_typer(sub, name="toys")


@pytest.fixture
def toy_registry(fresh_registry: None) -> Iterator[None]:
    reg = make_registry(autoload=False)
    reg.add_plugin(ToyPlugin(), PluginInfo("toy", "dlvm-toy", "1.0"))
    set_registry(reg)
    yield


@pytest.mark.parametrize("args", CORE_HELP, ids=lambda a: " ".join(a))
def test_flags_show_no_bool_placeholder(invoke: Invoke, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert "--help" in result.stdout


def test_options_that_take_a_value_keep_their_placeholder(invoke: Invoke) -> None:
    result = invoke("run", "--help")
    assert "--dry-run" in result.stdout
    assert "KEY=VALUE" in result.stdout


@pytest.mark.usefixtures("toy_registry")
@pytest.mark.parametrize("args", [["toy-top", "--help"], ["toys", "--help"],
                                  ["toys", "inner", "--help"]], ids=lambda a: " ".join(a))
def test_plugin_commands_show_flags_without_placeholder_and_accept_debug(
        invoke: Invoke, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert "--debug" in result.stdout


@pytest.mark.usefixtures("toy_registry")
def test_a_plugin_option_with_a_value_keeps_its_metavar(invoke: Invoke) -> None:
    assert "N" in invoke("toy-top", "--help").stdout.split("--level")[1].split("\n")[0]


@pytest.mark.parametrize("command", MODULE_COMMANDS)
def test_every_command_documents_debug(invoke: Invoke, command: str) -> None:
    assert "--debug" in invoke(command, "--help").stdout


@pytest.mark.usefixtures("toy_registry")
@pytest.mark.parametrize("command", MODULE_COMMANDS)
def test_module_commands_list_the_suffixes_of_the_installed_front_ends(
        invoke: Invoke, command: str) -> None:
    text = " ".join(invoke(command, "--help").stdout.split())  # unwrapped
    assert "IR file" not in text
    assert ".dl (dl, dlvm-ir)" in text
    assert ".toy (toy, dlvm-toy), .toys (toy, dlvm-toy)" in text
    assert "'-' reads DLVM IR text from stdin" in text


def test_without_front_ends_the_help_says_files_are_dlvm_ir() -> None:
    from dlvm.cli.app import module_inputs_help

    reg = make_registry(autoload=False)
    reg.entries["frontend"].clear()
    assert module_inputs_help(reg) == ("FILE is a module in DLVM IR text; '-' reads DLVM IR "
                                       "text from stdin.")
