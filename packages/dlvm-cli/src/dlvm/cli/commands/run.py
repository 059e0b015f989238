"""`dlvm run PIPELINE.toml`: validate the whole file, compile, then emit, call and train."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

import dlvm.ir as ir
from dlvm.cli import errors

if TYPE_CHECKING:
    from dlvm.cli.run.progress import Reporter
    from dlvm.cli.run.spec import RunSpec


def run(
    file: Annotated[str, typer.Argument(metavar="PIPELINE.toml", help="The pipeline file.")],
    overrides: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="Override a key, e.g. --set target.name=interp "
        "(repeatable; the value is read as TOML).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Validate and print the resolved pipeline; do nothing.")] = False,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue training from the checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Start training again, replacing an earlier run's checkpoint "
        "and metrics.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Run a pipeline: module, passes, target, and what to do (emit, call, train)."""
    from dlvm.cli.run.files import remove_stale_temporary
    from dlvm.cli.run.progress import Reporter
    from dlvm.cli.run.spec import SpecError, load_spec

    if resume and overwrite:
        raise ir.DlvmError("--resume continues a run and --overwrite starts it again: "
                           "give one of them")
    try:
        spec = load_spec(file, overrides or [], resume=resume, overwrite=overwrite)
    except SpecError as e:
        for line in e.lines:
            errors.emit(line)
        raise typer.Exit(errors.EXIT_FAILURE) from None
    if dry_run:
        typer.echo(json.dumps(spec.resolved, indent=2, default=str))
        return
    for path in spec.outputs:
        remove_stale_temporary(path)  # a killed write's leftover
    with errors.warnings_reported():
        execute(spec, Reporter(quiet), resume)


def execute(spec: RunSpec, reporter: Reporter, resume: bool) -> None:
    """The passes, then emit, train and call, in that order."""
    from dlvm.cli.run.actions import call, emit

    module = spec.module
    if spec.pipeline:
        ir.run_passes(module, spec.pipeline)
    if spec.emit is not None:
        emit(module, spec.emit, reporter)
    if spec.call is None and spec.train is None:
        return
    exe = ir.compile(module, spec.target, **spec.target_options)
    if spec.train is not None:
        train(exe, spec, reporter, resume)
    if spec.call is not None:
        call(exe, module, spec.call, reporter)


def train(exe: ir.Executable, spec: RunSpec, reporter: Reporter, resume: bool) -> None:
    """Train, unless a resumed checkpoint is already at the last epoch."""
    from dlvm.cli.run.engines import TrainJob, make_engine

    t = spec.train
    assert t is not None
    if resume and t.start_epoch >= t.epochs:
        errors.note(f"nothing to do: checkpoint is at epoch {t.start_epoch} of {t.epochs}")
        return
    engine = make_engine(t.distributed)
    result = engine.train(TrainJob(exe, spec.module, t, reporter, resume, spec.target,
                                   dict(spec.target_options)))
    if result.interrupted:
        where = (f"; last checkpoint: {t.checkpoint} (epoch {result.epochs_done})"
                 if t.checkpoint is not None else "")
        errors.note(f"interrupted after epoch {result.epochs_done}{where}")
        raise typer.Exit(errors.EXIT_INTERRUPTED)
    if result.accuracy is not None:
        typer.echo(f"test {t.metric}: {100 * result.accuracy:.2f}%")
    elif result.loss is not None:
        typer.echo(f"final training loss: {result.loss:.4f}")
