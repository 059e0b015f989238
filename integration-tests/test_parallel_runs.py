"""The repository's conftest.py under pytest-xdist, as the nox sessions run it (`-n 2 --dist
loadgroup`): tests that must share one process stay on one worker, and the workers compile
into one private code cache for the run, removed afterwards.

Each test runs a small suite laid out like the repository, with its conftest.py, in a
child pytest."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed")

ROOT = Path(__file__).resolve().parents[1]

# Each test records the worker it ran on and the code cache it saw.
RECORD = """
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("i", range(6))
def test_{name}(i: int) -> None:
    line = f"{{os.environ.get('PYTEST_XDIST_WORKER')}} {{os.environ['DLVM_CACHE_DIR']}}\\n"
    with open(Path(__file__).parents[{depth}] / "record.txt", "a") as f:
        f.write(f"{name} " + line)
"""


def suite(root: Path, files: dict[str, int]) -> None:
    """The repository's conftest.py and pyproject.toml, and `files` (path → folder depth)."""
    shutil.copy(ROOT / "conftest.py", root / "conftest.py")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for path, depth in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"\W", "_", path.removesuffix(".py"))
        target.write_text(RECORD.format(name=name, depth=depth))


def run_in_parallel(root: Path) -> list[tuple[str, str, str]]:
    """(test file, worker, code cache) for each test the child pytest ran."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                           "-p", "no:cacheprovider", "-q", str(root)], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = (root / "record.txt").read_text().splitlines()
    return [(name, worker, cache) for name, worker, cache in map(str.split, lines)]


def test_the_lit_suite_and_the_ray_tests_each_stay_on_one_worker(tmp_path: Path) -> None:
    suite(tmp_path, {"integration-tests/test_lit.py": 1, "packages/dlvm-ray/tests/test_e.py": 3,
                     "packages/dlvm-x/tests/test_a.py": 3, "packages/dlvm-x/tests/test_b.py": 3})
    records = run_in_parallel(tmp_path)
    workers: dict[str, set[str]] = {}
    for name, worker, _ in records:
        workers.setdefault(name, set()).add(worker)
    assert len(records) == 24
    assert len(workers["integration_tests_test_lit"]) == 1
    assert len(workers["packages_dlvm_ray_tests_test_e"]) == 1


def test_the_workers_share_one_private_code_cache_removed_after_the_run(
        tmp_path: Path) -> None:
    suite(tmp_path, {"packages/dlvm-x/tests/test_a.py": 3, "packages/dlvm-x/tests/test_b.py": 3})
    records = run_in_parallel(tmp_path)
    assert {worker for _, worker, _ in records} == {"gw0", "gw1"}
    caches = {cache for _, _, cache in records}
    assert len(caches) == 1
    (cache,) = caches
    assert Path(cache).name.startswith("dlvm-test-cache-")
    assert not Path(cache).exists()
