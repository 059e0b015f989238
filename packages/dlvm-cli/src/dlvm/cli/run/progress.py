"""What a run shows: a live display on a terminal, plain lines otherwise.

On a terminal, rich shows a spinner while the passes run and the module compiles, then two
bars: the epochs, and the batches of the current epoch. Targets that compile per call
signature (llvm-cpu, nvptx) compile on the first step, which takes most of a second per
function for a small model, so until that step returns the batch bar says "compiling" and
pulses instead of standing at 0; the evaluation says "evaluating" (its first call compiles
too). Each finished epoch's line is printed above the bars, so the history stays on screen.
Elsewhere (a pipe, a log file, CI) each epoch is one plain line and nothing else moves.
`--quiet` silences both; the metrics still go to the JSON-lines file.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console

COMPILING = "compiling"
EVALUATING = "evaluating"
BATCHES = "batches"


class Display(Protocol):
    """What the training loop tells the display (every engine's loop)."""

    def step(self, loss: float) -> None: ...

    def evaluating(self) -> None: ...

    def epoch(self, record: dict[str, Any]) -> None: ...


class Reporter:
    """Where a run's messages go: `fancy` (a terminal) draws with rich on `console`."""

    def __init__(self, quiet: bool = False, fancy: bool | None = None,
                 console: Console | None = None) -> None:
        self.quiet = quiet
        self.console = console
        if fancy is None:
            fancy = console.is_terminal if console is not None else sys.stdout.isatty()
        self.fancy = fancy

    def log(self, line: str) -> None:
        if self.quiet:
            return
        if self.console is not None:
            self.console.print(line, markup=False, highlight=False)
        else:
            print(line, flush=True)

    def rich_console(self) -> Console:
        from rich.console import Console

        if self.console is None:
            self.console = Console()
        return self.console

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner saying `text` on a terminal while the block runs; nothing elsewhere."""
        if self.quiet or not self.fancy:
            yield
            return
        with self.rich_console().status(text):
            yield

    @contextmanager
    def training(self, epochs: int, start: int, steps: int) -> Iterator[Display]:
        if self.quiet:
            yield _Silent()
        elif self.fancy:
            with _Bars(self.rich_console(), epochs, start, steps) as bars:
                yield bars
        else:
            yield _Lines(self, epochs)


def describe(record: dict[str, Any], epochs: int) -> str:
    """One epoch in a line: its number, loss, accuracy, learning rate, time, throughput."""
    parts = [f"epoch {record['epoch']}/{epochs}", f"loss {_number(record['loss'], '.4f')}"]
    if "accuracy" in record:
        parts.append(f"accuracy {_number(record['accuracy'], '.1%')}")
    if record.get("learning_rate") is not None:
        parts.append(f"lr {record['learning_rate']:.4g}")
    if record.get("seconds") is not None:
        parts.append(f"{record['seconds']:.3g} s")
    if record.get("examples_per_second"):
        parts.append(f"{record['examples_per_second']:,.0f} examples/s")
    return "  ".join(parts)


def _number(value: Any, spec: str) -> str:
    return "nan" if value is None else format(value, spec)


class _Silent:
    def step(self, loss: float) -> None:
        pass

    def evaluating(self) -> None:
        pass

    def epoch(self, record: dict[str, Any]) -> None:
        pass


class _Lines:
    """One plain line per epoch, for logs."""

    def __init__(self, reporter: Reporter, epochs: int) -> None:
        self.reporter, self.epochs = reporter, epochs

    def step(self, loss: float) -> None:
        pass

    def evaluating(self) -> None:
        pass

    def epoch(self, record: dict[str, Any]) -> None:
        self.reporter.log(describe(record, self.epochs))


class _Bars:
    """The epochs bar and the batches bar, with the finished epochs' lines above them."""

    def __init__(self, console: Console, epochs: int, start: int, steps: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description:<10}"),
                                 BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeRemainingColumn(),
                                 console=console)
        self.epochs, self.steps = epochs, steps
        self.epochs_task = self.progress.add_task("epochs", total=epochs, completed=start,
                                                  info="")
        # total=None: a pulsing bar, until the first step has compiled and returned
        self.batch_task = self.progress.add_task(COMPILING, total=None,
                                                 info="until the first step returns")
        self.compiled = False

    def __enter__(self) -> _Bars:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def step(self, loss: float) -> None:
        if not self.compiled:
            self.compiled = True
            self.progress.update(self.batch_task, description=BATCHES, total=self.steps,
                                 completed=0)
        self.progress.update(self.batch_task, advance=1, info=f"loss {loss:.4f}")

    def evaluating(self) -> None:
        self.progress.update(self.batch_task, description=EVALUATING)

    def epoch(self, record: dict[str, Any]) -> None:
        self.progress.console.print(describe(record, self.epochs), markup=False,
                                    highlight=False)
        self.progress.update(self.epochs_task, advance=1)
        if record["epoch"] >= self.epochs:  # the last: no batches to come
            self.progress.update(self.batch_task, visible=False)
        else:
            self.progress.reset(self.batch_task, description=BATCHES, total=self.steps,
                                info="")
