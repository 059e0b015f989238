"""`dlvm run PIPELINE.toml`: training end to end, resume, overrides, dry run, emit, call,
and one test per class of validation error (each one line, exit 1, nothing written).
Each run writes into its own folder, out/pipeline/<run>/, linked as out/pipeline/latest."""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

FIXTURE = Path(__file__).parent / "run"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the fixture folder: pipeline.toml, linear.dl, blobs.npz."""
    shutil.copytree(FIXTURE, tmp_path / "p", ignore=shutil.ignore_patterns("out"))
    return tmp_path / "p"


def dlvm(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlvm.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd)


def latest(project: Path, pipeline: str = "pipeline") -> Path:
    """The folder of the newest run of `pipeline`.toml (the `latest` link resolved)."""
    return (project / "out" / pipeline / "latest").resolve()


def metrics(project: Path) -> list[dict[str, float]]:
    lines = (latest(project) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_training_lowers_the_loss_checkpoints_and_resumes(project: Path) -> None:
    done = dlvm("run", project / "pipeline.toml")
    assert done.returncode == 0, done.stderr
    assert "test accuracy:" in done.stdout
    first = metrics(project)
    assert [m["epoch"] for m in first] == [1, 2, 3, 4]
    assert first[-1]["loss"] < first[0]["loss"]
    with np.load(latest(project) / "params.npz") as ckpt:
        assert int(ckpt["epoch"]) == 4 and ckpt["w"].shape == (4, 3)
    resumed = dlvm("run", project / "pipeline.toml", "--resume", "--set", "train.epochs=6")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stdout
    assert [m["epoch"] for m in metrics(project)] == [1, 2, 3, 4, 5, 6]
    assert metrics(project)[-1]["loss"] < first[-1]["loss"]
    done = dlvm("run", project / "pipeline.toml", "--resume", "--set", "train.epochs=5")
    assert done.returncode == 0, done.stderr
    assert "dlvm: note: nothing to do: checkpoint is at epoch 6 of 5" in done.stderr
    assert [m["epoch"] for m in metrics(project)] == [1, 2, 3, 4, 5, 6]


def test_runs_from_another_directory_with_paths_relative_to_the_file(project: Path,
                                                                     tmp_path: Path) -> None:
    done = dlvm("run", project / "pipeline.toml", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (latest(project) / "params.npz").is_file()
    assert not (tmp_path / "out").exists()


def test_dry_run_prints_the_resolved_pipeline_and_writes_nothing(project: Path) -> None:
    done = dlvm("run", project / "pipeline.toml", "--dry-run", "--set", "train.epochs=9")
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)
    assert resolved["train"]["epochs"] == 9
    assert resolved["train"]["parameters"] == ["w", "b"]
    assert resolved["target"]["name"] == "interp"
    assert Path(resolved["module"]["path"]).is_absolute()
    assert Path(resolved["run"]["folder"]).parent == project / "out" / "pipeline"
    assert not (project / "out").exists()


def test_emit_and_call_after_training(project: Path) -> None:
    assert dlvm("run", project / "pipeline.toml", "--quiet").returncode == 0
    np.save(project / "x.npy", np.ones((5, 4), np.float32))
    (project / "infer.toml").write_text("""
