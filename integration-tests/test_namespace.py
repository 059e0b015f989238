"""`dlvm` is a PEP 420 namespace shared by every DLVM distribution: no package may own it.

A stray ``dlvm/__init__.py`` makes ``dlvm`` a regular package rooted in one distribution,
and the others' subpackages stop importing (in editable installs; wheel installs hide it).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_package_owns_the_namespace() -> None:
    strays = sorted(ROOT.glob("packages/*/src/dlvm/__init__.py"))
    assert not strays, f"dlvm must stay a namespace package; remove {strays}"


def test_dlvm_is_a_namespace_package() -> None:
    import dlvm

    assert dlvm.__file__ is None, f"dlvm is a regular package from {dlvm.__file__}"
    assert len(list(dlvm.__path__)) >= 1
    importlib.import_module("dlvm.ir")


def test_namespace_is_not_masked(tmp_path: Path) -> None:
    """Another portion of `dlvm` on PYTHONPATH imports next to the installed ones."""
    (tmp_path / "dlvm").mkdir()
    (tmp_path / "dlvm" / "zz_probe.py").write_text("VALUE = 42\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    code = "import dlvm.zz_probe, dlvm.ir; print(dlvm.zz_probe.VALUE)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"
