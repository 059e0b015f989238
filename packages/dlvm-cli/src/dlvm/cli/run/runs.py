"""Run folders: where each run of a pipeline writes, so that a run never touches another's files.

The runs of a pipeline share a parent folder (`out/<pipeline file stem>/` beside the pipeline
file, or `[run] dir`); each run has a folder of its own there, named by `[run] name` /
`--name` or by the time it started (`20250611-142233`, `…-2` for a second run in the same
second), and `latest` is a symbolic link to the run started or resumed last. Each run folder
holds `run.json`, the run's record, and `pipeline.json`, the pipeline as it ran.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import dlvm.ir as ir
from dlvm.ir import files

LATEST = "latest"
RUN_RECORD = "run.json"
PIPELINE_RECORD = "pipeline.json"
OUTPUTS_FOLDER = "out"
TIMESTAMP = "%Y%m%d-%H%M%S"
ROOM = "x" * 64  # room a parent path must leave: a run folder's name and one file in it


@dataclass(frozen=True)
class RunFolder:
    """One run's folder: `parent/name`; `reused` when an earlier run made it (resume,
    overwrite)."""

    parent: Path
    name: str
    reused: bool = False

    @property
    def path(self) -> Path:
        return self.parent / self.name

    def holds(self, path: Path) -> bool:
        """Whether `path` lies inside this run's folder (links and `..` resolved)."""
        return path.resolve().is_relative_to(self.path.resolve())


def default_parent(pipeline: Path) -> Path:
    """`out/<stem>/` beside the pipeline file: pipelines that share a folder keep their runs
    apart."""
    return pipeline.resolve().parent / OUTPUTS_FOLDER / pipeline.stem


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a run folder (None when it can)."""
    if not name.strip():
        return "a run name must not be empty"
    if name == LATEST:
        return f"'{LATEST}' is the link to the newest run; choose another name"
    if name in (".", "..") or name.startswith(".") or any(c in name for c in "/\\\0"):
        return f"'{files.shown(name)}' is not a plain folder name (no '/', no leading '.')"
    problem = files.path_problem(name)
    return f"'{files.shown(name)}': {problem}" if problem is not None else None


def parent_problem(parent: Path) -> str | None:
    """Why runs cannot be kept in `parent` (None when they can)."""
    if files.path_problem(parent / ROOM) is not None:
        return f"'{files.shown(parent)}': its name is too long to hold run folders"
    problem = files.folder_problem(str(parent))
    if problem is not None:
        return problem
    latest = parent / LATEST
    if latest.exists() and not latest.is_symlink():
        return f"'{latest}' is in the way of the link to the newest run"
    return None


def timestamp_name(parent: Path, now: datetime | None = None) -> str:
    """The start time as a sortable name, with `-2`, `-3`… when that name is taken."""
    base = (now or datetime.now()).strftime(TIMESTAMP)
    name, number = base, 1
    while (parent / name).exists() or (parent / name).is_symlink():
        number += 1
        name = f"{base}-{number}"
    return name


def runs(parent: Path) -> list[str]:
    """The names of the runs kept in `parent` (folders with a run record), oldest first."""
    if not parent.is_dir():
        return []
    found = [p for p in parent.iterdir()
             if p.name != LATEST and p.is_dir() and (p / RUN_RECORD).is_file()]
    return [p.name for p in sorted(found, key=lambda p: (p / RUN_RECORD).stat().st_mtime)]


def latest_run(parent: Path) -> str | None:
    """The run `latest` links to; without a usable link, the run recorded last."""
    link = parent / LATEST
    if link.is_symlink() and link.resolve().is_dir():
        return link.resolve().name
    names = runs(parent)
    return names[-1] if names else None


def describe_runs(parent: Path) -> str:
    names = runs(parent)
    shown = ", ".join(names[-5:])
    return f"runs: {'…, ' if len(names) > 5 else ''}{shown}" if names else "no runs yet"


def claim(run: RunFolder) -> None:
    """Create the run's folder (a new run's must not exist yet) and link it as `latest`."""
    try:
        if run.reused:
            run.path.mkdir(parents=True, exist_ok=True)
        else:
            run.parent.mkdir(parents=True, exist_ok=True)
            run.path.mkdir()
    except FileExistsError:
        raise ir.DlvmError(f"run '{run.name}' was started in '{run.parent}' by another "
                           "process meanwhile; run again for a run folder of its own") from None
    except OSError as e:
        raise ir.DlvmError(f"cannot create the run folder '{run.path}': "
                           f"{e.strerror or e}") from None
    link_latest(run)


def link_latest(run: RunFolder) -> None:
    """Point `latest` at this run: a new link renamed over the old one, never a moment
    without a link."""
    link = run.parent / LATEST
    tmp = run.parent / f".{LATEST}.{os.getpid()}.tmp"
    try:
        tmp.unlink(missing_ok=True)
        os.symlink(run.name, tmp, target_is_directory=True)
        os.replace(tmp, link)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ir.DlvmError(f"cannot link '{link}' to the run '{run.name}': "
                           f"{e.strerror or e}") from None


def read_record(folder: Path) -> dict[str, Any] | None:
    """A run's record, or None when it has none that can be read."""
    try:
        record = json.loads(files.read_text(folder / RUN_RECORD, what="run record"))
    except (ir.DlvmError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def written_by(parent: Path, path: Path) -> str | None:
    """The run of `parent` whose record lists `path` among its outputs, if any: only such
    files may be replaced outside a run's folder."""
    wanted = str(path.resolve())
    for name in reversed(runs(parent)):
        record = read_record(parent / name)
        outputs = record.get("outputs") if record is not None else None
        if isinstance(outputs, list) and wanted in outputs:
            return name
    return None
