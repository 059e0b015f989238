"""The engine `ray`: synchronous data-parallel SGD on Ray actors.

Every step, the driver splits the global batch (the one-process run's, from the same seed)
into one contiguous share per worker; each worker runs the pipeline's step on its share with
the same parameters; the driver averages the results weighted by the shares' sizes — for a
step p − lr·∇ℓ of a mean loss ℓ this is the step of the whole batch, so the parameters equal
the one-process run's up to rounding. The average is a reduction through Ray's object store
(the parameters go out once per step as one shared object). Checkpoints and metrics are
written by the driver with the local engine's helpers; a lost worker is replaced and its
epoch run again from the parameters the epoch began with (what the checkpoint holds).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.cli import errors
from dlvm.cli.run.engines import Engine, TrainJob
from dlvm.cli.run.spec import DistributedSpec, KeyedError, TrainSpec
from dlvm.cli.run.train import (
    Interrupt,
    TrainResult,
    batches,
    end_epoch,
    initial_parameters,
    nonfinite,
    reconcile_metrics,
    start_fresh,
    tensor_type,
)
from dlvm.ir.plugin import install_hint
from dlvm.ir.runtime import convert_argument

from .worker import FAULT_VARIABLES, Worker

WORKERS = ("train", "distributed", "workers")
ADDRESS = ("train", "distributed", "address")
# Ray's sockets live in its session folder, and a socket's path has at most 107 bytes: a
# longer temporary folder is passed over for /tmp
MAX_TEMP_ROOT_CHARS = 40


class RayEngine(Engine):
    name = "ray"

    def check(self, spec: TrainSpec) -> None:
        d = spec.distributed
        if spec.batch_size % d.workers:
            raise KeyedError(WORKERS, f"train.batch_size {spec.batch_size} is not divisible by "
                             f"{d.workers} workers (each takes an equal share of a batch)")
        if d.address not in ("local", "auto") and not d.address.startswith("ray://"):
            raise KeyedError(ADDRESS, f"'{d.address}' is not local, auto or ray://host:port")
        try:
            import ray
        except ImportError:
            raise KeyedError(("train", "distributed", "engine"), "the engine 'ray' needs the "
                             f"ray package: {install_hint('ray>=2.40')}") from None
        if d.address != "local" and not ray.is_initialized():
            try:  # reachable now, or refused before any work
                with connected(d):
                    pass
            except ir.DlvmError as e:
                raise KeyedError(ADDRESS, str(e).split(": ", 1)[-1]) from None
        if d.allreduce == "collective":
            try:
                uses_collective(d)
            except ir.DlvmError as e:
                raise KeyedError(("train", "distributed", "allreduce"),
                                 str(e).split(": ", 1)[-1]) from None
        cpus = os.cpu_count() or 1
        if d.address == "local" and not ray.is_initialized() and d.workers > cpus:
            raise KeyedError(WORKERS, f"{d.workers} workers, but this machine has {cpus} CPUs "
                             "(address = \"local\" runs them all here)")

    def train(self, job: TrainJob) -> TrainResult:
        with connected(job.spec.distributed):
            return DataParallel(job).run()


@contextmanager
def connected(d: DistributedSpec) -> Iterator[None]:
    """Ray, as the address says: a local instance for the run (stopped after it), a running
    cluster, or the instance this process already started (kept).

    The local instance is isolated: Ray's `address="local"` starts a new one even where
    another runs on the machine or `RAY_ADDRESS` names one (a plain `ray.init()` would join
    it), and its session files go to a folder of its own, removed after the run, so that
    it neither mixes with another instance's nor becomes the one `ray.init()` finds."""
    import ray

    if ray.is_initialized():
        yield
        return
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                               "logging_level": logging.ERROR}
    scratch = tempfile.mkdtemp(prefix="dlvm-ray-", dir=temp_root()) \
        if d.address == "local" else None
    try:
        try:
            if scratch is not None:
                ray.init(address="local", num_cpus=max(d.workers, os.cpu_count() or 1),
                         _temp_dir=scratch, **options)
            else:
                ray.init(address=d.address, **options)
        except Exception as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            if scratch is not None:
                raise ir.DlvmError("train.distributed.address: cannot start a local Ray "
                                   f"instance: {first}") from None
            raise ir.DlvmError(f"train.distributed.address: cannot reach Ray at "
                               f"'{d.address}': {first}") from None
        try:
            cpus = ray.cluster_resources().get("CPU", 0)
            if cpus < d.workers:
                raise ir.DlvmError(f"train.distributed.workers: the Ray cluster at "
                                   f"'{d.address}' has {cpus:g} CPUs for {d.workers} workers")
            yield
        finally:
            ray.shutdown()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def temp_root() -> str:
    """Where the local instance's session folder is made: the temporary folder, if its path
    leaves room for Ray's socket paths."""
    root = tempfile.gettempdir()
    if len(root) > MAX_TEMP_ROOT_CHARS and os.path.isdir("/tmp"):
        return "/tmp"
    return root


