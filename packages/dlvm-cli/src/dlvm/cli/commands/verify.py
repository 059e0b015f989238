"""`dlvm verify FILE…`: parse and verify; report every problem in every file."""

from __future__ import annotations

from typing import Annotated

import typer

import dlvm.ir as ir
from dlvm.cli import errors
from dlvm.cli.inputs import load_module


def verify(
    files: Annotated[list[str], typer.Argument(
        metavar="FILE", help="The modules to check: .dl files or sources that installed "
        "front ends read (listed below); '-' reads DLVM IR text from stdin.")],
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print 'FILE: ok' for each valid file.")] = False,
) -> None:
    """Parse and verify modules; exit 1 if any is invalid, with all diagnostics on stderr."""
    results = [check(path, verbose) for path in files]  # check every file, not just the first
    if not all(results):
        raise typer.Exit(errors.EXIT_FAILURE)


def check(path: str, verbose: bool) -> bool:
    """Check one file, printing its diagnostics; True when it is valid."""
    try:
        load_module(path)
    except ir.DlvmError as e:
        errors.report(e)
        return False
    if verbose:
        typer.echo(f"{path}: ok")
    return True
