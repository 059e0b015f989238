"""The thread budget: set_num_threads and DLVM_NUM_THREADS validation, the target option,
and the CPUs the process may use read from affinity and cgroup files (fake trees here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import dlvm.ir as ir
import dlvm.llvm as dlvm_llvm
from dlvm.llvm.runtime import cpus, threads
from dlvm.llvm.target import LLVMCPUTarget, default_threads


@pytest.fixture(autouse=True)
def restore_budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(threads.ENV, raising=False)
    yield
    threads.set_num_threads(None)


def test_set_and_get_from_the_package() -> None:
    dlvm_llvm.set_num_threads(3)
    assert dlvm_llvm.get_num_threads() == 3
    dlvm_llvm.set_num_threads(None)
    assert dlvm_llvm.get_num_threads() == threads.usable_cpus()


@pytest.mark.parametrize(("value", "error", "message"), [
    (0, ValueError, "the number of threads must be at least 1, found 0"),
    (-2, ValueError, "the number of threads must be at least 1, found -2"),
    (100_000, ValueError, "the number of threads must be at most 256, found 100000"),
    (2.0, TypeError, "the number of threads must be an integer, found 2.0"),
    (True, TypeError, "the number of threads must be an integer, found True"),
    ("4", TypeError, "the number of threads must be an integer, found '4'"),
])
def test_set_num_threads_refuses_bad_values(value: object, error: type[Exception],
                                            message: str) -> None:
    dlvm_llvm.set_num_threads(2)
    with pytest.raises(error, match=f"^{message}$"):
        dlvm_llvm.set_num_threads(value)  # type: ignore[arg-type]
    assert dlvm_llvm.get_num_threads() == 2  # unchanged


@pytest.mark.parametrize(("text", "want"), [
    ("3", 3), (" 12 ", 12), ("", None), ("0", None), ("auto", None), ("AUTO", None)])
def test_the_environment_variable(text: str, want: int | None) -> None:
    assert threads.parse_env(text) == want


@pytest.mark.parametrize(("text", "message"), [
    ("two", "DLVM_NUM_THREADS must be a positive integer or 'auto', found 'two'"),
    ("1.5", "DLVM_NUM_THREADS must be a positive integer or 'auto', found '1.5'"),
    ("-1", "DLVM_NUM_THREADS must be at least 1, found -1"),
    ("999", "DLVM_NUM_THREADS must be at most 256, found 999"),
])
def test_a_bad_environment_variable_is_a_one_line_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        threads.parse_env(text)


def test_the_environment_sets_the_budget_and_set_num_threads_overrides_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(threads.ENV, "5")
    assert threads.get_num_threads() == 5
    threads.set_num_threads(2)
    assert threads.get_num_threads() == 2
    threads.set_num_threads(None)
    assert threads.get_num_threads() == 5


def test_the_target_option_is_checked_and_default_builds_for_the_cpus() -> None:
    with pytest.raises(ir.DlvmError, match="target option 'threads' must be at least 0"):
        LLVMCPUTarget(threads=-1)
    threads.set_num_threads(1)
    assert LLVMCPUTarget().threads == 0
    assert default_threads() == threads.usable_cpus()  # room to raise the budget later
    threads.set_num_threads(threads.usable_cpus() + 3)
    assert default_threads() == threads.usable_cpus() + 3


# ---------------------------------------------------------------- cgroups, faked


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_cgroup_v2_takes_the_tightest_ancestor(tmp_path: Path) -> None:
    write(tmp_path, {"proc": "0::/a/b\n", "fs/cgroup.controllers": "cpu",
                     "fs/cpu.max": "max 100000", "fs/a/cpu.max": "400000 100000",
                     "fs/a/b/cpu.max": "150000 100000"})
    assert cpus.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc")) == 1.5
    write(tmp_path, {"fs/a/b/cpu.max": "max 100000"})
    assert cpus.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc")) == 4.0
    write(tmp_path, {"fs/a/cpu.max": "max 100000"})
    assert cpus.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc")) is None


def test_cgroup_v1_quota_and_none(tmp_path: Path) -> None:
    write(tmp_path, {"proc": "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n",
                     "fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000",
                     "fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000"})
    assert cpus.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc")) == 2.5
    write(tmp_path, {"fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1"})
    assert cpus.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc")) is None


def test_no_cgroup_files_means_no_limit(tmp_path: Path) -> None:
    assert cpus.cgroup_cpu_limit(str(tmp_path), str(tmp_path / "missing")) is None
    write(tmp_path, {"proc": "0::/\n", "fs/cgroup.controllers": "cpu",
                     "fs/cpu.max": "garbage"})
    assert cpus.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc")) is None


def test_usable_cpus_is_affinity_capped_by_the_quota_rounded_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpus, "affinity_cpus", lambda: 8)
    write(tmp_path, {"proc": "0::/\n", "fs/cgroup.controllers": "cpu",
                     "fs/cpu.max": "150000 100000"})
    assert cpus.usable_cpus(str(tmp_path / "fs"), str(tmp_path / "proc")) == 2
    write(tmp_path, {"fs/cpu.max": "max 100000"})
    assert cpus.usable_cpus(str(tmp_path / "fs"), str(tmp_path / "proc")) == 8
    monkeypatch.setattr(cpus, "affinity_cpus", lambda: 1)
    write(tmp_path, {"fs/cpu.max": "800000 100000"})
    assert cpus.usable_cpus(str(tmp_path / "fs"), str(tmp_path / "proc")) == 1


def test_affinity_is_what_the_os_says() -> None:
    import os

    assert cpus.affinity_cpus() == len(os.sched_getaffinity(0))
