"""What a run shows: a rich progress bar on a terminal, plain log lines otherwise.

`--quiet` silences both; metrics still go to the JSON-lines file.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Reporter:
    def __init__(self, quiet: bool = False, fancy: bool | None = None) -> None:
        self.quiet = quiet
        self.fancy = sys.stdout.isatty() if fancy is None else fancy

    def log(self, line: str) -> None:
        if not self.quiet:
            print(line, flush=True)

    @contextmanager
    def training(self, epochs: int, start: int, steps: int) -> Iterator[Any]:
        if self.quiet:
            yield _Silent()
        elif self.fancy:
            with _Bar(epochs, start, steps) as bar:
                yield bar
        else:
            yield _Lines(self, epochs)


def describe(record: dict[str, Any], epochs: int) -> str:
    parts = [f"epoch {record['epoch']}/{epochs}", f"loss {record['loss']:.4f}"]
    if "accuracy" in record:
        parts.append(f"accuracy {100 * record['accuracy']:.1f}%")
    if record.get("examples_per_second"):
        parts.append(f"{record['examples_per_second']:,.0f} examples/s")
    return "  ".join(parts)


class _Silent:
    def step(self, loss: float) -> None:
        pass

    def epoch(self, record: dict[str, Any]) -> None:
        pass


class _Lines:
    def __init__(self, reporter: Reporter, epochs: int) -> None:
        self.reporter, self.epochs = reporter, epochs

    def step(self, loss: float) -> None:
        pass

    def epoch(self, record: dict[str, Any]) -> None:
        self.reporter.log(describe(record, self.epochs))


class _Bar:
    """Two bars: epochs, and batches of the current epoch with the running loss."""

    def __init__(self, epochs: int, start: int, steps: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                                 TimeRemainingColumn())
        self.epochs_task = self.progress.add_task("epochs", total=epochs, completed=start,
                                                  info="")
        self.batch_task = self.progress.add_task("batches", total=steps, info="")
        self.epochs = epochs

    def __enter__(self) -> _Bar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def step(self, loss: float) -> None:
        self.progress.update(self.batch_task, advance=1, info=f"loss {loss:.4f}")

    def epoch(self, record: dict[str, Any]) -> None:
        self.progress.update(self.epochs_task, advance=1, info=describe(record, self.epochs))
        self.progress.reset(self.batch_task)
