"""The CPUs this process may use: its affinity mask (taskset, cpusets) capped by its cgroup
CPU quota (docker --cpus, Kubernetes limits; cgroup v1 and v2) — not `os.cpu_count()`."""

from __future__ import annotations

import math
import os

CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"
MAX_THREADS = 256  # the most workers the native pool keeps


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
