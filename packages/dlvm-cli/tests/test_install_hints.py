"""Every message that says what to install words it one way, `pip install DIST`: the
command works from an index and, from a checkout, with `--find-links dist`."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dlvm.ir.plugin import install_hint, make_registry, set_registry

Invoke = Callable[..., Any]
REPOSITORY = Path(__file__).resolve().parents[3]
GRADIENT_MODULE = """\
func @f: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
[gradient @f]
func @df: (f32) -> (f32)
"""


def test_a_distribution_name_is_used_as_is() -> None:
    assert install_hint("dlvm-ad") == "pip install dlvm-ad"


@pytest.mark.parametrize(("requirement", "hint"), [
    ("dlvm-llvm-gpu[libdevice]", "pip install 'dlvm-llvm-gpu[libdevice]'"),
    ("ray>=2.40", "pip install 'ray>=2.40'"),
])
def test_extras_and_versions_are_quoted_for_the_shell(requirement: str, hint: str) -> None:
    assert install_hint(requirement) == hint


def test_several_distributions_go_in_one_command() -> None:
    assert install_hint("dlvm-opt", "dlvm-ad") == "pip install dlvm-opt dlvm-ad"


@pytest.mark.usefixtures("fresh_registry")
def test_a_missing_first_party_pass_names_its_distribution(invoke: Invoke,
                                                           double: Path) -> None:
    set_registry(make_registry(autoload=False))
    result = invoke("opt", str(double), "-p", "cse")
    assert result.exit_code == 1
    assert f"pass 'cse' is provided by dlvm-opt: {install_hint('dlvm-opt')}" in result.stderr


@pytest.mark.usefixtures("fresh_registry")
def test_gradient_declarations_without_dlvm_ad_say_what_to_install(
        invoke: Invoke, tmp_path: Path) -> None:
    set_registry(make_registry(autoload=False))
    module = tmp_path / "grad.dl"
    module.write_text(GRADIENT_MODULE)
    args = tmp_path / "in.npz"
    np.savez(args, arg0=np.float32(2.0))
    result = invoke("exec", str(module), "-f", "f", "--args", str(args), "--target", "interp")
    assert result.exit_code == 1
    assert result.stderr.rstrip().endswith(f"dlvm-ad: {install_hint('dlvm-ad')}")


def test_no_source_file_words_an_install_hint_of_its_own() -> None:
    sources = sorted(REPOSITORY.glob("packages/*/src/**/*.py"))
    assert sources, f"no sources under {REPOSITORY}"
    literal = re.compile(r"pip install ")
    worded_here = [path.relative_to(REPOSITORY).as_posix() for path in sources
                   if literal.search(path.read_text(encoding="utf-8"))]
    assert worded_here == ["packages/dlvm-ir/src/dlvm/ir/plugin.py"]  # install_hint itself
