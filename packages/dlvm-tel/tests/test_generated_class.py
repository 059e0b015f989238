"""The class `dlvm tel generate` writes: `load` checks every parameter before it replaces
any and refuses what is not the model's real numbers; `save` writes atomically; TEL names
Python would not take (keywords, the class's own members, the generated code's names) are
mangled, and a model of such names imports, passes ruff and mypy, and trains."""

from __future__ import annotations

import ast
import importlib.util
import keyword
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.tel.api import render, render_file
from dlvm.tel.python_names import (
    CLASS_SCOPE,
    MEMBER_NAMES,
    METHOD_SCOPE,
    MODULE_SCOPE,
    class_name,
    python_names,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

SMALL = """
module small
type float32
x: in[_ x 3]
target: in[_ x 2]
w: param[3 x 2] = glorot
b: param[2] = 0.0
y: out[_ x 2] = softmax(x . w + b)
loss xent = cross_entropy(y, target)
"""

INTEGERS = """
module counts
type int8
x: in[3]
k: param[3] = 1
y: out[3] = x * k
"""

# every name the generated code uses, keywords, names beginning with underscores, a long
# one, and a name that a mangled one would become (`lambda_`)
HOSTILE = [
    *sorted((MEMBER_NAMES | MODULE_SCOPE) - {"loss"}), "lambda", "None", "True", "class", "def",
    "import", "__init__", "__call__", "__dict__", "__x", "_", "__", "lambda_", "self_",
    "q" * 120, "target", "seed", "path"]


def generated(text: str, tmp: Path, stem: str) -> tuple[Path, ModuleType]:
    """The module generated for the TEL text, written to `tmp` and imported."""
    out = tmp / f"{stem}.py"
    out.write_text(render(tel.check(tel.parse(text, f"{stem}.tel")), f"{stem}.tel"),
                   encoding="utf-8")
    spec = importlib.util.spec_from_file_location(stem, out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return out, module


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generated(SMALL, tmp_path_factory.mktemp("small"), "small_api")[1]


@pytest.fixture
def model(small: ModuleType) -> Any:
    return small.Small(seed=0, target="interp")


def snapshot(model: Any) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in model.parameters.items()}


def assert_unchanged(model: Any, before: dict[str, np.ndarray]) -> None:
    for key, value in model.parameters.items():
        np.testing.assert_array_equal(value, before[key])


# ------------------------------------------------------------ load: all checked, then assigned


def test_a_load_that_fails_on_a_later_parameter_changes_none(model: Any, tmp_path: Path
                                                              ) -> None:
    before = snapshot(model)
    np.savez(tmp_path / "p.npz", w=np.ones((3, 2), np.float32), b=np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"'b' has shape \(5,\), expected \(2,\)"):
        model.load(tmp_path / "p.npz")
    assert_unchanged(model, before)


@pytest.mark.parametrize(("value", "problem"), [
    (np.ones(2, np.complex64), "complex64 values, not real numbers"),
    (np.array(["1", "2"]), "<U1 values, not real numbers"),
    (np.array([True, False]), "bool values, not real numbers"),
    (np.array([1.0, np.nan], np.float32), "NaN, infinite or beyond-float32 values"),
    (np.array([1.0, -np.inf]), "NaN, infinite or beyond-float32 values"),
    (np.array([1.0, 1e300]), "NaN, infinite or beyond-float32 values"),
])
def test_load_refuses_what_is_not_a_finite_real_number(model: Any, tmp_path: Path,
                                                        value: np.ndarray, problem: str
                                                        ) -> None:
    before = snapshot(model)
    np.savez(tmp_path / "p.npz", w=np.ones((3, 2)), b=value)
    with pytest.raises(ValueError, match=f"'b' holds {problem}"):
        model.load(tmp_path / "p.npz")
    assert_unchanged(model, before)


def test_load_takes_any_real_numbers_of_the_right_shape(model: Any, tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", w=np.arange(6, dtype=np.int64).reshape(3, 2),
             b=np.array([0.5, 2.0]))
    model.load(tmp_path / "p.npz")
    assert model.w.dtype == np.float32 and model.b.dtype == np.float32
    np.testing.assert_array_equal(model.w, np.arange(6).reshape(3, 2))


@pytest.mark.parametrize(("arrays", "problem"), [
    ({"w": np.ones((3, 2))}, "no parameter 'b'"),
    ({"w": np.ones((3, 2)), "b": np.ones(2), "extra": np.ones(1)},
     "'extra' is not a parameter of the model"),
])
def test_load_wants_exactly_the_models_parameters(model: Any, tmp_path: Path,
                                                  arrays: dict[str, np.ndarray], problem: str
                                                  ) -> None:
    before = snapshot(model)
    np.savez(tmp_path / "p.npz", **arrays)
    with pytest.raises(ValueError, match=problem):
        model.load(tmp_path / "p.npz")
    assert_unchanged(model, before)


def test_load_refuses_files_that_are_not_parameter_archives(model: Any, tmp_path: Path
                                                             ) -> None:
    before = snapshot(model)
    (tmp_path / "text.npz").write_text("not an archive\n")
    np.save(tmp_path / "one.npy", np.ones(3))
    np.savez(tmp_path / "objects.npz", w=np.array([object()], dtype=object))
    for name in ("text.npz", "one.npy", "objects.npz"):
        with pytest.raises(ValueError, match="not a parameter archive"):
            model.load(tmp_path / name)
    for path, reason in ((tmp_path / "missing.npz", "does not exist"),
                         (tmp_path, "is a directory")):
        with pytest.raises(ir.DlvmError, match=f"cannot read parameters .*{reason}"):
            model.load(path)
    assert_unchanged(model, before)


def test_an_integer_model_refuses_floats_and_values_beyond_its_type(tmp_path: Path) -> None:
    _, api = generated(INTEGERS, tmp_path, "counts_api")
    model = api.Counts(target="interp")
    for value, problem in ((np.array([1.5, 2, 3]), "float64 values, not integers"),
                           (np.array([1, 2, 300]), "beyond the range of int8")):
        np.savez(tmp_path / "p.npz", k=value)
        with pytest.raises(ValueError, match=problem):
            model.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(model.k, [1, 1, 1])
    np.savez(tmp_path / "p.npz", k=np.array([-128, 0, 127], np.int64))
    model.load(tmp_path / "p.npz")
    assert model.k.dtype == np.int8 and list(model.k) == [-128, 0, 127]


# ------------------------------------------------------------ save: atomic, checked


def test_save_writes_exactly_the_path_and_load_reads_it_back(small: ModuleType,
                                                             model: Any, tmp_path: Path
                                                             ) -> None:
    model.save(tmp_path / "params")  # no `.npz` added
    assert sorted(os.listdir(tmp_path)) == ["params"]
    other = small.Small(seed=1, target="interp")
    other.load(tmp_path / "params")
    assert_unchanged(other, snapshot(model))


def test_a_failing_save_leaves_the_old_file_and_no_temporary(model: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    path = tmp_path / "p.npz"
    model.save(path)
    good = path.read_bytes()

    def fail_half_way(file: Any, **arrays: Any) -> None:
        file.write(b"PK half an archive")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", fail_half_way)
    with pytest.raises(ir.DlvmError, match=r"cannot write parameters .*no space left"):
        model.save(path)
    assert path.read_bytes() == good and sorted(os.listdir(tmp_path)) == ["p.npz"]


def test_save_refuses_parameters_load_would_refuse(model: Any, tmp_path: Path) -> None:
    path = tmp_path / "p.npz"
    model.save(path)
    good = path.read_bytes()
    model.b = np.array([np.nan, 0.0], np.float32)
    with pytest.raises(ValueError, match="'b' holds NaN"):
        model.save(path)
    model.b = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="'b' has shape"):
        model.save(path)
    assert path.read_bytes() == good


def test_save_where_no_file_can_be_made_says_why(model: Any, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a folder\n")
    for path, reason in ((tmp_path / "plain" / "p.npz", "not a directory"),
                         (tmp_path, "is a directory")):
        with pytest.raises(ir.DlvmError, match=f"cannot write parameters .*{reason}"):
            model.save(path)
    assert sorted(os.listdir(tmp_path)) == ["plain"]


# ------------------------------------------------------------ names Python would not take


@pytest.mark.parametrize(("module", "expected"), [
    ("digits", "Digits"), ("digit_model", "DigitModel"), ("None", "None_"), ("True", "True_"),
    ("IR", "IR_"), ("i_r", "IR_"), ("array", "Array_"), ("checked", "Checked"),
    ("files", "Files"), ("_", "Model"), ("__init__", "Init"), ("lambda", "Lambda"),
    ("value_error", "ValueError_"), ("_2d", "Model2d"),
])
def test_the_class_name_is_the_module_name_made_usable(module: str, expected: str) -> None:
    assert class_name(module) == expected
    text = f"module {module}\nx: in[2]\ny: out[2] = x\n"
    code = render(tel.check(tel.parse(text, "m.tel")), "m.tel")
    namespace: dict[str, Any] = {"__name__": "generated"}
    exec(compile(code, "m.py", "exec"), namespace)
    assert namespace[expected].__name__ == expected


def test_mangled_names_are_distinct_and_documented() -> None:
    names = python_names(["lambda", "lambda_", "self", "self_", "__x", "x_", "w", "__"])
    assert names == {"lambda": "lambda__", "lambda_": "lambda_", "self": "self__",
                     "self_": "self_", "__x": "x__", "x_": "x_", "w": "w", "__": "name_"}
    assert all(n.isidentifier() and not keyword.iskeyword(n) for n in names.values())


def hostile_inputs() -> str:
    lines = ["module None", "w: param[2 x 2] = glorot", "t: in[_ x 2]"]
    lines += [f"{n}: in[_ x 2]" for n in HOSTILE]
    lines += ["y: out[_ x 2] = (" + " + ".join(HOSTILE) + ") . w", "loss l = mse(y, t)"]
    return "\n".join(lines) + "\n"


def hostile_parameters() -> str:
    lines = ["module IR", "x: in[_ x 2]", "t: in[_ x 2]", f"{HOSTILE[0]}: param[2 x 2] = glorot"]
    lines += [f"{n}: param[2] = 0.0" for n in HOSTILE[1:]]
    lines += [f"y: out[_ x 2] = x . {HOSTILE[0]} + " + " + ".join(HOSTILE[1:]),
              "loss l = mse(y, t)", "optimizer adamw(warmup = 1, decay = [lambda])"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModuleType, ModuleType]:
    tmp = tmp_path_factory.mktemp("hostile")
    path_a, inputs = generated(hostile_inputs(), tmp, "hostile_inputs")
    _, parameters = generated(hostile_parameters(), tmp, "hostile_parameters")
    return path_a.parent, inputs, parameters


def test_a_model_of_hostile_input_names_trains(hostile: tuple[Path, ModuleType, ModuleType]
                                               ) -> None:
    api = hostile[1]
    model = api.None_(seed=0, target="interp")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 2)).astype(np.float32) for _ in range(len(HOSTILE) + 1)]
    before = model.loss(*args)
    for _ in range(3):
        model.step(*args, 0.0005)
    assert model.loss(*args) < before
    doc = " ".join(api.None_.__doc__.split())
    assert "self as self__" in doc and "lambda as lambda__" in doc
    assert model(*args[1:]).shape == (4, 2)


