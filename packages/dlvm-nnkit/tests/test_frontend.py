"""A Python file of staged functions is a module for every `dlvm` command: named after the
variables that hold them, gradients as declarations; failures are one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.nnkit.frontend import load_file

MODEL = '''
from dlvm import nnkit as nn
from dlvm.nnkit import Float1D, Float2D

f = nn.lambda_(lambda x, w, b: x @ w + b.rank_lifted(), (Float2D, Float2D, Float1D))
g = nn.lambda_(lambda x, w, b: nn.tanh(f[x, w, b]), (Float2D, Float2D, Float1D))
dg = nn.gradient(g, wrt=(1, 2), keeping=0)
'''


def dlvm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_the_staged_functions_of_a_file_are_a_module(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    module = load_file(str(path))
    assert [fn.name for fn in module.functions] == ["f", "g", "dg"]
    assert "[gradient @g wrt 1, 2 keeping 0]" in ir.print_module(module)
    exe = ir.compile(module, "interp")
    rng = np.random.default_rng(0)
    x, w, b = rng.random((2, 3)), rng.random((3, 4)), rng.random(4)
    x, w, b = (a.astype(np.float32) for a in (x, w, b))
    dw, db, y = exe["dg"](x, w, b)
    np.testing.assert_allclose(y, np.tanh(x @ w + b), rtol=1e-5)
    np.testing.assert_allclose(db, (1 - y * y).sum(0), rtol=1e-5)
    np.testing.assert_allclose(dw, x.T @ (1 - y * y), rtol=1e-5)


def test_the_command_line_reads_python_files(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    done = dlvm("opt", str(path), "-p", "differentiation,O2")
    assert done.returncode == 0, done.stderr
    assert "func @dg:" in done.stdout and "[gradient" not in done.stdout


def test_failures_are_one_line_errors(tmp_path: Path) -> None:
    crash = tmp_path / "crash.py"
    crash.write_text("import math\n\nx = math.log(0)\n")
    done = dlvm("verify", str(crash))
    assert done.returncode == 1
    assert done.stderr == f"dlvm: error: {crash}:3: error: ValueError: math domain error\n"
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    done = dlvm("verify", str(empty))
    assert done.returncode == 1 and "defines no staged function" in done.stderr
    untyped = tmp_path / "untyped.py"
    untyped.write_text("from dlvm import nnkit as nn\nh = nn.lambda_(lambda x: x * 2.0)\n")
    done = dlvm("verify", str(untyped))
    assert done.returncode == 1 and "'h' declares no argument types" in done.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("from dlvm import nnkit as nn\n"
                   "h = nn.lambda_(lambda x, w: nn.dot(x, w), (nn.Float2D, nn.Float1D))\n")
    done = dlvm("verify", str(bad))
    assert done.returncode == 1
    assert done.stderr.startswith(f"dlvm: error: {bad}:2: error: 'dot': ")
    assert done.stderr.count("\n") == 1


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


HEAD = "from dlvm import nnkit as nn\nfrom dlvm.nnkit import Double1D\n"


def test_a_function_is_named_after_its_variable_unless_given_a_name(tmp_path: Path) -> None:
    path = write(tmp_path, "names.py", HEAD + (
        "def make(k):\n"
        "    @nn.function\n"
        "    def g(x: Double1D):\n"
        "        return x * k\n"
        "    return g\n"
        "double = make(2.0)\n"
        "triple = make(3.0)\n"
        "named = nn.lambda_(lambda x: x + 1.0, (Double1D,), name='plus_one')\n"))
    module = load_file(path)
    assert [fn.name for fn in module.functions] == ["double", "triple", "plus_one"]
    exe = ir.compile(module, "interp")
    np.testing.assert_array_equal(exe["triple"](np.ones(2)), [3.0, 3.0])


@pytest.mark.parametrize("source", [
    "g = nn.lambda_(lambda x: x * 2.0, (Double1D,))\n"
    "h = nn.lambda_(lambda x: x * 3.0, (Double1D,), name='g')\n",
    "a = nn.lambda_(lambda x: x * 2.0, (Double1D,), name='g')\n"
    "b = nn.lambda_(lambda x: x * 3.0, (Double1D,), name='g')\n",
    "g = nn.lambda_(lambda x: x * 2.0, (Double1D,))\n"
    "dg = nn.gradient(nn.lambda_(lambda x: nn.sum(x), (Double1D,)), name='g')\n",
], ids=["variable-and-name", "two-names", "gradient-named-alike"])
def test_two_functions_that_would_share_a_name_are_refused(tmp_path: Path,
                                                           source: str) -> None:
    """Never `@g` and `@g_1`: `dlvm exec -f g` must not run the other one."""
    path = write(tmp_path, "clash.py", HEAD + source)
    with pytest.raises(ir.FrontendError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: error: ") and "\n" not in message
    assert "would be staged as '@g'" in message and f"({path}:3)" in message
    assert "give one of them another name (name=…)" in message


def test_a_callee_named_like_a_file_function_leaves_it_the_name(tmp_path: Path) -> None:
    """`-f g` calls the `g` of the file, whatever its callees are called."""
    path = write(tmp_path, "callee.py", HEAD + (
        "def make():\n"
        "    return nn.lambda_(lambda x: x * 2.0, (Double1D,), name='g')\n"
        "g = nn.lambda_(lambda x: make()[x] + 1.0, (Double1D,))\n"))
    module = load_file(path)
    assert [fn.name for fn in module.functions] == ["g", "g_1"]
    np.testing.assert_array_equal(ir.compile(module, "interp")["g"](np.ones(2)), [3.0, 3.0])


def test_a_function_held_by_two_variables_is_staged_once(tmp_path: Path) -> None:
    path = write(tmp_path, "alias.py", HEAD + (
        "f = nn.lambda_(lambda x: x * 2.0, (Double1D,))\n"
        "also_f = f\n"))
    assert [fn.name for fn in load_file(path).functions] == ["f"]


@pytest.mark.parametrize(("source", "words"), [
    ("nn.Dense(-1, 3)\n", ":3: error: inputs of nnkit.Dense must be a positive integer"),
    ("nn.Adam(-1)\n", ":3: error: beta1 of nnkit.Adam must be a finite number in [0, 1)"),
    ("f = nn.lambda_(lambda x: nn.sum(x), (Double1D,))\ndf = nn.gradient(f, wrt=())\n",
     ":4: error: wrt of nnkit.gradient must be at least one index"),
    ("f = nn.lambda_(lambda x, y: x + y, (Double1D,))\n",
     ":3: error: nnkit.lambda_ got 1 type for a function of 2 arguments (x, y)"),
    ("f = nn.lambda_(lambda x: x.foo, (Double1D,))\n",
     ":3: error: a staged tensor of type <_ x f64> has no attribute 'foo'"),
    ("import sys\nsys.exit(3)\n", ": error: the file exits (SystemExit: 3)"),
    ("def f(:\n", ":3:7: error: SyntaxError: "),
], ids=["dense", "adam", "empty-wrt", "few-types", "attribute", "exit", "syntax"])
def test_mistakes_in_a_file_are_one_line_errors_at_their_line(tmp_path: Path, source: str,
                                                               words: str) -> None:
    path = write(tmp_path, "model.py", HEAD + source)
    with pytest.raises(ir.DlvmError) as caught:
        load_file(path)
    message = str(caught.value)
    assert message.startswith(path) and words in message, message
    assert "\n" not in message


def test_a_file_that_cannot_be_read_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "folder.py"
    folder.mkdir()
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"x = '\xff'\n")
    for path, why in ((folder, "it is a directory"), (binary, "it is not UTF-8 text"),
                      (tmp_path / "missing.py", "it does not exist")):
        with pytest.raises(ir.DlvmError, match=f"cannot read module '{path}': {why}"):
            load_file(str(path))
