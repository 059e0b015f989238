"""`dlvm run PIPELINE.toml`: training end to end, resume, overrides, dry run, emit, call,
and one test per class of validation error (each one line, exit 1, nothing written)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def metrics(project: Path) -> list[dict[str, float]]:
    lines = (project / "out" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_training_lowers_the_loss_checkpoints_and_resumes(project: Path) -> None:
    done = dlvm("run", project / "pipeline.toml")
    assert done.returncode == 0, done.stderr
    assert "test accuracy:" in done.stdout
    first = metrics(project)
    assert [m["epoch"] for m in first] == [1, 2, 3, 4]
    assert first[-1]["loss"] < first[0]["loss"]
    with np.load(project / "out" / "params.npz") as ckpt:
        assert int(ckpt["epoch"]) == 4 and ckpt["w"].shape == (4, 3)
    resumed = dlvm("run", project / "pipeline.toml", "--resume", "--set", "train.epochs=6")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stdout
    assert [m["epoch"] for m in metrics(project)] == [1, 2, 3, 4, 5, 6]
    assert metrics(project)[-1]["loss"] < first[-1]["loss"]


def test_runs_from_another_directory_with_paths_relative_to_the_file(project: Path,
                                                                     tmp_path: Path) -> None:
    done = dlvm("run", project / "pipeline.toml", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (project / "out" / "params.npz").is_file()
    assert not (tmp_path / "out").exists()


def test_dry_run_prints_the_resolved_pipeline_and_writes_nothing(project: Path) -> None:
    done = dlvm("run", project / "pipeline.toml", "--dry-run", "--set", "train.epochs=9")
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)
    assert resolved["train"]["epochs"] == 9
    assert resolved["train"]["parameters"] == ["w", "b"]
    assert resolved["target"]["name"] == "interp"
    assert Path(resolved["module"]["path"]).is_absolute()
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
output = "out/optimized.dl"
[call]
function = "predict"
parameters = "out/params.npz"
args = ["x.npy"]
output = "out/scores.npz"
""")
    done = dlvm("run", project / "infer.toml")
    assert done.returncode == 0, done.stderr
    assert "call: out0: float32 (5, 3)" in done.stdout
    assert "func @dloss" in (project / "out" / "optimized.dl").read_text()
    with np.load(project / "out" / "scores.npz") as out:
        assert out["out0"].shape == (5, 3)


def test_ctrl_c_stops_after_the_step_and_keeps_the_last_checkpoint(project: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "dlvm.cli", "run",
                             str(project / "pipeline.toml"), "--set", "train.epochs=100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    checkpoint = project / "out" / "params.npz"
    deadline = time.monotonic() + 60
    while not checkpoint.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted after epoch" in err and "Traceback" not in err
    with np.load(checkpoint) as ckpt:
        assert int(ckpt["epoch"]) >= 1


# ---------------------------------------------------------------- validation errors


def run_invalid(project: Path, toml: str, *extra: str) -> list[str]:
    (project / "pipeline.toml").write_text(toml)
    done = dlvm("run", project / "pipeline.toml", *extra)
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr
    assert not (project / "out").exists()
    lines = done.stderr.strip().splitlines()
    assert lines
    return lines


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
    assert "data.path: file" in lines[0] and "nope.npz' does not exist" in lines[0]
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
    done = dlvm("run", project / "pipeline.toml", "--set", "target.name=nvptx")
    assert done.returncode == 1
    assert done.stderr.startswith("--set target.name: error: target.name:")


def test_resume_without_a_checkpoint(project: Path) -> None:
    lines = run_invalid(project, VALID, "--resume")
    assert "train.checkpoint: --resume:" in lines[0] and "does not exist yet" in lines[0]


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
    accuracy = float(done.stdout.strip().splitlines()[-1].split()[-1].rstrip("%"))
    assert accuracy >= 95.0
    predicted = dlvm("run", example / "predict.toml")
    assert predicted.returncode == 0, predicted.stderr
    with np.load(example / "out" / "predictions.npz") as out, \
            np.load(example / "samples.npz") as samples:
        assert np.mean(np.argmax(out["out0"], axis=1) == samples["labels"]) >= 0.8


def test_arguments_that_do_not_match_the_function(project: Path) -> None:
    np.save(project / "x.npy", np.ones((2, 4), np.float32))
    lines = run_invalid(project, '[module]\npath = "linear.dl"\n[call]\nfunction = "predict"\n'
                                 'args = ["x.npy", "x.npy"]\n')
    assert "call.args: '@predict' takes 3 arguments, 2 given" in lines[0]
    assert ":5:1: error:" in lines[0]


def test_the_progress_bar_and_the_plain_lines_describe_each_epoch() -> None:
    from dlvm.cli.run.progress import Reporter, describe

    record = {"epoch": 2, "loss": 0.25, "accuracy": 0.9, "examples_per_second": 1234.0}
    assert describe(record, 5) == "epoch 2/5  loss 0.2500  accuracy 90.0%  1,234 examples/s"
    with Reporter(fancy=True).training(5, 1, 3) as bar:  # a rich progress bar
        bar.step(0.5)
        bar.epoch(record)
