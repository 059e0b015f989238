"""Training engines: what runs the steps of `[train]`.

`local` (this process, the built-in) runs every step here. A plugin adds another through the
`register_engines` hook (`dlvm.ir.plugin.RegisterEngine`), e.g. `ray` from dlvm-ray for
data-parallel workers; `[train.distributed] engine = NAME` chooses it. An engine checks its
configuration during validation (`check`, raising `KeyedError` on a `train.distributed` key,
before any work) and then trains (`train`), writing checkpoints and metrics with the helpers
of `dlvm.cli.run.train` (into the run's folder: the spec's paths are already resolved) so that
every engine's files and `--resume` behave alike, and showing progress through
`job.reporter.training(…)`, a `progress.Display` that `end_epoch` also reports to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dlvm.ir as ir

from .spec import DistributedSpec, KeyedError, TrainSpec

if TYPE_CHECKING:
    from .progress import Reporter
    from .train import TrainResult


@dataclass
class TrainJob:
    """Everything a run hands its engine."""

    exe: Any  # the module compiled for the run's target, in this process
    module: ir.Module  # after the passes
    spec: TrainSpec
    reporter: Reporter
    resume: bool
    target: str | None = None  # the target and options, for engines that compile elsewhere
    target_options: dict[str, Any] = field(default_factory=dict)


class Engine(ABC):
    """A training engine; subclasses implement `train` and may refine `check`."""

    name = "engine"

    def check(self, spec: TrainSpec) -> None:  # noqa: B027 - optional for an engine
        """Refuse a configuration this engine cannot run (one KeyedError, before any work)."""

    @abstractmethod
    def train(self, job: TrainJob) -> TrainResult: ...


class LocalEngine(Engine):
    """Every step in this process, on the compiled executable."""

    name = "local"

    def check(self, spec: TrainSpec) -> None:
        if spec.distributed.workers != 1:
            raise KeyedError(("train", "distributed", "workers"),
                             "the local engine runs one worker; choose engine = \"ray\" "
                             "(dlvm-ray) for more")

    def train(self, job: TrainJob) -> TrainResult:
        from .train import train

        return train(job.exe, job.module, job.spec, job.reporter, job.resume)


def make_engine(spec: DistributedSpec) -> Engine:
    """The engine a pipeline names, from the registry."""
    try:
        engine = ir.registry().entry("engine", spec.engine).create()
    except ir.NotedError as e:
        raise KeyedError(("train", "distributed", "engine"), e.message, notes=e.notes) from None
    except ir.DlvmError as e:
        raise KeyedError(("train", "distributed", "engine"), str(e)) from None
    if not isinstance(engine, Engine):
        raise KeyedError(("train", "distributed", "engine"),
                         f"engine '{spec.engine}' is not a dlvm.cli.run.engines.Engine")
    return engine
