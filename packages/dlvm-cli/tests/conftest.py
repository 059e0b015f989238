"""Shared fixtures: a CliRunner over the full app, and small IR files on disk."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dlvm.cli.main import make_app
from dlvm.ir.plugin import set_registry

DOUBLE = """\
func @f: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = add %x: <2 x f32>, %x: <2 x f32>
    return %y: <2 x f32>
}
"""

# Two independent errors: an unknown instruction and an undefined value.
TWO_ERRORS = """\
func @f: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = add %x: <2 x f32>, %z: <2 x f32>
    %w = frob %x: <2 x f32>
    return %y: <2 x f32>
}
"""


def make_runner() -> CliRunner:
    """A runner that keeps stderr apart (older click needs mix_stderr=False for that)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@pytest.fixture
def runner() -> CliRunner:
    return make_runner()


@pytest.fixture
def invoke(runner: CliRunner) -> Iterator[Callable[..., Any]]:
    """Run `dlvm ARGS…` in-process; returns the click Result (exit_code, stdout, stderr)."""

    def run(*args: str, input: str | bytes | None = None) -> Any:
        return runner.invoke(make_app(), list(args), input=input)

    yield run


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Tests that install their own registry get the process-wide one back afterwards."""
    yield
    set_registry(None)


@pytest.fixture
def double(tmp_path: Path) -> Path:
    path = tmp_path / "double.dl"
    path.write_text(DOUBLE)
    return path


@pytest.fixture
def two_errors(tmp_path: Path) -> Path:
    path = tmp_path / "bad.dl"
    path.write_text(TWO_ERRORS)
    return path
