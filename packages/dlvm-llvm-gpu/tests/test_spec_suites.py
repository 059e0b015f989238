"""The interpreter's own tests, and dlvm-ad's program tests, pass on the nvptx target's
launch plans (host emulation: every machine runs them; on a GPU, `test_gpu.py` covers the
device itself). They run in a child pytest, which reports each failure by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlvm.ir.testing import SPEC_SUITES, run_spec_suite, spec_suite_files

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("suite", sorted(SPEC_SUITES))
def test_the_suite_passes_on_the_launch_plans(suite: str) -> None:
    if not spec_suite_files(ROOT, suite):
        pytest.skip(f"the {suite} tests are not in this checkout")
    run = run_spec_suite(ROOT, suite, "nvptx{device=host}")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