[module]
path = "linear.dl"
[passes]
pipeline = "differentiation"
[emit]
output = "optimized.dl"
[call]
function = "predict"
parameters = "out/pipeline/latest/params.npz"
args = ["x.npy"]
output = "scores.npz"
""")
    done = dlvm("run", project / "infer.toml")
    assert done.returncode == 0, done.stderr
    assert "call: out0: float32 (5, 3)" in done.stdout
    assert "func @dloss" in (latest(project, "infer") / "optimized.dl").read_text()
    with np.load(latest(project, "infer") / "scores.npz") as out:
        assert out["out0"].shape == (5, 3)


def test_ctrl_c_stops_after_the_step_and_keeps_the_last_checkpoint(project: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dlvm.cli", "run",
                             str(project / "pipeline.toml"), "--set", "train.epochs=100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    checkpoint = project / "out" / "pipeline" / "latest" / "params.npz"
    deadline = time.monotonic() + 60
    while not checkpoint.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted after epoch" in err and "Traceback" not in err
    with np.load(checkpoint) as ckpt:
        assert int(ckpt["epoch"]) >= 1
    record = json.loads((latest(project) / "run.json").read_text())
    assert record["status"] == "interrupted" and record["results"]["epochs"] >= 1


# ---------------------------------------------------------------- validation errors


def run_invalid(project: Path, toml: str, *extra: str) -> list[str]:
    (project / "pipeline.toml").write_text(toml)
    done = dlvm("run", project / "pipeline.toml", *extra)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr
    assert not (project / "out").exists()
    lines = error_lines(done.stderr)
    assert lines
    return lines


def error_lines(stderr: str) -> list[str]:
    """The lines of `stderr` but the notes (such as those on plugins that failed to load)."""
    return [line for line in stderr.strip().splitlines()
            if not line.startswith(("note: ", "dlvm: note: "))]


VALID = (FIXTURE / "pipeline.toml").read_text()


def test_invalid_toml_names_line_and_column(project: Path) -> None:
    lines = run_invalid(project, VALID.replace("epochs = 4", "epochs = = 4"))
    assert len(lines) == 1 and "pipeline.toml:18:10: error: invalid TOML" in lines[0] and "invalid TOML" in lines[0]


def test_unknown_key_with_a_suggestion(project: Path) -> None:
    lines = run_invalid(project, VALID.replace("epochs = 4", "epoch = 4\nepochs = 4"))
    assert lines == [f"{project / 'pipeline.toml'}:18:1: error: train.epoch: unknown key "
                     "'epoch' (did you mean 'epochs'?)"]


def test_unknown_table(project: Path) -> None:
    lines = run_invalid(project, VALID + "\n[trian]\nx = 1\n")
    assert "trian: unknown key 'trian' (did you mean 'train'?)" in lines[0]


def test_wrong_type(project: Path) -> None:
    lines = run_invalid(project, VALID.replace("learning_rate = 0.5", 'learning_rate = "fast"'))
    assert "train.learning_rate: expected an integer or a number, found a string" in lines[0]
    assert ":19:1: error:" in lines[0]


def test_missing_required_key(project: Path) -> None:
    lines = run_invalid(project, VALID.replace('step = "train_step"\n', ""))
    assert "train: missing required key 'step'" in lines[0]


def test_missing_file(project: Path) -> None:
    lines = run_invalid(project, VALID.replace('path = "blobs.npz"', 'path = "nope.npz"'))
    assert "data.path: cannot read data file" in lines[0]
    assert lines[0].endswith("nope.npz': it does not exist")
    assert ":12:1: error:" in lines[0]


def test_unknown_function(project: Path) -> None:
    lines = run_invalid(project, VALID.replace('step = "train_step"', 'step = "train_stpe"'))
    assert "train.step: the module has no function '@train_stpe' (did you mean " \
           "'train_step'?)" in lines[0]


def test_shapes_that_do_not_fit_the_data(project: Path) -> None:
    lines = run_invalid(project, VALID.replace("one_hot = 3", "one_hot = 5"))
    assert "data.one_hot: one-hot rows of 5 do not fit the step's targets '<_ x 3 x f32>'" \
        in lines[0]


def test_unknown_pass_and_target_are_both_reported(project: Path) -> None:
    lines = run_invalid(project, VALID.replace('"differentiation"', '"diferentiation"')
                        .replace('name = "interp"', 'name = "tpu"'))
    assert len(lines) == 2
    assert "passes.pipeline:" in lines[0] and "diferentiation" in lines[0]
    assert "target.name:" in lines[1] and "tpu" in lines[1]


def test_nothing_to_do(project: Path) -> None:
    lines = run_invalid(project, '[module]\npath = "linear.dl"\n')
    assert "nothing to do: add [emit], [call] or [train]" in lines[0]


def test_an_override_is_named_in_the_error(project: Path) -> None:
    (project / "pipeline.toml").write_text(VALID)
    done = dlvm("run", project / "pipeline.toml", "--set", "target.name=tpu")
    assert done.returncode == 1
    assert done.stderr.startswith("--set target.name: error: target.name:")


def test_resume_without_an_earlier_run(project: Path) -> None:
    lines = run_invalid(project, VALID, "--resume")
    assert lines == [f"--resume: error: no earlier run in '{project / 'out' / 'pipeline'}' "
                     "to continue"]


def test_the_schema_document_lists_every_key() -> None:
    from dlvm.cli.run.schema import SCHEMA

    doc = (Path(__file__).parents[1] / "docs" / "pipeline-toml.md").read_text()
    for table, keys in SCHEMA.items():
        prefix = table.replace("passes.list", "passes.list[i]")
        for key in keys:
            assert f"`{prefix}.{key}`" in doc, f"docs/pipeline-toml.md lacks `{prefix}.{key}`"


EXAMPLE = Path(__file__).parents[1] / "examples" / "digits-mlp"


def test_the_bundled_example_trains_to_95_percent_and_predicts(tmp_path: Path) -> None:
    example = tmp_path / "digits"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("out"))
    done = dlvm("run", example / "pipeline.toml")
    assert done.returncode == 0, done.stderr
    assert final_accuracy(done) >= 95.0
    predicted = dlvm("run", example / "predict.toml")
    assert predicted.returncode == 0, predicted.stderr
    with np.load(example / "out" / "predict" / "latest" / "predictions.npz") as out, \
            np.load(example / "samples.npz") as samples:
        assert np.mean(np.argmax(out["out0"], axis=1) == samples["labels"]) >= 0.8


def final_accuracy(done: subprocess.CompletedProcess[str]) -> float:
    return float(done.stdout.strip().splitlines()[-1].split()[-1].rstrip("%"))


def test_the_example_trains_in_bf16_and_f16_to_within_half_a_point_of_f32(tmp_path: Path
                                                                         ) -> None:
    """`train.precision = "bf16"` / `"f16"`: the loss and its gradient computed in the lower
    type (the mixed-precision pass before differentiation; for f16 loss scaling too), the
    parameters kept in f32."""
    accuracies = {}
    for precision in ("f32", "bf16", "f16"):
        example = tmp_path / precision
        shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("out"))
        text = (example / "pipeline.toml").read_text(encoding="utf-8")
        (example / "pipeline.toml").write_text(
            text.replace("[train]\n", f'[train]\nprecision = "{precision}"\n'),
            encoding="utf-8")
        done = dlvm("run", example / "pipeline.toml")
        assert done.returncode == 0, done.stderr
        accuracies[precision] = final_accuracy(done)
        resolved = (example / "out" / "pipeline" / "latest" / "pipeline.json").read_text()
        assert ("mixed-precision{dtype=bf16}" in resolved) == (precision == "bf16")
        assert ("loss-scaling{function=train_step}" in resolved) == (precision == "f16")
        records = metrics(example)
        assert ("loss_scale" in records[-1]) == (precision == "f16")
    assert abs(accuracies["bf16"] - accuracies["f32"]) <= 0.5, accuracies
    assert abs(accuracies["f16"] - accuracies["f32"]) <= 0.5, accuracies


REGRESSION = """module "regression"
stage raw

