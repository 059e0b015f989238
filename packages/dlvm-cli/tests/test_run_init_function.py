"""`dlvm run`: `train.init_function`, initial parameters made by a function of the module,
run once by the reference interpreter seeded with `init_seed`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import linear_regression

Invoke = Callable[..., Any]

# Linear regression with a hand-written gradient (no AD needed), and initializations.
MODULE = """\
module "regression"
stage raw

type $params = (<4 x 3 x f32>, <3 x f32>)

// the initial parameters: uniform weights, biases of 0.1
func @init: () -> $params {
'entry():
    %w = random 4 x 3 from -0.5: f32 upto 0.5: f32
    %b = literal 0.1: <3 x f32>
    %r = literal (%w: <4 x 3 x f32>, %b: <3 x f32>): $params
    return %r: $params
}

func @init_nan: () -> (<4 x 3 x f32>, <3 x f32>) {
'entry():
    %w = random 4 x 3 from -0.5: f32 upto 0.5: f32
    %b = literal <0: f32, nan: f32, 0: f32>: <3 x f32>
    %r = literal (%w: <4 x 3 x f32>, %b: <3 x f32>): (<4 x 3 x f32>, <3 x f32>)
    return %r: (<4 x 3 x f32>, <3 x f32>)
}

func @init_trap: () -> $params {
'entry():
    trap
    %r = literal zero: $params
    return %r: $params
}

func @init_args: (f32) -> $params {
'entry(%s: f32):
    %r = literal zero: $params
    return %r: $params
}

func @init_three: () -> (<4 x 3 x f32>, <3 x f32>, f32) {
'entry():
    %r = literal zero: (<4 x 3 x f32>, <3 x f32>, f32)
    return %r: (<4 x 3 x f32>, <3 x f32>, f32)
}

func @init_f64: () -> (<4 x 3 x f32>, <3 x f64>) {
'entry():
    %r = literal zero: (<4 x 3 x f32>, <3 x f64>)
    return %r: (<4 x 3 x f32>, <3 x f64>)
}

""" + linear_regression()

# One parameter: the init function may return the tensor itself.
SCALE = """\
func @init: () -> <3 x f32> {
'entry():
    %w = random 3 from 0.5: f32 upto 1.5: f32
    return %w: <3 x f32>
}

func @step: (<3 x f32>, <_ x 3 x f32>, <_ x 3 x f32>, f32) -> (<3 x f32>, f32) {
'entry(%w: <3 x f32>, %x: <_ x 3 x f32>, %y: <_ x 3 x f32>, %lr: f32):
    %wp = padShape %w: <3 x f32> at 0
    %p = multiply %x: <_ x 3 x f32>, %wp: <1 x 3 x f32>
    %e = subtract %p: <_ x 3 x f32>, %y: <_ x 3 x f32>
    %sq = multiply %e: <_ x 3 x f32>, %e: <_ x 3 x f32>
    %total = reduce %sq: <_ x 3 x f32> by add init 0.0: f32
    %count = unitCount of %e: <_ x 3 x f32>
    %n = dataTypeCast %count: i64 to f32
    %loss = divide %total: f32, %n: f32
    %r = literal (%w: <3 x f32>, %loss: f32): (<3 x f32>, f32)
    return %r: (<3 x f32>, f32)
}
"""

PIPELINE = """\
[module]
path = "model.dl"

[target]
name = "interp"
options = { seed = 99 }

[data]
path = "data.npz"
test_fraction = 0.25

[train]
step = "train_step"
init_function = "init"
init_seed = 3
epochs = 2
learning_rate = 0.05
batch_size = 8
checkpoint = "params.npz"
metrics = "metrics.jsonl"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """model.dl, data.npz (32 examples of 4 inputs and 3 targets) and pipeline.toml."""
    (tmp_path / "model.dl").write_text(MODULE)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = (x @ rng.normal(size=(4, 3)) + 1.0).astype(np.float32)
    np.savez(tmp_path / "data.npz", inputs=x, labels=y)
    (tmp_path / "pipeline.toml").write_text(PIPELINE)
    return tmp_path


# one epoch that leaves the parameters as they start: the checkpoint holds the initial ones
UNCHANGED = ("--set", "train.epochs=1", "--set", "train.learning_rate=0")


def run(invoke: Invoke, project: Path, *args: str) -> Any:
    return invoke("run", str(project / "pipeline.toml"), "--quiet", *args)


def latest(project: Path) -> Path:
    """The newest run's folder."""
    return project / "out" / "pipeline" / "latest"


def checkpoint(project: Path) -> dict[str, np.ndarray]:
    with np.load(latest(project) / "params.npz") as ckpt:
        return {k: ckpt[k] for k in ckpt.files}


def reference_init(project: Path, seed: int, name: str = "init") -> tuple[np.ndarray, ...]:
    """What the interpreter seeded with `seed` makes of `@name`."""
    path = str(project / "model.dl")
    return tuple(ir.compile(ir.load_module(path), "interp", seed=seed).call(name))


def one_error(invoke: Invoke, project: Path, *args: str) -> str:
    """Exactly one error line, exit status 1, nothing written; the line."""
    done = run(invoke, project, *args)
    assert done.exit_code == 1, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert not list(project.glob("out/pipeline/*/params.npz"))
    return lines[0]


