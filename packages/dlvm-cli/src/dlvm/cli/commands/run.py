"""`dlvm run PIPELINE.toml`: validate the whole file, compile, then emit, call and train.

A run that writes files gets a folder of its own (`dlvm.cli.run.runs`), recorded as it
starts and ends (`dlvm.cli.run.record`); `--resume` continues the latest run or the named one.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import dlvm.ir as ir
from dlvm.cli import errors
from dlvm.ir import files

if TYPE_CHECKING:
    from dlvm.cli.run.progress import Reporter
    from dlvm.cli.run.spec import RunSpec


def run(
    file: Annotated[str, typer.Argument(metavar="PIPELINE.toml", help="The pipeline file.")],
    overrides: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="Override a key, e.g. --set target.name=interp "
        "(repeatable; the value is read as TOML).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Validate and print the resolved pipeline and the run folder it "
        "would use; do nothing.")] = False,
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME", help="Name the run's folder (default: the time it starts); "
        "with --resume, the run to continue.")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the latest run (or the --name one) from its "
        "checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace the outputs of the run --name names (or files an "
        "earlier run of this pipeline wrote outside its run folder).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Run a pipeline: module, passes, target, and what to do (emit, call, train)."""
    from dlvm.cli.run.progress import Reporter
    from dlvm.cli.run.record import recorded
    from dlvm.cli.run.spec import SpecError, load_spec

    if resume and overwrite:
        raise ir.DlvmError("--resume continues a run and --overwrite starts it again: "
                           "give one of them")
    try:
        spec = load_spec(file, overrides or [], resume=resume, overwrite=overwrite, name=name,
                         dry_run=dry_run)
    except SpecError as e:
        for line in e.lines:
            errors.emit(line)
        for note in e.notes:
            errors.note(note)
        raise typer.Exit(errors.EXIT_FAILURE) from None
    if dry_run:
        typer.echo(json.dumps(spec.resolved, indent=2, default=str))
        return
    reporter = Reporter(quiet)
    command = command_line(file, overrides or [], name=name, resume=resume,
                           overwrite=overwrite, quiet=quiet)
    with errors.warnings_reported(), recorded(spec.run, spec.file, command, spec.resolved,
                                              spec.outputs) as record:
        for path in spec.outputs:
            files.remove_stale_temporary(path)  # a killed write's leftover
        if spec.run is not None:
            reporter.log(f"run folder: {shown(spec.run.path)}")
        execute(spec, reporter, resume, record.results if record is not None else {})


def command_line(file: str, overrides: list[str], **flags: Any) -> str:
    """The command as a user would type it again, for the run's record."""
    words = ["dlvm", "run", file]
    for item in overrides:
        words += ["--set", item]
    for flag, value in flags.items():
        if isinstance(value, str):
            words += [f"--{flag}", value]
        elif value:
            words.append(f"--{flag}")
    return shlex.join(words)


def shown(path: Path) -> str:
    """`path` relative to the current folder when it lies below it, else absolute."""
    try:
        return os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd()) else str(path)
    except (OSError, ValueError):
        return str(path)


def execute(spec: RunSpec, reporter: Reporter, resume: bool, results: dict[str, Any]) -> None:
    """The passes, then emit, train and call, in that order; `results` gathers what the
    run's record keeps (epochs, loss, accuracy)."""
    from dlvm.cli.run.actions import call, emit

    module = spec.module
    if spec.pipeline:
        with reporter.status("running the passes"):
            ir.run_passes(module, spec.pipeline)
    if spec.emit is not None:
        emit(module, spec.emit, reporter)
    if spec.call is None and spec.train is None:
        return
    with reporter.status(f"compiling for {spec.target}"):
        exe = ir.compile(module, spec.target, **spec.target_options)
    if spec.train is not None:
        train(exe, spec, reporter, resume, results)
    if spec.call is not None:
        call(exe, module, spec.call, reporter)


def train(exe: ir.Executable, spec: RunSpec, reporter: Reporter, resume: bool,
          results: dict[str, Any]) -> None:
    """Train, unless a resumed checkpoint is already at the last epoch."""
    from dlvm.cli.run.engines import TrainJob, make_engine

    t = spec.train
    assert t is not None
    if resume and t.start_epoch >= t.epochs:
        results["epochs"] = t.start_epoch
        errors.note(f"nothing to do: checkpoint is at epoch {t.start_epoch} of {t.epochs}")
        return
    engine = make_engine(t.distributed)
    result = engine.train(TrainJob(exe, spec.module, t, reporter, resume, spec.target,
                                   dict(spec.target_options)))
    results["epochs"] = result.epochs_done
    if result.loss is not None:
        results["loss"] = result.loss
    if result.accuracy is not None:
        results[t.metric] = result.accuracy
    if result.interrupted:
        where = (f"; last checkpoint: {t.checkpoint} (epoch {result.epochs_done})"
                 if t.checkpoint is not None else "")
        errors.note(f"interrupted after epoch {result.epochs_done}{where}; --resume "
                    "continues the run")
        raise typer.Exit(errors.EXIT_INTERRUPTED)
    if result.accuracy is not None:
        typer.echo(f"test {t.metric}: {100 * result.accuracy:.2f}%")
    elif result.loss is not None:
        typer.echo(f"final training loss: {result.loss:.4f}")