def uses_collective(d: DistributedSpec) -> bool:
    """Whether the workers average among themselves with Ray's collective library (its CPU
    backend, gloo, comes with torch.distributed) or on the driver via the object store."""
    if d.allreduce == "object-store":
        return False
    try:
        from ray.util.collective import collective

        available = bool(collective.gloo_available())
    except Exception:
        available = False
    if d.allreduce == "collective" and not available:
        raise ir.DlvmError("train.distributed.allreduce: Ray's collective library has no "
                           "usable backend here (gloo needs torch.distributed)")
    return available


class DataParallel:
    """One run: the driver's side of the workers."""

    def __init__(self, job: TrainJob) -> None:
        self.job = job
        self.spec = job.spec
        self.module = job.module
        step = self.module.function(self.spec.step)
        assert step is not None and self.spec.dataset is not None
        self.n = len(self.spec.parameters)
        self.types = [tensor_type(self.module, t) for t in step.type_.arguments]
        self.text = ir.print_module(self.module)
        self.workers: list[Any] = []
        self.failures = 0
        self.collective = uses_collective(self.spec.distributed)

    def start_workers(self, data: Any) -> None:
        import ray

        env = {k: v for k, v in os.environ.items() if k in FAULT_VARIABLES}
        actor = ray.remote(num_cpus=1, max_restarts=0)(Worker)
        if env:
            actor = actor.options(runtime_env={"env_vars": env})
        self.workers = [actor.remote(i, self.text, self.job.target, self.job.target_options,
                                     self.spec.step, data)
                        for i in range(self.spec.distributed.workers)]
        ray.get([w.ready.remote() for w in self.workers])  # compiled, or the error now
        if self.collective:
            import uuid

            group = f"dlvm-{uuid.uuid4().hex[:12]}"
            ray.get([w.join.remote(len(self.workers), group) for w in self.workers])

    def stop_workers(self) -> None:
        import ray

        for w in self.workers:
            ray.kill(w)
        self.workers = []

    def run(self) -> TrainResult:
        import ray

        spec, job = self.spec, self.job
        dataset = spec.dataset
        assert dataset is not None
        start = spec.start_epoch if job.resume else 0
        if job.resume:
            job.reporter.log(f"resuming from '{spec.checkpoint}' after epoch {start}")
            if spec.metrics is not None:
                reconcile_metrics(spec.metrics, start)
        params = initial_parameters(self.module, spec, self.types[:self.n])  # type: ignore[arg-type]
        if not job.resume:
            start_fresh(spec)
        data = ray.put((dataset.x_train, dataset.y_train))
        self.start_workers(data)
        interrupt = Interrupt()
        result = TrainResult(start, None, None, False)
        size = len(dataset.x_train)
        steps = -(-size // spec.batch_size)
        epoch = start
        try:
            with interrupt.installed(), job.reporter.training(spec.epochs, start, steps) as bar:
                while epoch < spec.epochs:
                    try:
                        params = self.epoch(epoch, params, result, bar, interrupt)
                    except ray.exceptions.RayActorError as e:
                        self.restart(epoch, e, data)
                        continue  # the same epoch again, from the parameters it began with
                    if result.interrupted:
                        break
                    epoch += 1
        finally:
            self.stop_workers()
        return result

    def gathered(self, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The parameters the workers hold (all the same after each all-reduce)."""
        import ray

        values = ray.get(self.workers[0].parameters.remote())
        return {name: np.asarray(v, dtype=params[name].dtype)
                for name, v in zip(params, values, strict=True)}

    def restart(self, epoch: int, error: Exception, data: Any) -> None:
        self.failures += 1
        limit = self.spec.distributed.max_failures
        if self.failures > limit:
            raise ir.DlvmError(f"training stopped: a worker was lost {self.failures} times "
                               f"(train.distributed.max_failures = {limit}); the checkpoint "
                               f"keeps the parameters after epoch {epoch}")
        errors.note(f"a worker was lost in epoch {epoch + 1} ({type(error).__name__}); "
                    f"restarting the workers and the epoch ({self.failures} of {limit})")
        self.stop_workers()
        self.start_workers(data)

    def epoch(self, epoch: int, params: dict[str, np.ndarray], result: TrainResult, bar: Any,
              interrupt: Interrupt) -> dict[str, np.ndarray]:
        import ray

        if self.collective:
            values = ray.put(tuple(params.values()))
            ray.get([w.set_parameters.remote(values) for w in self.workers])
        spec = self.spec
        dataset = spec.dataset
        assert dataset is not None
        size = len(dataset.x_train)
        rate = spec.learning_rate / (1.0 + spec.decay * epoch)
        lr_t = self.types[self.n + 2]
        assert lr_t is not None
        lr = convert_argument(np.float64(rate), lr_t, "the learning rate")
        began, losses = time.perf_counter(), []
        compute = np.zeros(len(self.workers))
        reduce_seconds = 0.0
        count = 0
        for number, batch in enumerate(batches(size, spec.batch_size, spec.shuffle_seed, epoch),
                                       start=1):
            shares = np.array_split(batch, len(self.workers))
            if self.collective:
                loss, times, reduced = self.reduced_step(shares, len(batch), lr, epoch, number)
            else:
                params, loss, times, reduced = self.merged_step(params, shares, len(batch), lr,
                                                                epoch, number)
            compute[:len(times)] += times
            reduce_seconds += reduced
            count += 1
            if not (np.isfinite(loss) or spec.allow_nonfinite):
                raise nonfinite(spec, loss, epoch + 1, number, result.epochs_done)
            losses.append(loss * len(batch))
            bar.step(loss)
            if interrupt.requested:
                result.interrupted = True
                return self.gathered(params) if self.collective else params
        if self.collective:
            params = self.gathered(params)
        result.loss = sum(losses) / size
        extra: dict[str, Any] = {
            "workers": len(self.workers),
            "worker_step_seconds": [float(c / count) for c in compute],
            "allreduce_seconds": reduce_seconds / count if count else None,
            "allreduce": "collective" if self.collective else "object-store"}
        if self.failures:
            extra["worker_restarts"] = self.failures
        end_epoch(self.job.exe, spec, params, result, epoch, rate, time.perf_counter() - began,
                  bar, extra)
        return params

    def reduced_step(self, shares: list[np.ndarray], total: int, lr: Any, epoch: int,
                     number: int) -> tuple[float, list[float], float]:
        """Every worker steps on its share and the group all-reduces the weighted results:
        the loss, the workers' compute seconds, the slowest all-reduce's seconds."""
        import ray

        outs = ray.get([w.step_reduced.remote(s, len(s) / total, lr, epoch + 1, number)
                        for w, s in zip(self.workers, shares, strict=True)])
        return outs[0][0], [c for _, c, _ in outs], max(r for _, _, r in outs)

    def merged_step(self, params: dict[str, np.ndarray], shares: list[np.ndarray], total: int,
                    lr: Any, epoch: int, number: int
                    ) -> tuple[dict[str, np.ndarray], float, list[float], float]:
        """The parameters out through the object store, every worker's step on its share,
        and their weighted average here: the new parameters, the loss, the workers' compute
        seconds, and the step's seconds beyond the slowest worker."""
        import ray

        values = ray.put(tuple(params.values()))
        tick = time.perf_counter()
        calls = [(w, s) for w, s in zip(self.workers, shares, strict=True) if len(s)]
        outs = ray.get([w.step.remote(values, s, lr, epoch + 1, number) for w, s in calls])
        wall = time.perf_counter() - tick
        weights = [len(s) / total for _, s in calls]
        merged = [sum(w * o[k] for w, (o, _) in zip(weights, outs, strict=True))
                  for k in range(self.n + 1)]
        new = {name: np.asarray(v, dtype=o.dtype) for name, v, o in
               zip(self.spec.parameters, merged[:self.n], outs[0][0][:self.n], strict=True)}
        times = [sec for _, sec in outs]
        return new, float(merged[self.n]), times, max(wall - max(times), 0.0)
