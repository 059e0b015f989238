"""ONNX's own backend test cases (`dlvm.onnx.conformance`): none may come out wrong or fail
(an execution or internal error); each is refused with the node and the reason, or passes.
The outcome of every case is recorded in `conformance.json`, which the README's figures
and operator table are generated from: a run must give what is recorded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dlvm.onnx.conformance import (
    as_record,
    node_cases,
    recorded,
    recorded_onnx_version,
    run_all,
    summary,
    wheel_cases,
)

WHEEL_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
RERECORD = ("run `python -m dlvm.onnx.conformance --record` and `python -m "
            "dlvm.onnx.coverage` to record the new outcomes")


@pytest.mark.parametrize("kind", ["node", "wheel"])
def test_every_case_passes_or_is_refused_with_a_reason(kind: str) -> None:
    cases = node_cases() if kind == "node" else wheel_cases()
    outcomes = run_all(cases)
    bad = [f"{o.status} {o.name}: {o.message}" for o in outcomes
           if o.status in ("wrong", "failed")]
    assert not bad, "\n".join(bad)
    assert all(o.message for o in outcomes if o.status == "refused")
    if recorded_onnx_version() != onnx.__version__:
        pytest.skip(f"the outcomes were recorded with onnx {recorded_onnx_version()}, not "
                    f"{onnx.__version__} ({summary(outcomes)})")
    now, before = as_record(cases, outcomes), recorded()[kind]
    changed = sorted(f"{name}: {before.get(name, ['new'])[0]} -> {now[name][0]}"
                     for name in now if now[name] != before.get(name))
    assert not changed and set(before) == set(now), RERECORD + ":\n" + "\n".join(changed)


@pytest.mark.skipif(not (WHEEL_DATA / "pytorch-converted").is_dir(),
                    reason="this onnx wheel ships no model tests")
def test_a_model_of_an_older_opset_is_converted_and_said() -> None:
    model = WHEEL_DATA / "pytorch-converted" / "test_Linear" / "model.onnx"
    opset = next(o.version for o in onnx.load(model).opset_import if o.domain in ("", "ai.onnx"))
    assert opset < 13
    result = subprocess.run([sys.executable, "-m", "dlvm.cli", "onnx", "import", str(model),
                             "--verbose"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"note: opset {opset} converted to opset 17 by onnx.version_converter" in \
        result.stderr
    assert "func @forward" in result.stdout