func @loss: (<4 x 1 x f32>, <_ x 4 x f32>, <_ x 1 x f32>) -> f32 {
'entry(%w: <4 x 1 x f32>, %x: <_ x 4 x f32>, %y: <_ x 1 x f32>):
    %p = dot %x: <_ x 4 x f32>, %w: <4 x 1 x f32>
    %d = subtract %p: <_ x 1 x f32>, %y: <_ x 1 x f32>
    %q = multiply %d: <_ x 1 x f32>, %d: <_ x 1 x f32>
    %total = reduce %q: <_ x 1 x f32> by add init 0.0: f32
    %count = unitCount of %q: <_ x 1 x f32>
    %n = dataTypeCast %count: i64 to f32
    %mean = divide %total: f32, %n: f32
    return %mean: f32
}

[gradient @loss wrt 0 keeping 0]
func @dloss: (<4 x 1 x f32>, <_ x 4 x f32>, <_ x 1 x f32>) -> (<4 x 1 x f32>, f32)

func @train_step: (<4 x 1 x f32>, <_ x 4 x f32>, <_ x 1 x f32>, f32) -> (<4 x 1 x f32>, f32) {
'entry(%w: <4 x 1 x f32>, %x: <_ x 4 x f32>, %y: <_ x 1 x f32>, %lr: f32):
    %g = apply @dloss(%w: <4 x 1 x f32>, %x: <_ x 4 x f32>, %y: <_ x 1 x f32>) -> (<4 x 1 x f32>, f32)
    %dw = extract 0 from %g: (<4 x 1 x f32>, f32)
    %l = extract 1 from %g: (<4 x 1 x f32>, f32)
    %s = multiply %dw: <4 x 1 x f32>, %lr: f32
    %wn = subtract %w: <4 x 1 x f32>, %s: <4 x 1 x f32>
    %r = literal (%wn: <4 x 1 x f32>, %l: f32): (<4 x 1 x f32>, f32)
    return %r: (<4 x 1 x f32>, f32)
}
"""

REGRESSION_TOML = """[module]
path = "regression.dl"

[data]
path = "data.npz"
inputs = "x"
labels = "y"
test_fraction = 0.0

