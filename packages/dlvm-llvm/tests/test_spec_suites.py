"""The interpreter's own tests, and dlvm-ad's program tests, pass on llvm-cpu.

Those tests state DLVM's semantics instruction by instruction (values, broadcasting, errors)
and derivatives against finite differences; `dlvm.ir.testing` compiles for the target that
`DLVM_TEST_TARGET` names, so the same files check the code generator. They run in a child
pytest, which reports each failure by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlvm.ir.testing import SPEC_SUITES, run_spec_suite, spec_suite_files

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("suite", sorted(SPEC_SUITES))
def test_the_suite_passes_on_llvm_cpu(suite: str) -> None:
    if not spec_suite_files(ROOT, suite):
        pytest.skip(f"the {suite} tests are not in this checkout")
    run = run_spec_suite(ROOT, suite, "llvm-cpu")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
