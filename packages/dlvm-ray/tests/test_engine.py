"""The engine `ray`: the parameters after each epoch equal the one-process run's for any
number of workers, a lost worker is replaced without losing an epoch, `--resume` continues
the run, and bad configurations are refused during validation."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from dlvm.cli.main import main

DIGITS = Path(__file__).resolve().parents[3] / "examples" / "digits-mlp" / "digits.npz"

MODEL = """module digits
type float64
x: in[_ x 64]
target: in[_ x 10]
w1: param[64 x 16] = glorot
b1: param[16] = 0.0
w2: param[16 x 10] = glorot
b2: param[10] = 0.0
h: hidden[_ x 16] = tanh(x . w1 + b1)
y: out[_ x 10] = softmax(h . w2 + b2)
loss xent = cross_entropy(y, target)
"""

PIPELINE = """[module]
path = "model.tel"
[passes]
pipeline = "differentiation,O2"
[data]
path = "{digits}"
inputs = "images"
labels = "labels"
scale = 0.0625
one_hot = 10
test_fraction = 0.2
[train]
step = "train_step"
init_function = "init_params"
batch_size = 30
epochs = {epochs}
learning_rate = 0.3
shuffle_seed = 0
checkpoint = "params.npz"
metrics = "metrics.jsonl"
[train.evaluate]
function = "predict"
[train.distributed]
engine = "{engine}"
workers = {workers}
"""


def project(tmp_path: Path, name: str, engine: str = "ray", workers: int = 2,
            epochs: int = 2) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model.tel").write_text(MODEL)
    pipeline = folder / "pipeline.toml"
    pipeline.write_text(PIPELINE.format(digits=DIGITS, engine=engine, workers=workers,
                                        epochs=epochs))
    return pipeline


def dlvm(*args: str) -> int:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    return int(e.value.code or 0)


def latest(pipeline: Path) -> Path:
    """The folder of the pipeline's newest run."""
    return pipeline.parent / "out" / pipeline.stem / "latest"


def params(pipeline: Path) -> dict[str, np.ndarray]:
    with np.load(latest(pipeline) / "params.npz") as npz:
        return {k: npz[k] for k in npz.files}


def metrics(pipeline: Path) -> list[dict[str, object]]:
    text = (latest(pipeline) / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    pipeline = project(tmp_path_factory.mktemp("local"), "local", "local", 1, epochs=3)
    assert dlvm("run", str(pipeline), "--quiet") == 0
    return params(pipeline)


def collective_available() -> bool:
    try:
        from ray.util.collective import collective

        return bool(collective.gloo_available())
    except Exception:
        return False


@pytest.mark.parametrize("allreduce", [
    "object-store",
    pytest.param("collective", marks=pytest.mark.skipif(
        not collective_available(), reason="Ray's collective library has no gloo backend "
        "here (it comes with torch.distributed)"))])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_any_number_of_workers_gives_the_one_process_parameters(
        ray_instance: None, one_process: dict[str, np.ndarray], tmp_path: Path,
        workers: int, allreduce: str) -> None:
    pipeline = project(tmp_path, "ray", "ray", workers, epochs=3)
    assert dlvm("run", str(pipeline), "--quiet", "--set",
                f'train.distributed.allreduce="{allreduce}"') == 0
    got = params(pipeline)
    assert got["epoch"] == 3
    for name, value in one_process.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-12, err_msg=name)
    records = metrics(pipeline)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert all(r["workers"] == workers and len(r["worker_step_seconds"]) == workers  # type: ignore[arg-type]
               for r in records)


def test_a_lost_worker_is_replaced_and_its_epoch_run_again(
        ray_instance: None, one_process: dict[str, np.ndarray], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = project(tmp_path, "ray", "ray", 2, epochs=3)
    monkeypatch.setenv("DLVM_RAY_FAIL_AT", "2:7:1")  # worker 1 exits at epoch 2, step 7
    monkeypatch.setenv("DLVM_RAY_FAIL_MARKER", str(tmp_path / "failed-once"))
    assert dlvm("run", str(pipeline), "--quiet") == 0
    assert (tmp_path / "failed-once").exists()
    assert "a worker was lost in epoch 2" in capsys.readouterr().err
    got = params(pipeline)
    for name, value in one_process.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-12, err_msg=name)
    records = metrics(pipeline)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert records[1]["worker_restarts"] == 1


