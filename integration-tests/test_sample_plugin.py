"""A third-party plugin installed from its own wheel adds a pass, a target and a
command, and a broken plugin next to it does not stop anything."""

import subprocess
import sys
from pathlib import Path

import pytest

DLVM = Path(sys.executable).parent / "dlvm"

pytestmark = pytest.mark.skipif(
    not DLVM.exists(), reason="the dlvm command is not installed in this environment")

NEGATIONS = """
func @f: (<3 x f32>) -> <3 x f32> {
'entry(%x: <3 x f32>):
    %a = negate %x: <3 x f32>
    %b = negate %a: <3 x f32>
    %c = add %b: <3 x f32>, 1.0: f32
    return %c: <3 x f32>
}
"""


def dlvm(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DLVM), *args], input=input, capture_output=True, text=True,
                          timeout=120)


def sample_installed() -> bool:
    try:
        import dlvm_sample_plugin  # noqa: F401
    except ImportError:
        return False
    return True


needs_sample = pytest.mark.skipif(not sample_installed(),
                                  reason="dlvm-sample-plugin is not installed")


@needs_sample
def test_plugins_lists_the_third_party_pass_and_target_with_their_distribution() -> None:
    out = dlvm("plugins")
    assert out.returncode == 0, out.stderr
    assert "sample-double-negation" in out.stdout
    assert "sample-counting" in out.stdout
    assert "dlvm-sample-plugin" in out.stdout


@needs_sample
def test_the_plugin_pass_runs_from_the_command_line() -> None:
    out = dlvm("opt", "-", "-p", "sample-double-negation", "--stats", input=NEGATIONS)
    assert out.returncode == 0, out.stderr
    assert "negate" not in out.stdout
    assert "%c = add %x: <3 x f32>, 1.0: f32" in out.stdout
    assert "double negations removed" in out.stderr


@needs_sample
def test_the_plugin_target_runs_a_function(tmp_path: Path) -> None:
    import numpy as np

    src = tmp_path / "neg.dl"
    src.write_text(NEGATIONS)
    args = tmp_path / "in.npz"
    np.savez(args, arg0=np.array([1.0, 2.0, 3.0], np.float32))
    out_file = tmp_path / "out.npz"
    out = dlvm("exec", str(src), "-f", "f", "--target", "sample-counting", "--args", str(args),
               "-o", str(out_file))
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(out_file)["out0"], [2.0, 3.0, 4.0])


@needs_sample
def test_the_plugin_adds_a_command() -> None:
    out = dlvm("sample", "hello", "--name", "DLVM")
    assert out.returncode == 0, out.stderr
    assert "hello, DLVM, from dlvm-sample-plugin" in out.stdout


def test_a_broken_plugin_is_reported_and_everything_else_works() -> None:
    try:
        import importlib.metadata as md

        md.distribution("dlvm-broken-plugin")
    except Exception:
        pytest.skip("dlvm-broken-plugin is not installed")
    out = dlvm("plugins")
    assert out.returncode == 0, out.stderr
    assert "missing native library" in out.stdout + out.stderr
    assert "interp" in out.stdout
    verify = dlvm("verify", "-", input=NEGATIONS)
    assert verify.returncode == 0, verify.stderr
    assert "Traceback" not in verify.stderr