def test_the_init_function_makes_the_parameters_and_training_runs(invoke: Invoke,
                                                                  project: Path) -> None:
    fresh = run(invoke, project, *UNCHANGED)
    assert fresh.exit_code == 0, fresh.stderr
    w, b = reference_init(project, seed=3)  # init_seed, not the target's seed 99
    np.testing.assert_array_equal(checkpoint(project)["w"], w)
    np.testing.assert_array_equal(checkpoint(project)["b"], b)
    np.testing.assert_array_equal(b, np.full(3, 0.1, np.float32))  # the splat
    assert not np.array_equal(w, reference_init(project, seed=99)[0])
    done = run(invoke, project)
    assert done.exit_code == 0, done.stderr
    assert int(checkpoint(project)["epoch"]) == 2
    records = [json.loads(line) for line in
               (latest(project) / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
    assert records[1]["loss"] < records[0]["loss"]


def test_the_same_seed_gives_the_same_parameters_another_seed_others(invoke: Invoke,
                                                                     project: Path) -> None:
    def initial(seed: int) -> np.ndarray:
        done = run(invoke, project, *UNCHANGED,
                   "--set", f"train.init_seed={seed}")
        assert done.exit_code == 0, done.stderr
        return checkpoint(project)["w"]

    first = initial(5)
    np.testing.assert_array_equal(initial(5), first)
    assert not np.array_equal(initial(6), first)


def test_one_parameter_may_be_returned_as_the_tensor_itself(invoke: Invoke,
                                                            project: Path) -> None:
    (project / "model.dl").write_text(SCALE)
    x = np.random.default_rng(1).normal(size=(32, 3)).astype(np.float32)
    np.savez(project / "data.npz", inputs=x, labels=2 * x)
    done = run(invoke, project, "--set", 'train.step="step"', "--set", "train.epochs=1")
    assert done.exit_code == 0, done.stderr
    np.testing.assert_array_equal(checkpoint(project)["w"], reference_init(project, seed=3)[0])


def test_load_and_resume_take_precedence(invoke: Invoke, project: Path) -> None:
    np.savez(project / "start.npz", w=np.ones((4, 3), np.float32), b=np.zeros(3, np.float32))
    done = run(invoke, project, "--set", 'train.load="start.npz"', *UNCHANGED)
    assert done.exit_code == 0, done.stderr
    np.testing.assert_array_equal(checkpoint(project)["w"], np.ones((4, 3), np.float32))
    done = run(invoke, project, "--set", "train.epochs=1")
    assert done.exit_code == 0, done.stderr
    after_one = checkpoint(project)["w"]
    # resuming never runs the init function again (this one would fail)
    done = run(invoke, project, "--resume", "--set", 'train.init_function="init_trap"')
    assert done.exit_code == 0, done.stderr
    assert int(checkpoint(project)["epoch"]) == 2
    assert not np.array_equal(checkpoint(project)["w"], after_one)


@pytest.mark.parametrize(("setting", "expected"), [
    ('train.init_function="inti"',
     "train.init_function: the module has no function '@inti' (did you mean 'init'?)"),
    ('train.init_function="init_args"',
     "train.init_function: '@init_args' must take no arguments (it returns the initial "
     "parameters); it takes 1 argument"),
    ('train.init_function="init_three"',
     "train.init_function: '@init_three' must return one value per parameter (w, b), 2 in "
     "all; it returns 3"),
    ('train.init_function="init_f64"',
     "train.init_function: '@init_f64' returns '<3 x f64>' for parameter 'b' of type "
     "'<3 x f32>'"),
    ('train.init="zeros"',
     "train.init_function: give either 'init' or 'init_function', not both"),
    ("train.init_scale=0.1",
     "train.init_scale: is the spread of init = \"normal\"; it has no effect with "
     "'init_function': remove one of them"),
])
def test_a_dry_run_finds_a_wrong_init_function(invoke: Invoke, project: Path, setting: str,
                                               expected: str) -> None:
    line = one_error(invoke, project, "--dry-run", "--set", setting)
    assert ": error: " in line and line.endswith(expected)


def test_errors_name_the_line_of_the_file(invoke: Invoke, project: Path) -> None:
    text = PIPELINE.replace('init_function = "init"', 'init_function = "init_three"')
    (project / "pipeline.toml").write_text(text)
    line = one_error(invoke, project, "--dry-run")
    assert line.startswith(f"{project / 'pipeline.toml'}:14:1: error: train.init_function: ")
    (project / "pipeline.toml").write_text(PIPELINE.replace("init_seed = 3",
                                                            'init = "glorot"'))
    line = one_error(invoke, project, "--dry-run")
    assert line == (f"{project / 'pipeline.toml'}:14:1: error: train.init_function: give "
                    "either 'init' or 'init_function', not both")


def test_the_dry_run_shows_the_init_function(invoke: Invoke, project: Path) -> None:
    done = run(invoke, project, "--dry-run")
    assert done.exit_code == 0, done.stderr
    train = json.loads(done.stdout)["train"]
    assert train["init_function"] == "init" and train["init_seed"] == 3


@pytest.mark.parametrize(("name", "expected"), [
    ("init_trap", "dlvm: error: train.init_function: '@init_trap' failed: {module}:"),
    ("init_nan", "dlvm: error: train.init_function: '@init_nan' returns nan for parameter "
                 "'b' at index (1,); the initial parameters must be finite"),
])
def test_a_failing_or_nonfinite_init_function_is_one_line(invoke: Invoke, project: Path,
                                                          name: str, expected: str) -> None:
    line = one_error(invoke, project, "--set", f'train.init_function="{name}"')
    assert line.startswith(expected.format(module=project / "model.dl"))
    assert not list(project.glob("out/pipeline/*/metrics.jsonl"))