def test_past_max_failures_the_run_stops_with_a_clear_error(
        ray_instance: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = project(tmp_path, "ray", "ray", 2, epochs=2)
    monkeypatch.setenv("DLVM_RAY_FAIL_AT", "2:3:0")
    monkeypatch.setenv("DLVM_RAY_FAIL_MARKER", str(tmp_path / "failed-once"))
    code = dlvm("run", str(pipeline), "--quiet", "--set", "train.distributed.max_failures=0")
    assert code == 1
    err = capsys.readouterr().err
    assert "training stopped: a worker was lost 1 times (train.distributed.max_failures = 0)" \
        in err and "Traceback" not in err
    assert params(pipeline)["epoch"] == 1  # the checkpoint of the last whole epoch


def test_resume_continues_to_the_one_process_result(
        ray_instance: None, one_process: dict[str, np.ndarray], tmp_path: Path) -> None:
    pipeline = project(tmp_path, "ray", "ray", 2, epochs=1)
    assert dlvm("run", str(pipeline), "--quiet") == 0  # a run stopped after epoch 1
    with open(latest(pipeline) / "metrics.jsonl", "a") as f:
        f.write('{"epoch": 2, "lo')  # and killed while writing epoch 2's record
    assert dlvm("run", str(pipeline), "--quiet", "--resume", "--set", "train.epochs=3") == 0
    got = params(pipeline)
    for name, value in one_process.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-12, err_msg=name)
    assert [r["epoch"] for r in metrics(pipeline)] == [1, 2, 3]