[train]
step = "train_step"
init = "zeros"
batch_size = 32
epochs = 4
learning_rate = 0.001
precision = "f16"
loss_scale_interval = 4
metrics = "metrics.jsonl"
"""


def regression_project(tmp_path: Path) -> Path:
    """A linear regression whose gradients (about 200 per unit of loss scale, at first)
    overflow f16 for any scale above 256."""
    rng = np.random.default_rng(0)
    x = (10 * rng.standard_normal((256, 4))).astype(np.float32)
    y = (x @ np.array([[1.0], [-0.5], [0.25], [2.0]])).astype(np.float32)
    folder = tmp_path / "regression"
    folder.mkdir()
    np.savez(folder / "data.npz", x=x, y=y)
    (folder / "regression.dl").write_text(REGRESSION, encoding="utf-8")
    (folder / "pipeline.toml").write_text(REGRESSION_TOML, encoding="utf-8")
    return folder


def test_f16_steps_whose_gradients_overflow_are_skipped_and_the_scale_halved(
        tmp_path: Path) -> None:
    folder = regression_project(tmp_path)
    done = dlvm("run", folder / "pipeline.toml")
    assert done.returncode == 0, done.stderr
    records = metrics(folder)
    # 2^15 → 2^8: seven skipped steps before the first update, then it trains
    assert records[0]["skipped_steps"] >= 7
    assert records[0]["loss_scale"] <= 2.0**8 * 2 ** (8 // 4)  # grown at most twice since
    assert records[-1]["loss"] < records[0]["loss"] / 10
    assert all(math.isfinite(r["loss"]) for r in records)


@pytest.mark.parametrize("keys, message", [
    ("loss_scale_interval = 4", 'train.loss_scale_interval: applies to train.precision = '
                                '"f16"'),
    ('precision = "f16"\nloss_scale = 65536.0', "train.loss_scale: must be above 0 and at "
                                                 "most 32768"),
    ('precision = "f16"\n[train.distributed]\nengine = "ray"',
     'train.precision: "f16" trains on the local engine, not \'ray\''),
])
def test_loss_scaling_keys_are_checked(tmp_path: Path, keys: str, message: str) -> None:
    folder = regression_project(tmp_path)
    text = REGRESSION_TOML.replace('precision = "f16"\nloss_scale_interval = 4\n', "")
    (folder / "pipeline.toml").write_text(f"{text}{keys}\n", encoding="utf-8")
    done = dlvm("run", folder / "pipeline.toml")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert message in done.stderr, done.stderr


CHARS = Path(__file__).parents[1] / "examples" / "char-transformer"


def test_a_reduced_character_transformer_trains_and_writes_text(tmp_path: Path) -> None:
    """examples/char-transformer with a narrower model (d_model 32, one block, 2 heads) on
    320 windows for two epochs: the training loss falls, and sample.py reports the
    held-out loss and writes text."""
    example = tmp_path / "chars"
    shutil.copytree(CHARS, example, ignore=shutil.ignore_patterns("out"))
    model = (example / "model.py").read_text(encoding="utf-8")
    model = model.replace("VOCAB, CONTEXT, DIM, HEADS, LAYERS = 32, 64, 128, 4, 2",
                          "VOCAB, CONTEXT, DIM, HEADS, LAYERS = 32, 64, 32, 2, 1")
    (example / "model.py").write_text(model.replace("STEPS, WARMUP = 600, 30",
                                                    "STEPS, WARMUP = 20, 3"), encoding="utf-8")
    with np.load(example / "chars.npz") as data:
        np.savez(example / "chars.npz", x=data["x"][:320], y=data["y"][:320],
                 alphabet=data["alphabet"])
    pipeline = (example / "pipeline.toml").read_text(encoding="utf-8")
    (example / "pipeline.toml").write_text(pipeline.replace("epochs = 6", "epochs = 2"),
                                           encoding="utf-8")
    done = dlvm("run", example / "pipeline.toml")
    assert done.returncode == 0, done.stderr
    metrics = [json.loads(line) for line in
               (example / "out" / "pipeline" / "latest" / "metrics.jsonl").read_text(
                   encoding="utf-8").splitlines()]
    assert len(metrics) == 2 and metrics[1]["loss"] < metrics[0]["loss"] < math.log(32)
    sampled = subprocess.run([sys.executable, str(example / "sample.py"), "--length", "20"],
                             capture_output=True, text=True, check=False)
    assert sampled.returncode == 0, sampled.stderr
    assert "held-out loss:" in sampled.stdout
    assert sampled.stdout.strip().splitlines()[-1].startswith("The old sailor")


def test_arguments_that_do_not_match_the_function(project: Path) -> None:
    np.save(project / "x.npy", np.ones((2, 4), np.float32))
    lines = run_invalid(project, '[module]\npath = "linear.dl"\n[call]\nfunction = "predict"\n'
                                 'args = ["x.npy", "x.npy"]\n')
    assert "call.args: '@predict' takes 3 arguments, 2 given" in lines[0]
    assert ":5:1: error:" in lines[0]


def test_the_progress_bar_and_the_plain_lines_describe_each_epoch() -> None:
    from dlvm.cli.run.progress import Reporter, describe

    record = {"epoch": 2, "loss": 0.25, "accuracy": 0.9, "learning_rate": 0.1,
              "seconds": 1.5, "examples_per_second": 1234.0}
    assert describe(record, 5) == ("epoch 2/5  loss 0.2500  accuracy 90.0%  lr 0.1  1.5 s  "
                                   "1,234 examples/s")
    with Reporter(fancy=True).training(5, 1, 3) as bar:  # a rich progress bar
        bar.step(0.5)
        bar.evaluating()
        bar.epoch(record)


# ---------------------------------------------------------------- hostile input
#
# Every bad input is one line naming the key (or `dlvm: error: …`), exit status 1, never a
# traceback, an internal error or numpy's advice to unpickle; and never lost data.


def run_here(*args: str | Path) -> Any:
    """`dlvm run ARGS…` in this process (quicker than a subprocess); a click Result."""
    from typer.testing import CliRunner

    from dlvm.cli.main import make_app

    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    return runner.invoke(make_app(), ["run", *map(str, args)])


def one_error(project: Path, *args: str, toml: str | None = None) -> str:
    """Run the fixture pipeline (or `toml`) expecting exactly one error line; return it."""
    if toml is not None:
        (project / "pipeline.toml").write_text(toml)
    done = run_here(project / "pipeline.toml", *args)
    assert done.exit_code == 1, done.stdout
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert "internal error" not in lines[0] and "allow_pickle" not in lines[0]
    return lines[0]


def save_data(project: Path, name: str, **arrays: Any) -> str:
    np.savez(project / name, **arrays)
    return f'data.path="{name}"'


def blobs() -> dict[str, np.ndarray]:
    with np.load(FIXTURE / "blobs.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize(("options", "expected"), [
    ("{seed = -1}", "target.options.seed: target 'interp': option 'seed' must be at least 0"),
    ('{seed = "abc"}', "target.options.seed: target 'interp': option 'seed' must be an integer"),
    ('{timeout = "abc"}', "target.options.timeout: target 'interp': option 'timeout' must be "
                          "a number"),
    ("{bogus = 1}", "target.options.bogus: bad options for target 'interp'"),
])
def test_bad_target_options_are_found_by_a_dry_run(project: Path, options: str,
                                                   expected: str) -> None:
    line = one_error(project, "--dry-run", "--set", f"target.options={options}")
    assert line.startswith("--set target.options: error: ") and expected in line


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("train.checkpoint", '"/tmp"', "train.checkpoint: cannot write '/tmp': it is a directory"),
    ("train.metrics", '"{project}/linear.dl/m.jsonl"', "linear.dl' is not a directory"),
    ("emit.output", '"{project}/out"', "emit.output: cannot write"),
    ("call.output", '"{project}/blobs.npz/x/y.npz"', "blobs.npz' is not a directory"),
    ("train.metrics", '"../../../linear.dl/m.jsonl"', "linear.dl' is not a directory"),
])
def test_output_paths_are_checked_before_any_work(project: Path, key: str, value: str,
                                                  expected: str) -> None:
    (project / "out").mkdir()
    np.savez(project / "wb.npz", w=np.zeros((4, 3), np.float32), b=np.zeros(3, np.float32))
    extra = ["--set", 'call.function="predict"', "--set", 'call.args=["blobs.npz:inputs"]',
             "--set", 'call.parameters="wb.npz"'] if key == "call.output" else []
    extra += ["--set", 'emit.output="x.dl"'] if key != "emit.output" else []
    line = one_error(project, "--set", f"{key}={value.format(project=project)}", *extra)
    assert expected in line
    assert list((project / "out").iterdir()) == []
    assert not Path("/tmp.tmp").exists()


def test_a_dry_run_checks_the_elements_of_arrays(project: Path) -> None:
    done = run_here(project / "pipeline.toml", "--dry-run", "--set",
                    "train.parameters=[1,2,3,4]")
    assert done.exit_code == 1
    assert done.stderr.splitlines()[0] == ("--set train.parameters: error: "
                                           "train.parameters[0]: expected a string, found an "
                                           "integer 1")
    line = one_error(project, "--dry-run", "--set", 'train.parameters=["w", "w"]')
    assert "train.parameters[1]: parameter name 'w' is given twice" in line
    line = one_error(project, "--dry-run", "--set", 'train.parameters=["w", "epoch"]')
    assert "train.parameters[1]: parameter name 'epoch' is reserved" in line


@pytest.mark.parametrize("bad", [-1, 3])
def test_labels_outside_the_classes_name_the_first_bad_row(project: Path, bad: int) -> None:
    data = blobs()
    data["labels"][[7, 9]] = bad
    line = one_error(project, "--dry-run", "--set", save_data(project, "bad.npz", **data))
    assert f"data.labels: label {bad} in row 7 of 'labels' is outside 0..2 (one_hot = 3)" in line


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "is empty, not an .npz or .npy file"),
    (b"PK\x03\x04 not really a zip", "is not a valid .npz archive"),
    (b"PKxx", "is not a valid .npz archive"),
    (b"hello\n", "is not an .npz or .npy file"),
    (b"\x80\x04pickle", "holds pickled Python objects, which are never loaded"),
])
def test_broken_data_files_are_one_line_each(project: Path, content: bytes,
                                             expected: str) -> None:
    (project / "bad.npz").write_bytes(content)
    for key in ("data.path", "train.load"):
        line = one_error(project, "--dry-run", "--set", f'{key}="bad.npz"')
        assert f"{key}: " in line and expected in line


def test_the_wrong_kind_of_file_is_named(project: Path) -> None:
    np.save(project / "single.npy", blobs()["inputs"])
    line = one_error(project, "--dry-run", "--set", 'data.path="single.npy"')
    assert "holds a single array (.npy), not an .npz archive" in line
    line = one_error(project, "--dry-run", "--set", 'train.load="linear.dl"')
    assert "train.load: " in line and "linear.dl' is not an .npz or .npy file" in line
    line = one_error(project, "--dry-run", "--set",
                     save_data(project, "zero.npz", inputs=np.float32(1), labels=blobs()["labels"]))
    assert "data.inputs: 'inputs' is a single value; it needs one example per row" in line
    objects = np.empty(120, dtype=object)
    line = one_error(project, "--dry-run", "--set",
                     save_data(project, "obj.npz", inputs=objects, labels=blobs()["labels"]))
    assert "holds pickled Python objects, which are never loaded" in line


def test_a_mismatched_checkpoint_is_found_before_resuming(project: Path) -> None:
    assert run_here(project / "pipeline.toml", "--set", "train.epochs=1").exit_code == 0
    np.savez(latest(project) / "params.npz", w=np.ones((4, 2)), b=np.ones(3), epoch=2)
    line = one_error(project, "--resume", "--dry-run")
    assert "train.checkpoint: 'params.npz': parameter 'w' has shape <4 x 2>" in line


@pytest.mark.parametrize("key", ["train.learning_rate", "data.scale", "train.decay"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_numbers_must_be_finite(project: Path, key: str, value: str) -> None:
    line = one_error(project, "--dry-run", "--set", f"{key}={value}")
    assert f"{key}: must be a finite number, found {value.replace('-', '-')}" in line


def test_conversions_that_lose_values_are_refused(project: Path) -> None:
    data = blobs()
    data["inputs"] = data["inputs"].astype(np.float64) * 1e300
    line = one_error(project, "--dry-run", "--set", save_data(project, "big.npz", **data))
    assert "data.inputs: 'big.npz' array 'inputs': the value" in line and "overflows f32" in line
    line = one_error(project, "--dry-run", "--set", "train.learning_rate=1e300")
    assert "train.learning_rate: the learning rate: the value 1e+300 overflows f32" in line


def test_a_nonfinite_loss_stops_training_and_keeps_the_last_checkpoint(project: Path) -> None:
    assert run_here(project / "pipeline.toml", "--set", "train.epochs=1").exit_code == 0
    data = blobs()
    data["inputs"][:, 0] = np.inf
    poisoned = save_data(project, "inf.npz", **data)
    done = run_here(project / "pipeline.toml", "--resume", "--set", poisoned,
                    "--set", "train.epochs=3")
    assert done.exit_code == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"dlvm: error: training stopped: the loss is nan at epoch 2, step 1; "
        f"'{latest(project) / 'params.npz'}' keeps the parameters after epoch 1 "
        "(set train.allow_nonfinite = true to go on)")
    record = json.loads((latest(project) / "run.json").read_text())
    assert record["status"] == "failed" and "the loss is nan" in record["error"]
    with np.load(latest(project) / "params.npz") as ckpt:
        assert int(ckpt["epoch"]) == 1
    assert [m["epoch"] for m in metrics(project)] == [1]
    allowed = run_here(project / "pipeline.toml", "--resume", "--set", poisoned,
                       "--set", "train.epochs=2", "--set", "train.allow_nonfinite=true")
    assert allowed.exit_code == 0, allowed.stderr
    assert metrics(project)[-1]["loss"] is None  # NaN is not JSON: written as null


@pytest.mark.parametrize(("setting", "expected"), [
    ("data.test_fraction=0.999", "data.test_fraction: holds out all 120 examples; none are "
                                 "left to train on"),
    ("data.test_fraction=0", "data.test_fraction: holds out none of the 120 examples, so "
                             "train.evaluate has nothing to evaluate"),
])
def test_an_empty_training_or_test_split_is_an_error(project: Path, setting: str,
                                                     expected: str) -> None:
    assert expected in one_error(project, "--dry-run", "--set", setting)


def test_an_empty_dataset_is_an_error(project: Path) -> None:
    empty = save_data(project, "empty.npz", inputs=np.zeros((0, 4), np.float32),
                      labels=np.zeros(0, np.int64))
    line = one_error(project, "--dry-run", "--set", empty)
    assert "data.path: 'empty.npz' holds no examples ('inputs' has 0 rows)" in line


def test_resuming_at_the_last_epoch_says_there_is_nothing_to_do(project: Path) -> None:
    assert run_here(project / "pipeline.toml").exit_code == 0
    done = run_here(project / "pipeline.toml", "--resume")
    assert done.exit_code == 0
    assert done.stderr == "dlvm: note: nothing to do: checkpoint is at epoch 4 of 4\n"
    assert len(metrics(project)) == 4


def test_an_output_that_is_an_input_is_refused(project: Path) -> None:
    source = (project / "linear.dl").read_text()
    line = one_error(project, "--set", f'emit.output="{project / "linear.dl"}"')
    assert "emit.output: " in line and "is also an input (module.path); refusing to " \
                                       "overwrite it" in line
    (project / "alias.dl").symlink_to(project / "linear.dl")
    line = one_error(project, "--set", f'emit.output="{project / "alias.dl"}"')
    assert "is also an input (module.path)" in line
    line = one_error(project, "--set", 'train.metrics="../../../pipeline.toml"')
    assert "is also an input (the pipeline file)" in line
    line = one_error(project, "--set", f'train.checkpoint="{project / "blobs.npz"}"')
    assert "is also an input (data.path)" in line
    line = one_error(project, "--set", 'train.metrics="params.npz"')
    assert "train.metrics: " in line and "is also written as train.checkpoint" in line
    assert (project / "linear.dl").read_text() == source


def test_a_fresh_run_does_not_replace_an_earlier_one(project: Path) -> None:
    assert run_here(project / "pipeline.toml", "--set", "train.epochs=2").exit_code == 0
    first = latest(project)
    before = (first / "metrics.jsonl").read_text()
    again = run_here(project / "pipeline.toml", "--set", "train.epochs=1")
    assert again.exit_code == 0, again.stderr
    assert latest(project) != first
    assert [m["epoch"] for m in metrics(project)] == [1]
    assert (first / "metrics.jsonl").read_text() == before
    both = run_here(project / "pipeline.toml", "--overwrite", "--resume")
    assert both.exit_code == 1 and "give one of them" in both.stderr


def test_the_metrics_record_is_written_before_the_checkpoint(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dlvm.cli.run.train as train

    def killed(*args: Any) -> None:
        raise KeyboardInterrupt  # as if the process died while writing the checkpoint

    monkeypatch.setattr(train, "save_checkpoint", killed)
    run_here(project / "pipeline.toml")
    assert [m["epoch"] for m in metrics(project)] == [1]
    assert not (latest(project) / "params.npz").exists()


def test_resume_drops_metrics_beyond_the_checkpoint_and_stale_temporaries(project: Path) -> None:
    assert run_here(project / "pipeline.toml", "--set", "train.epochs=2").exit_code == 0
    with open(latest(project) / "metrics.jsonl", "a") as f:
        f.write('{"epoch": 3, "loss": 0.5}\n{"epoch": 4, "lo')  # killed before checkpoint 3
    (latest(project) / "params.npz.tmp").write_bytes(b"")  # killed while writing one
    done = run_here(project / "pipeline.toml", "--resume", "--set", "train.epochs=3")
    assert done.exit_code == 0, done.stderr
    assert "dropped the incomplete last line" in done.stderr
    assert "dropped 1 record(s)" in done.stderr and "after epoch 2" in done.stderr
    assert [m["epoch"] for m in metrics(project)] == [1, 2, 3]
    assert not (latest(project) / "params.npz.tmp").exists()


def test_resume_notes_metrics_that_are_missing(project: Path) -> None:
    assert run_here(project / "pipeline.toml", "--set", "train.epochs=2").exit_code == 0
    lines = (latest(project) / "metrics.jsonl").read_text().splitlines()
    (latest(project) / "metrics.jsonl").write_text(lines[1] + "\n")
    done = run_here(project / "pipeline.toml", "--resume", "--set", "train.epochs=3")
    assert done.exit_code == 0
    assert "lacks the metrics of epoch(s) 1" in done.stderr


PASS_LIST = """[module]
path = "linear.dl"
[[passes.list]]
name = "differentiation"
options = { checkpoint = false }
[[passes.list]]
name = "inline"
options = { threshold = 5 }
[emit]
output = "x.dl"
"""


def test_a_pass_list_becomes_pipeline_text(project: Path) -> None:
    (project / "pipeline.toml").write_text(PASS_LIST)
    done = run_here(project / "pipeline.toml", "--dry-run")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["passes"]["pipeline"] == \
        "differentiation{checkpoint=false},inline{threshold=5}"


def test_pass_list_errors_name_the_item_and_option(project: Path) -> None:
    toml = PASS_LIST.replace("{ threshold = 5 }", "{ threshold = 5, bogus = 1 }")
    line = one_error(project, "--dry-run", toml=toml)
    assert ":8:" in line and "passes.list[1].options.bogus: pass 'inline' has no option " \
                               "'bogus'" in line
    toml = PASS_LIST.replace("{ threshold = 5 }", '{ threshold = "5x" }')
    line = one_error(project, "--dry-run", toml=toml)
    assert "passes.list[1].options.threshold: option 'threshold' of pass 'inline': " \
           "expected int, found '5x'" in line and "column" not in line
    line = one_error(project, "--dry-run", toml=PASS_LIST.replace('"inline"', '"inlien"'))
    assert "passes.list[1].name: unknown pass 'inlien'" in line


@pytest.mark.parametrize(("setting", "expected"), [
    ("trian.epochs=3", "--set trian.epochs: error: trian: unknown key 'trian'"),
    ("train.epoch=3", "--set train.epoch: error: train.epoch: unknown key 'epoch'"),
    ("train.parameters=[1,2", "--set train.parameters: error: invalid TOML value '[1,2'"),
    ("train..epochs=3", "--set train..epochs=3: error: expected KEY=VALUE"),
    ("train.epochs.x=3", "--set train.epochs.x: error: 'epochs' is not a table"),
    ("emit.what=ir", "--set emit.what: error: emit: missing required key 'output'"),
])
def test_set_errors_name_the_override(project: Path, setting: str, expected: str) -> None:
    assert one_error(project, "--dry-run", "--set", setting).startswith(expected)


def test_a_directory_is_not_called_missing(project: Path) -> None:
    line = one_error(project, "--dry-run", "--set", 'module.path="."')
    assert line.endswith(f"module.path: cannot read module '{project}': it is a directory, "
                         "not a file")


def test_a_byte_order_mark_is_accepted(project: Path) -> None:
    (project / "pipeline.toml").write_bytes(b"\xef\xbb\xbf" + VALID.encode())
    done = run_here(project / "pipeline.toml", "--dry-run")
    assert done.exit_code == 0, done.stderr


SPIN = """func @spin: (f32) -> f32 {
'entry(%x: f32):
    branch 'loop(%x: f32)
'loop(%y: f32):
    branch 'loop(%y: f32)
}
"""


@pytest.mark.parametrize(("options", "expected"), [
    ("{max_steps = 1000}", "'@spin' exceeded the limit of 1000 steps"),
    ("{timeout = 0.2}", "'@spin' exceeded the timeout of 0.2 s"),
])
def test_target_limits_stop_a_runaway_call(project: Path, options: str, expected: str) -> None:
    (project / "spin.dl").write_text(SPIN)
    np.save(project / "x.npy", np.float32(1))
    toml = f"""[module]
path = "spin.dl"
[target]
name = "interp"
options = {options}
[call]
function = "spin"
args = ["x.npy"]
"""
    line = one_error(project, toml=toml)
    assert line.startswith("dlvm: error: ") and expected in line
