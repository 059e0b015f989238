"""The process's thread budget: how many cores DLVM's kernels and BLAS may use together.

    dlvm.llvm.set_num_threads(4)      # or DLVM_NUM_THREADS=4, or the target option `threads`
    dlvm.llvm.get_num_threads()       # default: the CPUs this process may use

The default is the CPUs the process may run on (its affinity mask) capped by its cgroup CPU
quota (docker `--cpus`, Kubernetes limits), not `os.cpu_count()`, which counts the host's
CPUs and oversubscribes a container. The budget caps every executable: its `threads` option
can lower it for one executable, never raise it. How the pool and BLAS share the budget is
explained in `pool.py`.
"""

from __future__ import annotations

import math
import os
import threading

ENV = "DLVM_NUM_THREADS"
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"
MAX_THREADS = 256  # the most workers the native pool keeps

_lock = threading.Lock()
_budget: int | None = None  # set by set_num_threads; None: the environment or the default


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def affinity_cpus() -> int:
    """CPUs in this process's affinity mask (taskset, cpuset), or every CPU where the OS
    has no such mask."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cgroup_cpu_limit(root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP
                     ) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (1.5 for `--cpus 1.5`), the tightest of
    its ancestors', or None when there is none (or no cgroup file can be read)."""
    text = _read(proc_cgroup)
    if text is None:
        return None
    lines = text.splitlines()
    unified = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    if unified is not None and os.path.exists(os.path.join(root, "cgroup.controllers")):
        best: float | None = None
        path = unified.strip("/")
        while True:
            limit = _quota_v2(_read(os.path.join(root, path, "cpu.max")))
            if limit is not None:
                best = limit if best is None else min(best, limit)
            if not path:
                return best
            path = os.path.dirname(path)
    for line in lines:  # v1: "<id>:cpu,cpuacct:/path"
        parts = line.split(":", 2)
        if len(parts) == 3 and "cpu" in parts[1].split(","):
            rel = parts[2].strip("/")
            for folder in (parts[1], "cpu,cpuacct", "cpu"):
                base = os.path.join(root, folder, rel)
                quota = _read(os.path.join(base, "cpu.cfs_quota_us"))
                period = _read(os.path.join(base, "cpu.cfs_period_us"))
                if quota is not None and period is not None:
                    return _quota_v1(quota, period)
    return None


def _quota_v2(text: str | None) -> float | None:
    """`cpu.max` ("max 100000" or "<quota> <period>") as CPUs."""
    if not text:
        return None
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_v1(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def usable_cpus(root: str = CGROUP_ROOT, proc_cgroup: str = PROC_CGROUP) -> int:
    """The CPUs this process may use: its affinity mask, capped by its cgroup quota
    (rounded up: a quota of 1.5 CPUs still runs two threads part of the time)."""
    cpus = affinity_cpus()
    limit = cgroup_cpu_limit(root, proc_cgroup)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, min(cpus, MAX_THREADS))


def check_threads(n: object, what: str) -> int:
    """`n` as a thread count, or a one-line error naming `what` gave it."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"{what} must be an integer, found {n!r}")
    if n < 1:
        raise ValueError(f"{what} must be at least 1, found {n}")
    if n > MAX_THREADS:
        raise ValueError(f"{what} must be at most {MAX_THREADS}, found {n}")
    return n


def parse_env(text: str) -> int | None:
    """The value of DLVM_NUM_THREADS: a positive integer, or empty/"0"/"auto" for the
    default (None)."""
    text = text.strip()
    if text.lower() in ("", "0", "auto"):
        return None
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{ENV} must be a positive integer or 'auto', found {text!r}"
                         ) from None
    return check_threads(n, ENV)


def get_num_threads() -> int:
    """The thread budget: set_num_threads's value, else DLVM_NUM_THREADS, else the CPUs the
    process may use."""
    if _budget is not None:
        return _budget
    from_env = parse_env(os.environ.get(ENV, ""))
    return from_env if from_env is not None else usable_cpus()


def set_num_threads(n: int | None) -> None:
    """Set the budget for the whole process (None: back to DLVM_NUM_THREADS or the default).
    It takes effect at the next kernel, in executables compiled before and after."""
    global _budget
    with _lock:
        _budget = None if n is None else check_threads(n, "the number of threads")
        apply()


def apply() -> None:
    """Hand the budget to the native pool, if it is loaded, and BLAS's share to OpenBLAS."""
    from . import blas, pool

    budget = get_num_threads()
    pool.set_budget(budget)
    blas.limit_threads(budget)
