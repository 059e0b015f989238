"""Repository-wide pytest configuration.

- GPU tests skip cleanly without a device.
- Tests that must share one process stay together when pytest-xdist spreads the suite over
  the cores (`--dist loadgroup`, as the nox sessions run it): each group runs on one worker.
- Every test compiles into one private code cache for the whole run (never the user's),
  shared by the workers: the cache is safe for concurrent processes, and a module one worker
  compiled is loaded by the others.
- The spec tests (modules that use the `spec_target` fixture) run once per installed target;
  `@pytest.mark.fails_on(TARGET, reason=...)` records a target's known defect (a strict xfail,
  so the fix shows), `@pytest.mark.interp_only(REASON)` keeps a test to one run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlvm.ir.testing import compiling_for, spec_targets

# Where a test lives (a folder, a file or `file::test`, from the repository root) → the group
# it runs in: tests that share an expensive fixture or cache, made once per process.
GROUP_BY_PATH = {
    "integration-tests/test_lit.py": "lit",  # lit runs the whole suite once, in a fixture
    "packages/dlvm-ray/tests": "ray",  # one Ray instance per session
    # PTX for every program of the repository, made in two child processes per module
    "packages/dlvm-llvm-gpu/tests/test_ptx.py::test_every_program_compiles_to_ptx_that_"
    "ptxas_accepts": "ptx",
    "packages/dlvm-onnx/tests/test_models.py": "onnx-models",  # compiled models, cached
}
# A mark → the group of the tests that carry it.
GROUP_BY_MARK = {
    "gpu": "gpu",  # one device: tests that would compete for its memory run one at a time
}

CACHE_ENV = "DLVM_CACHE_DIR"
CACHE_KEY = pytest.StashKey[tuple[str, str | None]]()


def _cuda_device_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or the one process without xdist) makes the run's code cache; the
    workers it starts inherit `$DLVM_CACHE_DIR`."""
    if _is_xdist_worker(config):
        return
    folder = tempfile.mkdtemp(prefix="dlvm-test-cache-")
    config.stash[CACHE_KEY] = (folder, os.environ.get(CACHE_ENV))
    os.environ[CACHE_ENV] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder, old = config.stash.get(CACHE_KEY, (None, None))
    if folder is None:
        return
    shutil.rmtree(folder, ignore_errors=True)
    if old is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = old


def _group(item: pytest.Item, root: Path) -> str | None:
    for mark, group in GROUP_BY_MARK.items():
        if item.get_closest_marker(mark):
            return group
    try:
        where = item.path.relative_to(root).as_posix()
    except ValueError:
        return None
    test = f"{where}::{item.name}"
    for path, group in GROUP_BY_PATH.items():
        if path in (where, test) or where.startswith(path + "/") or test.startswith(path + "["):
            return group
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item, config.rootpath)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items or _cuda_device_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA driver and an NVIDIA GPU (none found)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.hookimpl(trylast=True)  # after the test's own parameters: ids read `test_f[2-llvm-cpu]`
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec_target" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("interp_only")
    if only is not None:
        if not (only.args or only.kwargs.get("reason")):
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: interp_only needs a reason")
        return
    known = {}
    for mark in metafunc.definition.iter_markers("fails_on"):
        if not (mark.args and mark.kwargs.get("reason")):
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: fails_on needs a target "
                                    "and a reason")
        known[mark.args[0]] = mark.kwargs["reason"]
    targets = [pytest.param(target, id=target, marks=pytest.mark.xfail(
                   strict=True, reason=known[target]) if target in known else ())
               for target in spec_targets()]
    metafunc.parametrize("spec_target", targets, indirect=True)


@pytest.fixture
def spec_target(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The target a spec test runs on: `dlvm.ir.testing`'s helpers (`run`, `executable`,
    `compile_for_test`) and `dlvm.ad.testing`'s checks compile for it. An `interp_only` test
    is not parametrized and keeps the default."""
    target = getattr(request, "param", None)
    if target is None:
        yield None
        return
    with compiling_for(target):
        yield target
