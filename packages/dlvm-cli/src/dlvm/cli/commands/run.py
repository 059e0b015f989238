"""`dlvm run PIPELINE.toml`: validate the whole file, compile, then emit, call and train."""

from __future__ import annotations

import json
from typing import Annotated

import typer

import dlvm.ir as ir
from dlvm.cli import errors


def run(
    file: Annotated[str, typer.Argument(metavar="PIPELINE.toml", help="The pipeline file.")],
    overrides: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="Override a key, e.g. --set target.name=interp "
        "(repeatable; the value is read as TOML).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Validate and print the resolved pipeline; do nothing.")] = False,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue training from the checkpoint.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Run a pipeline: module, passes, target, and what to do (emit, call, train)."""
    from dlvm.cli.run.actions import call, emit
    from dlvm.cli.run.progress import Reporter
    from dlvm.cli.run.spec import SpecError, load_spec
    from dlvm.cli.run.train import train

    try:
        spec = load_spec(file, overrides or [], resume)
    except SpecError as e:
        for line in e.lines:
            errors.emit(line)
        raise typer.Exit(errors.EXIT_FAILURE) from None
    if dry_run:
        typer.echo(json.dumps(spec.resolved, indent=2, default=str))
        return
    reporter = Reporter(quiet)
    module = spec.module
    if spec.pipeline:
        ir.run_passes(module, spec.pipeline)
    if spec.emit is not None:
        emit(module, spec.emit, reporter)
    if spec.call is None and spec.train is None:
        return
    exe = ir.compile(module, spec.target, **spec.target_options)
    if spec.train is not None and spec.data is not None:
        result = train(exe, module, spec.train, spec.data, reporter, resume)
        if result.interrupted:
            where = (f"; last checkpoint: {spec.train.checkpoint} (epoch {result.epochs_done})"
                     if spec.train.checkpoint is not None else "")
            errors.note(f"interrupted after epoch {result.epochs_done}{where}")
            raise typer.Exit(errors.EXIT_INTERRUPTED)
        if result.accuracy is not None:
            typer.echo(f"test {spec.train.metric}: {100 * result.accuracy:.2f}%")
        elif result.loss is not None:
            typer.echo(f"final training loss: {result.loss:.4f}")
    if spec.call is not None:
        call(exe, module, spec.call, reporter)
