"""`dlvm.ir.testing`: the spec tests run once per installed target, and the helpers compile
for the target the running test is parametrized with."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import (
    SPEC_TARGETS,
    TARGET_ENV,
    compiling_for,
    executable,
    run1,
    spec_targets,
    target_and_options,
    target_under_test,
)

DOUBLE = """
func @f: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = add %x: <2 x f32>, %x: <2 x f32>
    return %y: <2 x f32>
}
"""


def test_a_spec_test_runs_once_per_installed_target_named_in_its_id(
        spec_target: str, request: pytest.FixtureRequest) -> None:
    assert request.node.name.endswith(f"[{spec_target}]")
    assert spec_target in spec_targets()


def test_the_helpers_compile_for_the_spec_target(spec_target: str) -> None:
    assert target_under_test() == spec_target
    # the default target is resolved before the cache: the same executable as asking for it
    assert executable(DOUBLE) is executable(DOUBLE, spec_target)
    np.testing.assert_array_equal(run1(DOUBLE, "f", np.array([1, 2], np.float32)), [2, 4])


def test_every_target_has_an_executable_of_its_own() -> None:
    others = [t for t in spec_targets() if t != "interp"]
    for target in others:
        assert executable(DOUBLE, target) is not executable(DOUBLE, "interp")


def test_the_spec_targets_are_the_installed_ones_interp_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TARGET_ENV, raising=False)
    installed = [t for t in SPEC_TARGETS if ir.registry().has("target", target_and_options(t)[0])]
    assert spec_targets() == installed
    assert installed[0] == "interp"


def test_dlvm_test_target_chooses_the_one_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TARGET_ENV, "interp{max_steps=1000}")
    assert spec_targets() == ["interp{max_steps=1000}"]
    assert target_under_test() == "interp{max_steps=1000}"


def test_compiling_for_selects_a_target_for_the_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TARGET_ENV, raising=False)
    with compiling_for("interp{max_steps=10}"):
        with compiling_for("interp{max_steps=20}"):
            assert target_under_test() == "interp{max_steps=20}"
        assert target_under_test() == "interp{max_steps=10}"
    assert target_under_test() == "interp"


def test_target_options_are_read_in_pipeline_syntax() -> None:
    assert target_and_options("nvptx{device=host}") == ("nvptx", {"device": "host"})
    assert target_and_options("interp{max_steps=5 seed=1.5 trace=true}") == (
        "interp", {"max_steps": 5, "seed": 1.5, "trace": True})
