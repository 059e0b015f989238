"""What `dlvm run` shows while it trains: on a terminal, "compiling" until the first step has
compiled (not a bar standing at 0) and each finished epoch's line kept above the live bars;
elsewhere one plain line per epoch; with --quiet nothing."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from dlvm.cli.commands.run import execute
from dlvm.cli.run.progress import Reporter, describe
from dlvm.cli.run.spec import load_spec

# y = x·w element-wise, fitted by hand-written gradient descent on the mean squared error.
MODULE = """\
func @train_step: (<3 x f32>, <_ x 3 x f32>, <_ x 3 x f32>, f32) -> (<3 x f32>, f32) {
'entry(%w: <3 x f32>, %x: <_ x 3 x f32>, %y: <_ x 3 x f32>, %lr: f32):
    %wp = padShape %w: <3 x f32> at 0
    %p = multiply %x: <_ x 3 x f32>, %wp: <1 x 3 x f32>
    %e = subtract %p: <_ x 3 x f32>, %y: <_ x 3 x f32>
    %sq = multiply %e: <_ x 3 x f32>, %e: <_ x 3 x f32>
    %total = reduce %sq: <_ x 3 x f32> by add init 0.0: f32
    %count = unitCount of %e: <_ x 3 x f32>
    %n = dataTypeCast %count: i64 to f32
    %loss = divide %total: f32, %n: f32
    %ex = multiply %e: <_ x 3 x f32>, %x: <_ x 3 x f32>
    %g = reduce %ex: <_ x 3 x f32> by add init 0.0: f32 along 0
    %k = divide 2.0: f32, %n: f32
    %s = multiply %k: f32, %lr: f32
    %d = multiply %g: <3 x f32>, %s: f32
    %w2 = subtract %w: <3 x f32>, %d: <3 x f32>
    %r = literal (%w2: <3 x f32>, %loss: f32): (<3 x f32>, f32)
    return %r: (<3 x f32>, f32)
}
"""

PIPELINE = """\
[module]
path = "model.dl"
[target]
name = "interp"
[data]
path = "data.npz"
test_fraction = 0
[train]
step = "train_step"
init = "normal"
epochs = 3
learning_rate = 0.1
batch_size = 8
"""

RECORD = {"epoch": 2, "loss": 0.25, "accuracy": 0.9, "learning_rate": 0.1, "seconds": 1.5,
          "examples_per_second": 1234.0}


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    (tmp_path / "model.dl").write_text(MODULE)
    x = np.random.default_rng(0).normal(size=(24, 3)).astype(np.float32)
    np.savez(tmp_path / "data.npz", inputs=x, labels=x * np.float32([1, 2, 3]))
    (tmp_path / "pipeline.toml").write_text(PIPELINE)
    return tmp_path / "pipeline.toml"


def terminal() -> Console:
    """A console that draws as on a terminal and keeps what it drew."""
    return Console(file=io.StringIO(), record=True, force_terminal=True, width=120)


def screen(console: Console) -> list[str]:
    """What a terminal shows after the console's output: its text, newlines, carriage
    returns, and the cursor-up and erase-line codes a live display redraws itself with."""
    assert isinstance(console.file, io.StringIO)
    lines, row, col = [""], 0, 0
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)", console.file.getvalue()):
        up = re.fullmatch(r"\x1b\[(\d*)A", token)
        if token == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif token == "\r":
            col = 0
        elif token == "\x1b[2K":
            lines[row] = ""
        elif up:
            row -= int(up[1] or 1)
        elif token and not token.startswith("\x1b["):  # text; other codes are colours
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token):]
            col += len(token)
    return [line.rstrip() for line in lines if line.strip()]


def train(pipeline: Path, reporter: Reporter) -> dict[str, Any]:
    results: dict[str, Any] = {}
    execute(load_spec(pipeline), reporter, False, results)
    return results


def test_an_epoch_is_one_line_with_its_loss_accuracy_rate_and_time() -> None:
    assert describe(RECORD, 5) == ("epoch 2/5  loss 0.2500  accuracy 90.0%  lr 0.1  1.5 s  "
                                   "1,234 examples/s")
    assert describe({"epoch": 1, "loss": None}, 1) == "epoch 1/1  loss nan"


def test_on_a_terminal_the_bar_says_compiling_until_the_first_step() -> None:
    console = terminal()
    with Reporter(console=console).training(epochs=2, start=0, steps=3) as bar:
        before = console.export_text()
        bar.step(0.5)
        bar.evaluating()
        console.file.truncate(0)
    assert "compiling" in before and "until the first step returns" in before
    assert "batches" not in before and "0/3" not in before


def test_on_a_terminal_each_epochs_line_stays_above_the_bars(pipeline: Path) -> None:
    console = terminal()
    results = train(pipeline, Reporter(console=console))
    assert results["epochs"] == 3
    shown = screen(console)
    assert [line.split("  ")[0] for line in shown[:3]] == ["epoch 1/3", "epoch 2/3",
                                                           "epoch 3/3"]
    assert all(" lr 0.1 " in line and " s " in line for line in shown[:3])
    assert "epochs" in shown[3] and "3/3" in shown[3]  # the bars, below the history
    assert len(shown) == 4
    drawn = console.export_text()
    assert "compiling for interp" in drawn  # the spinner while the module compiles
    assert "until the first step returns" in drawn.split("epoch 1/3")[0]


def test_elsewhere_each_epoch_is_one_plain_line(pipeline: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    train(pipeline, Reporter(fancy=False))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[0] for line in lines[:3]] == ["epoch 1/3", "epoch 2/3",
                                                            "epoch 3/3"]
    assert lines[3].startswith("final training loss: ") and len(lines) == 4
    assert "compiling" not in "\n".join(lines)


def test_quiet_shows_nothing(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    console = terminal()
    reporter = Reporter(quiet=True, console=console)
    with reporter.status("compiling"):
        reporter.log("a line")
    with reporter.training(epochs=1, start=0, steps=1) as bar:
        bar.step(0.5)
        bar.epoch({"epoch": 1, "loss": 0.5})
    assert console.export_text() == "" and capsys.readouterr().out == ""