def test_a_model_of_hostile_parameter_names_trains_saves_and_loads(
        hostile: tuple[Path, ModuleType, ModuleType], tmp_path: Path) -> None:
    api = hostile[2]
    model = api.IR_(seed=0, target="interp")
    assert list(model.parameters) == HOSTILE  # TEL names, in declaration order
    assert api.ATTRIBUTES["lambda"] == "lambda__" and api.ATTRIBUTES["__init__"] == "init___"
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((8, 2)), rng.standard_normal((8, 2))
    before = model.loss(x, t)
    for _ in range(3):
        model.step(x, t, 0.005)
    assert model.loss(x, t) < before
    assert set(model.grad(x, t)) == set(HOSTILE)
    model.save(tmp_path / "p.npz")
    again = api.IR_(seed=1, target="interp")
    again.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(again.lambda__, model.lambda__)
    assert callable(again.load) and callable(again.parameters.get)  # members intact


def test_the_generated_code_passes_ruff_and_mypy(hostile: tuple[Path, ModuleType, ModuleType],
                                                tmp_path: Path) -> None:
    """The examples' modules and the hostile ones, in one run of each tool."""
    files = [str(hostile[0] / "hostile_inputs.py"), str(hostile[0] / "hostile_parameters.py")]
    for example in ("tel-digits", "tel-rnn"):
        model = EXAMPLES / example / "model.tel"
        out = tmp_path / f"{example.replace('-', '_')}_api.py"
        out.write_text(render(tel.check(tel.parse(model.read_text(), str(model))), model.name))
        files.append(str(out))
    checked = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                              "--line-length", "100", "--select", "E,F,W,I,UP,B", *files],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    typed = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                            "--cache-dir", str(tmp_path / "mypy"), *files],
                           capture_output=True, text=True, cwd=tmp_path)
    assert typed.returncode == 0, typed.stdout + typed.stderr


