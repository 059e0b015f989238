"""The example plugin (examples/plugin), installed from its own wheel, adds a pass, an
instruction with its derivative rules, a target, a front end and commands; and a broken
plugin next to it does not stop anything."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DLVM = Path(sys.executable).parent / "dlvm"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugin"

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

X = np.array([-2.0, 0.0, 3.0], np.float32)


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
                                  reason="dlvm-sample-plugin (examples/plugin) is not installed")


def softsign(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.abs(x))


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    path = tmp_path / "in.npz"
    np.savez(path, arg0=X)
    return path


@needs_sample
def test_plugins_lists_the_pass_target_and_instruction_with_their_distribution() -> None:
    out = dlvm("plugins")
    assert out.returncode == 0, out.stderr
    for name in ("sample-double-negation", "sample-counting", "softsign", "sample-chain",
                 "dlvm-sample-plugin"):
        assert name in out.stdout
    data = json.loads(dlvm("plugins", "--json").stdout)
    softsign_entry = next(i for i in data["instructions"] if i["name"] == "softsign")
    assert softsign_entry["distribution"] == "dlvm-sample-plugin"
    assert softsign_entry["plugin"] == "sample"
    assert next(p for p in data["passes"] if p["name"] == "sample-double-negation")[
        "qualified_name"] == "sample:sample-double-negation"
    assert data["clashes"] == []


@needs_sample
def test_the_plugin_pass_runs_by_plain_and_qualified_name() -> None:
    for name in ("sample-double-negation", "sample:sample-double-negation"):
        out = dlvm("opt", "-", "-p", name, "--stats", input=NEGATIONS)
        assert out.returncode == 0, out.stderr
        assert "negate" not in out.stdout
        assert "%c = add %x: <3 x f32>, 1.0: f32" in out.stdout
        assert "double negations removed" in out.stderr


@needs_sample
def test_the_plugin_target_runs_a_function(tmp_path: Path, inputs: Path) -> None:
    out_file = tmp_path / "out.npz"
    out = dlvm("exec", str(EXAMPLE / "softsign.dl"), "-f", "f", "--target", "sample-counting",
               "--args", str(inputs), "-o", str(out_file))
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(out_file)["out0"], softsign(X).sum() + 1, rtol=1e-6)


@needs_sample
def test_the_plugin_instruction_is_differentiated_by_its_adjoint_rule(
        tmp_path: Path, inputs: Path) -> None:
    out_file = tmp_path / "grad.npz"
    out = dlvm("exec", str(EXAMPLE / "softsign.dl"), "-f", "df", "--args", str(inputs),
               "-o", str(out_file))
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(out_file)["out0"], 1 / (1 + np.abs(X)) ** 2, rtol=1e-6)


@needs_sample
def test_adjoint_and_tangent_rules_match_finite_differences() -> None:
    from dlvm.ad.testing import check_gradient, check_tangent

    text = """
func @f: (<4 x f64>) -> <4 x f64> {
'entry(%x: <4 x f64>):
    %y = softsign %x: <4 x f64>
    %z = multiply %y: <4 x f64>, %x: <4 x f64>
    return %z: <4 x f64>
}
[gradient @f seedable]
func @df: (<4 x f64>, <4 x f64>) -> (<4 x f64>)
[tangent @f]
func @tf: (<4 x f64>, <4 x f64>) -> (<4 x f64>)
"""
    x = np.array([-1.5, -0.2, 0.4, 2.5])
    check_gradient(text, "f", "df", [x])
    check_tangent(text, "f", "tf", [x], [np.array([1.0, -2.0, 0.5, 3.0])])


@needs_sample
def test_python_parses_the_plugin_instruction_without_loading_plugins_first() -> None:
    code = f"""
import numpy as np
import dlvm.ir as ir
m = ir.parse_file({str(EXAMPLE / "softsign.dl")!r})
ir.verify(m)
(y,) = ir.compile(m, target="sample-counting").call("f", np.array([1.0, -1.0, 3.0], np.float32))
print(float(y))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == pytest.approx(0.5 - 0.5 + 0.75 + 1)


@needs_sample
def test_coverage_counts_the_plugin_instruction() -> None:
    out = subprocess.run([sys.executable, "-m", "dlvm.ad.coverage"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "| activation | `softsign` | yes | yes | from dlvm-sample-plugin |" in out.stdout


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


CHAIN = EXAMPLE / "twice-softsign.chain"


@needs_sample
def test_the_plugin_front_end_reads_chain_files_for_every_command(tmp_path: Path,
                                                                   inputs: Path) -> None:
    out_file = tmp_path / "out.npz"
    out = dlvm("exec", str(CHAIN), "-f", "f", "--args", str(inputs), "-o", str(out_file))
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(out_file)["out0"], 2 * softsign(-X), rtol=1e-6)
    printed = dlvm("opt", str(CHAIN))
    assert printed.returncode == 0, printed.stderr
    assert "softsign %0.0: <3 x f32>" in printed.stdout


@needs_sample
def test_a_bad_chain_file_is_one_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.chain"
    bad.write_text("input 3 x f32\nnegate\n  dot 2\n")
    out = dlvm("verify", str(bad))
    assert out.returncode == 1
    assert out.stderr == (f"dlvm: error: {bad}:3:3: error: 'dot' is not an element-wise "
                          "instruction of one or two operands\n")


@needs_sample
def test_load_module_reads_a_chain_file_in_python() -> None:
    code = f"""
import numpy as np
import dlvm.ir as ir
m = ir.load_module({str(CHAIN)!r})
print(float(ir.compile(m, target="interp")["f"](np.array([1.0, 0.0, -3.0], np.float32))[2]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == pytest.approx(1.5)


@needs_sample
def test_the_trace_command_shows_each_instruction_and_its_value(inputs: Path) -> None:
    out = dlvm("sample", "trace", str(CHAIN), "--args", str(inputs))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "%0.0 = negate %x: <3 x f32>"
    assert lines[1] == "    = [ 2. -0. -3.]"
    assert lines[-1] == "return %0.2: <3 x f32>"


@needs_sample
def test_the_plugin_target_takes_the_options_every_target_accepts(inputs: Path) -> None:
    run = ("exec", str(EXAMPLE / "softsign.dl"), "-f", "f", "--target", "sample-counting",
           "--args", str(inputs))
    assert dlvm(*run, "--seed", "1", "--timeout", "30").returncode == 0
    bounded = dlvm(*run, "--max-steps", "1")
    assert bounded.returncode == 1
    assert "'@f' exceeded the limit of 1 steps" in bounded.stderr
    refused = dlvm(*run, "--target-option", "seed=-1")
    assert refused.stderr == ("dlvm: error: target 'sample-counting': option 'seed' must be "
                              "at least 0, found -1\n")


@needs_sample
def test_the_plugin_target_counts_instructions_through_the_interpreters_hook() -> None:
    from dlvm_sample_plugin.target import CountingExecutable, CountingTarget

    import dlvm.ir as ir

    exe = CountingTarget().compile(ir.parse(NEGATIONS))
    assert isinstance(exe, CountingExecutable)
    np.testing.assert_allclose(exe["f"](X), X + 1)
    assert (exe.calls, exe.instructions) == (1, 4)
