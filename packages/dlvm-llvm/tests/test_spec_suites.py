"""The interpreter's own tests, and dlvm-ad's program tests, pass on llvm-cpu.

Those tests state DLVM's semantics instruction by instruction (values, broadcasting, errors)
and derivatives against finite differences; `dlvm.ir.testing` compiles for the target that
`DLVM_TEST_TARGET` names, so the same files check the code generator. They run in a child
pytest, which reports each failure by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SUITES = {
    "interpreter": sorted(str(p) for p in (ROOT / "packages/dlvm-ir/tests").glob("test_interp_*.py")),
    "gradients": [str(ROOT / "packages/dlvm-ad/tests" / name) for name in (
        "test_programs.py", "test_control_flow.py", "test_aggregates.py", "test_extension.py")],
}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_the_suite_passes_on_llvm_cpu(suite: str) -> None:
    paths = [p for p in SUITES[suite] if Path(p).exists()]
    if not paths:
        pytest.skip(f"the {suite} tests are not in this checkout")
    env = {**os.environ, "DLVM_TEST_TARGET": "llvm-cpu"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-x", *paths], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=1500)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
