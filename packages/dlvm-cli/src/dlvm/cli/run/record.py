"""A run's record, as experiment trackers keep one: what ran, with what, and how it ended.

Each run folder holds `pipeline.json` (the resolved pipeline, what `--dry-run` prints) and
`run.json`: the status (`started`, then `finished`, `interrupted` or `failed`), the times,
the command line, the installed dlvm-* versions, the files the run writes and its results.
Both are rewritten atomically, so a reader never sees half a record; a run killed outright
stays `started`. A resumed run keeps its record and moves the earlier attempt to `history`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

import typer

from dlvm.cli import errors

from .files import save_text
from .runs import PIPELINE_RECORD, RUN_RECORD, RunFolder, claim, read_record

STARTED, FINISHED, INTERRUPTED, FAILED = "started", "finished", "interrupted", "failed"
ATTEMPT_KEYS = ("status", "started", "ended", "command", "directory", "results", "error")


def now() -> str:
    """The local time with its offset, to the second (ISO 8601)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def dlvm_versions() -> dict[str, str]:
    """Every installed dlvm-* distribution and its version."""
    found: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("dlvm-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str) + "\n"


class RunRecord:
    """`run.json` of one run, kept in memory and saved at each change of status."""

    def __init__(self, run: RunFolder, data: dict[str, Any]) -> None:
        self.run = run
        self.data = data
        self.results: dict[str, Any] = {}

    @classmethod
    def begin(cls, run: RunFolder, pipeline: Path, command: str, resolved: dict[str, Any],
              outputs: list[Path]) -> RunRecord:
        """Claim the run's folder, write the resolved pipeline and a `started` record."""
        claim(run)
        earlier = read_record(run.path) if run.reused else None
        data: dict[str, Any] = {"name": run.name, "pipeline": str(pipeline.resolve())}
        history: list[dict[str, Any]] = []
        if earlier is not None:
            history = [h for h in earlier.get("history", []) if isinstance(h, dict)]
            history.append({k: earlier[k] for k in ATTEMPT_KEYS if k in earlier})
        data.update({"status": STARTED, "started": now(), "ended": None, "command": command,
                     "directory": os.getcwd(), "versions": dlvm_versions(),
                     "outputs": sorted({str(p.resolve()) for p in outputs}
                                       | set(_listed(earlier))),
                     "history": history})
        save_text(run.path / PIPELINE_RECORD, _json(resolved), what="run record")
        record = cls(run, data)
        record.save()
        return record

    def end(self, status: str, error: str | None = None) -> None:
        self.data.update(status=status, ended=now(), results=self.results)
        if error:
            self.data["error"] = error
        else:
            self.data.pop("error", None)
        self.save()

    def save(self) -> None:
        save_text(self.run.path / RUN_RECORD, _json(self.data), what="run record")


def _listed(record: dict[str, Any] | None) -> list[str]:
    outputs = record.get("outputs") if record is not None else None
    return [str(p) for p in outputs] if isinstance(outputs, list) else []


@contextmanager
def recorded(run: RunFolder | None, pipeline: Path, command: str, resolved: dict[str, Any],
             outputs: list[Path]) -> Iterator[RunRecord | None]:
    """Record the run around its work: `started`, then how it ended (the exception, if any,
    goes on unchanged). Nothing is recorded for a pipeline that writes no files."""
    if run is None:
        yield None
        return
    record = RunRecord.begin(run, pipeline, command, resolved, outputs)
    try:
        yield record
    except KeyboardInterrupt:
        _end_quietly(record, INTERRUPTED)
        raise
    except typer.Exit as e:
        _end_quietly(record, FINISHED if e.exit_code == 0 else
                     INTERRUPTED if e.exit_code == errors.EXIT_INTERRUPTED else FAILED)
        raise
    except BaseException as e:
        _end_quietly(record, FAILED, _first_line(e))
        raise
    else:
        record.end(FINISHED)


def _end_quietly(record: RunRecord, status: str, error: str | None = None) -> None:
    """Record the end of a run that is failing already: a record that cannot be written
    is a note, never a second error hiding the first."""
    try:
        record.end(status, error)
    except Exception as e:
        errors.note(f"the run record was not updated: {e}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