# locals of the methods and functions no TEL name reaches (`__init__`, `save`, `load`,
# `checked`): they need no reserving
UNREACHED = {"seed", "target", "initial", "values", "shape", "path", "arrays", "stream",
             "archive", "e", "name", "unknown", "missing", "converted", "bounds", "source",
             "_", "__future__", "zeros"}


def test_the_reserved_names_cover_every_name_the_generated_code_uses(
        hostile: tuple[Path, ModuleType, ModuleType]) -> None:
    """A name added to the generated code must join the table of its scope (or be a local
    no TEL name meets), or a model could shadow it."""
    for path, api in ((hostile[0] / "hostile_inputs.py", hostile[1]),
                      (hostile[0] / "hostile_parameters.py", hostile[2])):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        tel_names = set(api.ATTRIBUTES.values()) | set(argument_names(tree)) | {
            c.name for c in tree.body if isinstance(c, ast.ClassDef)}
        used: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.arg):
                used.add(node.arg)
            elif isinstance(node, ast.FunctionDef):
                used.add(node.name)
            elif isinstance(node, ast.alias):
                used.add(node.asname or node.name.split(".")[0])
        dunder = {n for n in used if n.startswith("__") and n.endswith("__")}
        assert used - tel_names - dunder - UNREACHED <= CLASS_SCOPE | METHOD_SCOPE | MODULE_SCOPE


def argument_names(tree: ast.Module) -> list[str]:
    """The arguments of the methods that take the model's inputs, but `self` and `lr`."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in ("__call__", "loss", "grad",
                                                                "step"):
            out += [a.arg for a in node.args.args if a.arg not in ("self", "lr")]
    return out


def test_generate_takes_expressions_thousands_deep(tmp_path: Path) -> None:
    """As `compile` does: a sum of thousands of terms is a tree thousands deep."""
    model = tmp_path / "deep.tel"
    model.write_text("module deep\nx: in[2]\ny: out[2] = " + " + ".join(["x"] * 3000) + "\n")
    assert "class Deep:" in render_file(model)


def test_a_source_file_name_of_quotes_and_backslashes_keeps_the_module_valid() -> None:
    text = "module m\nx: in[2]\ny: out[2] = x\n"
    code = render(tel.check(tel.parse(text, "m.tel")), 'we"""ird\\ \x07name.tel')
    tree = ast.parse(code)
    assert "we???ird? ?name.tel" in (ast.get_docstring(tree) or "")
