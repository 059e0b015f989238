"""`dlvm run`: each run writes into a folder of its own, out/<pipeline stem>/<run>/, linked as
`latest`, with a record of the run; re-runs, `--set` and `--dry-run` just work, `--resume`
continues the latest or a named run, and no file a run did not write is ever replaced."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dlvm.cli.run.record import recorded
from dlvm.cli.run.runs import RunFolder, latest_run, parent_problem, timestamp_name, written_by
from dlvm.ir.testing import linear_regression

Invoke = Callable[..., Any]

# Linear regression with a hand-written gradient step, so that no other package is needed.
MODULE = linear_regression()

PIPELINE = """\
[module]
path = "model.dl"

[target]
name = "interp"

[data]
path = "data.npz"
test_fraction = 0.25

[train]
step = "train_step"
epochs = 2
learning_rate = 0.05
batch_size = 8
checkpoint = "params.npz"
metrics = "metrics.jsonl"
"""

# Another pipeline beside it, reading the newest training run's parameters.
PREDICT = """\
[module]
path = "model.dl"

[target]
name = "interp"

[call]
function = "predict"
parameters = "out/pipeline/latest/params.npz"
args = ["x.npy"]
output = "scores.npz"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """model.dl, data.npz (32 examples of 4 inputs and 3 targets) and pipeline.toml."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "model.dl").write_text(MODULE)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype(np.float32)
    np.savez(folder / "data.npz", inputs=x,
             labels=(x @ rng.normal(size=(4, 3)) + 1.0).astype(np.float32))
    np.save(folder / "x.npy", x[:5])
    (folder / "pipeline.toml").write_text(PIPELINE)
    (folder / "predict.toml").write_text(PREDICT)
    return folder


def run(invoke: Invoke, project: Path, *args: str, pipeline: str = "pipeline") -> Any:
    return invoke("run", str(project / f"{pipeline}.toml"), "--quiet", *args)


def ok(invoke: Invoke, project: Path, *args: str, pipeline: str = "pipeline") -> Any:
    done = run(invoke, project, *args, pipeline=pipeline)
    assert done.exit_code == 0, done.stderr
    return done


def runs(project: Path, pipeline: str = "pipeline") -> Path:
    return project / "out" / pipeline


def latest(project: Path, pipeline: str = "pipeline") -> Path:
    """The folder the `latest` link points at."""
    return (runs(project, pipeline) / "latest").resolve()


def epochs(folder: Path) -> list[int]:
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["epoch"] for line in lines]


def checkpoint_epoch(folder: Path) -> int:
    with np.load(folder / "params.npz") as ckpt:
        return int(ckpt["epoch"])


def record(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "run.json").read_text())
    return data


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_error(done: Any) -> str:
    assert done.exit_code == 1, done.stdout
    lines = [line for line in done.stderr.strip().splitlines()
             if not line.startswith(("note: ", "dlvm: note: "))]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    return lines[0]


# ---------------------------------------------------------------- re-runs just work


def test_a_second_run_gets_a_folder_of_its_own_and_leaves_the_first_alone(
        invoke: Invoke, project: Path) -> None:
    ok(invoke, project)
    first = latest(project)
    before = snapshot(first)
    ok(invoke, project)
    second = latest(project)
    assert second != first and second.parent == first.parent == runs(project)
    assert snapshot(first) == before
    assert epochs(second) == [1, 2] and checkpoint_epoch(second) == 2


def test_a_run_with_set_after_a_run_is_a_new_run(invoke: Invoke, project: Path) -> None:
    ok(invoke, project)
    first = latest(project)
    ok(invoke, project, "--set", "train.epochs=3", "--set", "train.learning_rate=0.01")
    assert latest(project) != first
    assert epochs(latest(project)) == [1, 2, 3] and epochs(first) == [1, 2]
    resolved = json.loads((latest(project) / "pipeline.json").read_text())
    assert resolved["train"]["epochs"] == 3 and resolved["train"]["learning_rate"] == 0.01


def test_a_dry_run_after_a_run_prints_the_next_folder_and_writes_nothing(
        invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--name", "first")
    before = snapshot(project)
    done = invoke("run", str(project / "pipeline.toml"), "--dry-run")
    assert done.exit_code == 0, done.stderr
    planned = json.loads(done.stdout)["run"]
    assert planned["dir"] == str(runs(project))
    assert Path(planned["folder"]) == runs(project) / planned["name"]
    assert planned["name"] != "first" and not Path(planned["folder"]).exists()
    named = invoke("run", str(project / "pipeline.toml"), "--dry-run", "--name", "first")
    assert named.exit_code == 0, named.stderr  # an existing name: a dry run never refuses
    assert json.loads(named.stdout)["run"]["folder"] == str(runs(project) / "first")
    resumed = invoke("run", str(project / "pipeline.toml"), "--dry-run", "--resume")
    assert json.loads(resumed.stdout)["run"]["name"] == "first"
    assert snapshot(project) == before


def test_a_dry_run_never_refuses_for_outputs(invoke: Invoke, project: Path) -> None:
    (project / "taken.jsonl").write_text("someone else's\n")
    done = invoke("run", str(project / "pipeline.toml"), "--dry-run",
                  "--set", f'train.metrics="{project / "taken.jsonl"}"')
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["train"]["metrics"] == str(project / "taken.jsonl")
    assert not runs(project).exists()


def test_latest_links_the_newest_run(invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--name", "a")
    link = runs(project) / "latest"
    assert link.is_symlink() and str(link.readlink()) == "a"  # relative: the folder can move
    ok(invoke, project, "--name", "b")
    assert str(link.readlink()) == "b"


def test_runs_started_in_the_same_second_get_a_suffix(tmp_path: Path) -> None:
    at = datetime(2025, 6, 11, 14, 22, 33)
    assert timestamp_name(tmp_path, at) == "20250611-142233"
    (tmp_path / "20250611-142233").mkdir()
    assert timestamp_name(tmp_path, at) == "20250611-142233-2"
    (tmp_path / "20250611-142233-2").mkdir()
    assert timestamp_name(tmp_path, at) == "20250611-142233-3"


def test_the_runs_of_pipelines_in_one_folder_are_kept_apart(invoke: Invoke,
                                                            project: Path) -> None:
    ok(invoke, project)
    done = ok(invoke, project, pipeline="predict")
    with np.load(latest(project, "predict") / "scores.npz") as scores:
        assert scores["out0"].shape == (5, 3)
    assert "params.npz" not in snapshot(latest(project, "predict"))
    assert done.stdout == ""  # --quiet


def test_run_dir_sets_where_the_runs_go(invoke: Invoke, project: Path, tmp_path: Path) -> None:
    ok(invoke, project, "--set", f'run.dir="{tmp_path / "elsewhere"}"')
    assert checkpoint_epoch((tmp_path / "elsewhere" / "latest").resolve()) == 2
    assert not (project / "out").exists()


def test_a_pipeline_that_writes_nothing_gets_no_run_folder(invoke: Invoke,
                                                           project: Path) -> None:
    (project / "predict.toml").write_text(PREDICT.replace('output = "scores.npz"\n', "")
                                          .replace("out/pipeline/latest/params.npz",
                                                   "init.npz"))
    np.savez(project / "init.npz", w=np.ones((4, 3), np.float32), b=np.zeros(3, np.float32))
    ok(invoke, project, pipeline="predict")
    assert not (project / "out").exists()
    line = one_error(run(invoke, project, "--name", "x", pipeline="predict"))
    assert line == "--name: error: the pipeline writes no files, so it has no run folder to name"


# ---------------------------------------------------------------- resume and names


def test_resume_continues_the_latest_run(invoke: Invoke, project: Path) -> None:
    ok(invoke, project)
    first = latest(project)
    ok(invoke, project)
    second = latest(project)
    ok(invoke, project, "--resume", "--set", "train.epochs=4")
    assert latest(project) == second
    assert epochs(second) == [1, 2, 3, 4] and checkpoint_epoch(second) == 4
    assert epochs(first) == [1, 2]


def test_resume_with_a_name_continues_that_run(invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--name", "baseline")
    ok(invoke, project)
    ok(invoke, project, "--resume", "--name", "baseline", "--set", "train.epochs=3")
    baseline = runs(project) / "baseline"
    assert epochs(baseline) == [1, 2, 3] and checkpoint_epoch(baseline) == 3
    assert latest(project) == baseline.resolve()  # the run resumed last


def test_resume_without_an_earlier_run_says_so(invoke: Invoke, project: Path) -> None:
    line = one_error(run(invoke, project, "--resume"))
    assert line == f"--resume: error: no earlier run in '{runs(project)}' to continue"
    ok(invoke, project, "--name", "a")
    line = one_error(run(invoke, project, "--resume", "--name", "b"))
    assert line == f"--name: error: --resume: no run 'b' in '{runs(project)}' (runs: a)"


def test_resume_of_a_run_without_a_checkpoint_says_so(invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--name", "a", "--set", "train.epochs=0")  # ends before any epoch
    line = one_error(run(invoke, project, "--resume"))
    assert line == (f"{project / 'pipeline.toml'}:16:1: error: train.checkpoint: --resume: "
                    f"'{runs(project) / 'a' / 'params.npz'}' of run 'a' does not exist yet")


def test_resume_needs_a_training_pipeline(invoke: Invoke, project: Path) -> None:
    ok(invoke, project)
    line = one_error(run(invoke, project, "--resume", pipeline="predict"))
    assert line == "--resume: error: nothing to resume: the pipeline has no [train]"


def test_an_existing_name_is_refused_with_what_to_do(invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--name", "baseline")
    before = snapshot(runs(project) / "baseline")
    line = one_error(run(invoke, project, "--name", "baseline"))
    assert line == (f"--name: error: run 'baseline' already exists in '{runs(project)}': pass "
                    "--resume to continue it, --overwrite to replace its outputs, or choose "
                    "another --name")
    assert snapshot(runs(project) / "baseline") == before
    (project / "pipeline.toml").write_text(PIPELINE + '\n[run]\nname = "baseline"\n')
    line = one_error(run(invoke, project))
    assert line.startswith(f"{project / 'pipeline.toml'}:20:1: error: run.name: run "
                           "'baseline' already exists")


def test_overwrite_replaces_the_named_runs_outputs_and_keeps_its_history(
        invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--name", "baseline", "--set", "train.epochs=3")
    ok(invoke, project, "--name", "baseline", "--overwrite", "--set", "train.epochs=1")
    baseline = runs(project) / "baseline"
    assert epochs(baseline) == [1] and checkpoint_epoch(baseline) == 1
    history = record(baseline)["history"]
    assert [h["results"]["epochs"] for h in history] == [3]
    assert "--overwrite" in record(baseline)["command"]


@pytest.mark.parametrize(("name", "expected"), [
    ("latest", "'latest' is the link to the newest run; choose another name"),
    ("a/b", "'a/b' is not a plain folder name (no '/', no leading '.')"),
    (".hidden", "'.hidden' is not a plain folder name (no '/', no leading '.')"),
    ("", "a run name must not be empty"),
])
def test_run_names_are_plain_folder_names(invoke: Invoke, project: Path, name: str,
                                          expected: str) -> None:
    assert one_error(run(invoke, project, "--name", name)) == f"--name: error: {expected}"
    assert not (project / "out").exists()


# ---------------------------------------------------------------- the record


def test_the_record_says_what_ran_and_how_it_ended(invoke: Invoke, project: Path) -> None:
    ok(invoke, project, "--set", "train.epochs=1")
    folder = latest(project)
    data = record(folder)
    assert data["status"] == "finished" and data["name"] == folder.name
    assert data["pipeline"] == str(project / "pipeline.toml")
    assert data["command"] == (f"dlvm run {project / 'pipeline.toml'} --set train.epochs=1 "
                               "--quiet")
    assert datetime.fromisoformat(data["started"]) <= datetime.fromisoformat(data["ended"])
    assert "dlvm-cli" in data["versions"] and "dlvm-ir" in data["versions"]
    assert data["outputs"] == [str(folder / "metrics.jsonl"), str(folder / "params.npz")]
    assert data["results"]["epochs"] == 1 and data["results"]["loss"] > 0
    assert data["history"] == []
    resolved = json.loads((folder / "pipeline.json").read_text())
    assert resolved["run"]["folder"] == str(runs(project) / folder.name)
    assert resolved["train"]["checkpoint"] == str(runs(project) / folder.name / "params.npz")
    assert not list(folder.glob("*.tmp"))


def test_a_failed_run_is_recorded_as_failed(invoke: Invoke, project: Path) -> None:
    with np.load(project / "data.npz") as data:
        inputs, labels = data["inputs"].copy(), data["labels"]
    inputs[:, 0] = np.inf
    np.savez(project / "inf.npz", inputs=inputs, labels=labels)
    done = run(invoke, project, "--set", 'data.path="inf.npz"')
    assert done.exit_code == 1
    data = record(latest(project))
    assert data["status"] == "failed" and data["ended"] is not None
    assert data["error"].startswith("training stopped: the loss is inf at epoch 1, step 1")


def test_an_interrupted_run_is_recorded_as_interrupted(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "runs", "r")
    with pytest.raises(KeyboardInterrupt), \
            recorded(folder, tmp_path / "p.toml", "dlvm run p.toml", {}, []):
        raise KeyboardInterrupt
    data = record(folder.path)
    assert data["status"] == "interrupted" and "error" not in data
    assert json.loads((folder.path / "pipeline.json").read_text()) == {}


def test_a_resumed_runs_record_keeps_the_earlier_attempt(invoke: Invoke,
                                                         project: Path) -> None:
    ok(invoke, project, "--set", "train.epochs=1")
    first = record(latest(project))
    ok(invoke, project, "--resume")
    data = record(latest(project))
    assert data["status"] == "finished" and data["results"]["epochs"] == 2
    assert data["history"] == [{k: first[k] for k in ("status", "started", "ended", "command",
                                                      "directory", "results")}]


# ---------------------------------------------------------------- outside the run folder


def test_an_absolute_output_that_exists_is_refused(invoke: Invoke, project: Path) -> None:
    (project / "taken.jsonl").write_text("someone else's\n")
    line = one_error(run(invoke, project, "--set",
                         f'train.metrics="{project / "taken.jsonl"}"'))
    assert line == (f"--set train.metrics: error: train.metrics: '{project / 'taken.jsonl'}' "
                    "exists, outside the run folder, and no earlier run of this pipeline wrote "
                    "it: refusing to replace it (remove it, or give a path relative to the run "
                    "folder)")
    assert (project / "taken.jsonl").read_text() == "someone else's\n"
    assert not (project / "out").exists()
    line = one_error(run(invoke, project, "--overwrite", "--set",
                         f'train.metrics="{project / "taken.jsonl"}"'))
    assert "no earlier run of this pipeline wrote it" in line


def test_a_relative_output_that_leaves_the_run_folder_is_outside(invoke: Invoke,
                                                                  project: Path) -> None:
    line = one_error(run(invoke, project, "--set", 'train.metrics="../../../data.npz"'))
    assert "is also an input (data.path)" in line
    (project / "kept.jsonl").write_text("x\n")
    line = one_error(run(invoke, project, "--set", 'train.metrics="../../../kept.jsonl"'))
    assert "exists, outside the run folder, and no earlier run" in line


def test_outputs_an_earlier_run_wrote_outside_its_folder(invoke: Invoke, project: Path,
                                                         tmp_path: Path) -> None:
    shared = ["--set", f'train.checkpoint="{tmp_path / "ckpt.npz"}"']
    ok(invoke, project, *shared)
    first = latest(project).name
    line = one_error(run(invoke, project, *shared))
    assert line.endswith(f"'{tmp_path / 'ckpt.npz'}' holds the checkpoint of run '{first}' "
                         f"(outside the run folder): pass --resume --name {first} to continue "
                         "that run, or --overwrite to replace it")
    ok(invoke, project, *shared, "--overwrite", "--set", "train.epochs=1")
    with np.load(tmp_path / "ckpt.npz") as ckpt:
        assert int(ckpt["epoch"]) == 1
    ok(invoke, project, *shared, "--resume", "--set", "train.epochs=3")
    with np.load(tmp_path / "ckpt.npz") as ckpt:
        assert int(ckpt["epoch"]) == 3


@pytest.mark.parametrize("value", ['"{project}/notes.txt"', '"../../../notes.txt"'])
@pytest.mark.parametrize("key", ["train.metrics", "train.checkpoint"])
def test_no_flag_lets_a_run_replace_a_file_it_did_not_write(invoke: Invoke, project: Path,
                                                              key: str, value: str) -> None:
    ok(invoke, project, "--name", "a")
    (project / "notes.txt").write_text("mine\n")
    for flags in ([], ["--name", "a", "--overwrite"], ["--name", "a", "--resume"]):
        result = run(invoke, project, *flags, "--set", f"{key}={value.format(project=project)}")
        assert result.exit_code == 1  # --resume also finds the checkpoint is none
        assert "exists, outside the run folder, and no earlier run of this pipeline wrote" in (
            result.stderr)
    assert (project / "notes.txt").read_text() == "mine\n"


# ---------------------------------------------------------------- the folders themselves


def test_without_its_link_the_latest_run_is_the_one_recorded_last(invoke: Invoke,
                                                                  project: Path) -> None:
    ok(invoke, project, "--name", "a")
    ok(invoke, project, "--name", "b")
    (runs(project) / "latest").unlink()
    assert latest_run(runs(project)) == "b"
    ok(invoke, project, "--resume", "--set", "train.epochs=3")
    assert epochs(runs(project) / "b") == [1, 2, 3]


def test_what_is_in_the_way_of_the_runs_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert parent_problem(tmp_path / "file" / "runs") == f"'{tmp_path / 'file'}' is not a directory"
    (tmp_path / "runs" / "latest").mkdir(parents=True)
    assert parent_problem(tmp_path / "runs") == (
        f"'{tmp_path / 'runs' / 'latest'}' is in the way of the link to the newest run")
    assert parent_problem(tmp_path / "new" / "runs") is None


def test_only_files_listed_in_a_runs_record_count_as_its_outputs(invoke: Invoke,
                                                                 project: Path,
                                                                 tmp_path: Path) -> None:
    ok(invoke, project, "--set", f'train.metrics="{tmp_path / "m.jsonl"}"')
    assert written_by(runs(project), tmp_path / "m.jsonl") == latest(project).name
    assert written_by(runs(project), tmp_path / "other.jsonl") is None
    assert written_by(tmp_path / "nowhere", tmp_path / "m.jsonl") is None