@pytest.mark.parametrize("setting, message", [
    ("train.distributed.workers=7", "train.batch_size 30 is not divisible by 7 workers"),
    ('train.distributed.address="tcp://x"', "'tcp://x' is not local, auto or ray://host:port"),
    ('train.distributed.engine="mpi"', "unknown engine 'mpi'"),
])
def test_bad_configuration_is_refused_before_any_work(
        tmp_path: Path, setting: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = project(tmp_path, "ray")
    assert dlvm("run", str(pipeline), "--dry-run", "--set", setting) == 1
    err = capsys.readouterr().err
    # one error line; notes on plugins that failed to load (the test environment installs a
    # broken one on purpose) may follow it
    errors = [line for line in err.strip().splitlines() if not line.startswith("dlvm: note: ")]
    assert message in err and len(errors) == 1


def fresh_process(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`dlvm` in a process of its own, where no Ray instance is running yet (this one's
    tests share one, which the engine would use as it is); `env` adds variables."""
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-m", "dlvm.cli", *args], capture_output=True,
                          text=True, env={**environment, **(env or {})}, timeout=300)
    return done.returncode, done.stderr


def test_local_starts_an_instance_of_its_own_beside_a_running_one(
        ray_instance: None, tmp_path: Path) -> None:
    """Another Ray instance runs on the machine and RAY_ADDRESS names it, as `ray start`
    and cluster shells leave it: `address = "local"` starts a new instance for the run
    instead of joining that one (which refused the run's CPU count), and leaves it be."""
    import ray

    running = ray.get_runtime_context().gcs_address
    cpus = ray.cluster_resources()["CPU"]
    pipeline = project(tmp_path, "ray", "ray", 1, epochs=1)
    code, err = fresh_process("run", str(pipeline), "--quiet", env={"RAY_ADDRESS": running})
    assert code == 0, err
    assert params(pipeline)["epoch"] == 1
    assert ray.cluster_resources()["CPU"] == cpus  # the running instance, as it was
    assert ray.get(ray.put(7)) == 7


class FakeRay:
    """`ray.init` and its neighbours recorded, so that what the engine asks of Ray is seen
    without starting an instance."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import ray

        self.calls: list[dict[str, object]] = []
        monkeypatch.setattr(ray, "is_initialized", lambda: False)
        monkeypatch.setattr(ray, "init", lambda **kw: self.calls.append(kw))
        monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 64.0})
        monkeypatch.setattr(ray, "shutdown", lambda: None)


def test_the_local_instance_is_new_and_keeps_its_files_in_a_folder_removed_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dlvm.cli.run.spec import DistributedSpec
    from dlvm.ray.engine import connected

    fake = FakeRay(monkeypatch)
    with connected(DistributedSpec(engine="ray", workers=2)):
        (call,) = fake.calls
        folder = str(call["_temp_dir"])
        assert call["address"] == "local" and os.path.isdir(folder)
    assert not os.path.exists(folder)


def test_a_cluster_address_is_joined_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from dlvm.cli.run.spec import DistributedSpec
    from dlvm.ray.engine import connected

    fake = FakeRay(monkeypatch)
    for address in ("auto", "ray://head:10001"):
        with connected(DistributedSpec(engine="ray", workers=2, address=address)):
            pass
        assert fake.calls[-1]["address"] == address and "_temp_dir" not in fake.calls[-1]


def test_an_unreachable_cluster_is_refused_during_validation(tmp_path: Path) -> None:
    pipeline = project(tmp_path, "ray")
    code, err = fresh_process("run", str(pipeline), "--dry-run", "--set",
                              'train.distributed.address="ray://127.0.0.1:1"')
    assert code == 1
    assert "cannot reach Ray at 'ray://127.0.0.1:1'" in err and len(err.strip().splitlines()) == 1


def test_more_local_workers_than_cpus_are_refused(tmp_path: Path) -> None:
    cpus = os.cpu_count() or 1
    pipeline = project(tmp_path, "ray", "ray", cpus + 1)
    text = pipeline.read_text().replace("batch_size = 30", f"batch_size = {30 * (cpus + 1)}")
    pipeline.write_text(text)
    code, err = fresh_process("run", str(pipeline), "--dry-run")
    assert code == 1
    assert f"{cpus + 1} workers, but this machine has {cpus} CPUs" in err


EXAMPLE = Path(__file__).resolve().parents[3] / "examples"


def accuracy(line: str) -> float:
    """The percentage of a `test accuracy: 97.21%` line."""
    found = re.fullmatch(r"test accuracy: ([\d.]+)%", line)
    assert found is not None, line
    return float(found.group(1))


def test_the_example_trains_to_the_local_examples_accuracy(
        ray_instance: None, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    outputs = ["--set", f'run.dir="{tmp_path / "ray"}"']  # the run folders, not in examples/
    assert dlvm("run", str(EXAMPLE / "digits-mlp-ray" / "pipeline.toml"), *outputs) == 0
    ray_line = capsys.readouterr().out.strip().splitlines()[-1]
    outputs = ["--set", f'run.dir="{tmp_path / "local"}"']
    assert dlvm("run", str(EXAMPLE / "digits-mlp" / "pipeline.toml"), *outputs) == 0
    local_line = capsys.readouterr().out.strip().splitlines()[-1]
    ray, local = accuracy(ray_line), accuracy(local_line)
    # The workers sum the gradient in another order than one process does: the parameters
    # agree to float64 rounding, and an example at a near tie may go either way, so the
    # accuracies (of 359 test examples) agree to one example.
    assert ray == pytest.approx(local, abs=100 / 359)
    assert local == pytest.approx(97.21, abs=100 / 359)  # the local example's accuracy


CLUSTER = """
import os, sys
from ray.cluster_utils import Cluster
from dlvm.cli.main import main

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
cluster.add_node(num_cpus=1)  # a second node: one worker on each
os.environ["RAY_ADDRESS"] = cluster.address
try:
    main(sys.argv[1:])
finally:
    cluster.shutdown()
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DLVM_SLOW_TESTS"),
                    reason="starts a simulated two-node Ray cluster (set DLVM_SLOW_TESTS=1)")
def test_auto_joins_a_running_two_node_cluster(one_process: dict[str, np.ndarray],
                                               tmp_path: Path) -> None:
    import subprocess
    import sys

    pipeline = project(tmp_path, "cluster", "ray", 2, epochs=3)
    script = tmp_path / "cluster.py"
    script.write_text(CLUSTER)
    done = subprocess.run([sys.executable, str(script), "run", str(pipeline), "--quiet",
                           "--set", 'train.distributed.address="auto"'],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    got = params(pipeline)
    for name, value in one_process.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-12, err_msg=name)
