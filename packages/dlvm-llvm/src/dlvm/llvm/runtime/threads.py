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

import os
import threading

from . import blas, pool
from .cpus import MAX_THREADS, affinity_cpus, cgroup_cpu_limit, usable_cpus

ENV = "DLVM_NUM_THREADS"

_lock = threading.Lock()
_budget: int | None = None  # set by set_num_threads; None: the environment or the default


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
    budget = get_num_threads()
    pool.set_budget(budget)
    blas.limit_threads(budget)


pool.budget_source = get_num_threads  # the pool, loading, asks for the budget here
blas.on_strategy_change.append(apply)  # a new GEMM strategy changes both shares
__all__ = ["MAX_THREADS", "affinity_cpus", "apply", "cgroup_cpu_limit", "check_threads",
           "get_num_threads", "parse_env", "set_num_threads", "usable_cpus"]
