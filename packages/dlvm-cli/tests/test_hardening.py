"""How the CLI meets hostile input in its shared pieces: errors, warnings, command-line
values, pass options and `--set` blame."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.cli import errors
from dlvm.cli.inputs import assignment, toml_value
from dlvm.cli.run.spec import SpecError, blamed_override, option_text, parse_override
from dlvm.cli.run.train import reconcile_metrics


def test_out_of_memory_is_an_ordinary_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert errors.report(MemoryError("Unable to allocate 7 PiB")) == errors.EXIT_FAILURE
    assert capsys.readouterr().err == "dlvm: error: out of memory: Unable to allocate 7 PiB\n"
    errors.report(MemoryError())
    assert capsys.readouterr().err == "dlvm: error: out of memory\n"


def test_warnings_are_one_line_each_and_name_no_source_file(
        capsys: pytest.CaptureFixture[str]) -> None:
    with errors.warnings_reported(), warnings.catch_warnings():
        warnings.simplefilter("always")
        for _ in range(3):
            np.exp(np.array([1000.0]))
    assert capsys.readouterr().err == "dlvm: warning: overflow encountered in exp\n"


@pytest.mark.parametrize(("raw", "value"), [
    ("3", 3), (" 0.5 ", 0.5), ("true", True), ('"x y"', "x y"), ("[1, 2]", [1, 2]),
    ("{a = 1}", {"a": 1}), ("interp", "interp"), ("", ""), ("nan", pytest.approx(float("nan"),
                                                                                nan_ok=True)),
])
def test_command_line_values_are_toml_or_plain_strings(raw: str, value: object) -> None:
    assert toml_value(raw) == value


@pytest.mark.parametrize("raw", ["[1, 2", '"open', "{a = }", "1\nb = 2"])
def test_text_that_starts_like_toml_must_be_toml(raw: str) -> None:
    with pytest.raises(ir.DlvmError, match="invalid TOML value"):
        toml_value(raw)


def test_assignments_name_their_option() -> None:
    assert assignment("seed = 3", "--target-option") == ("seed", 3)
    with pytest.raises(ir.DlvmError, match=r"^--target-option 'seed': expected KEY=VALUE$"):
        assignment("seed", "--target-option")


@pytest.mark.parametrize(("text", "message"), [
    ("train.epochs", "--set train.epochs: error: expected KEY=VALUE"),
    ("train..epochs=1", "--set train..epochs=1: error: expected KEY=VALUE"),
    ("=1", "--set =1: error: expected KEY=VALUE"),
    ("train.parameters=[1", "--set train.parameters: error: invalid TOML value '[1'"),
])
def test_bad_overrides_say_set(text: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_override(text)
    assert len(e.value.lines) == 1 and e.value.lines[0].startswith(message)


def test_problems_are_blamed_on_the_override_that_caused_them() -> None:
    written = {("train",): (1, 1), ("train", "epochs"): (2, 1)}
    overridden = [("train", "parameters"), ("trian", "epochs")]
    assert blamed_override(("train", "parameters", 0), overridden, written) == \
        ("train", "parameters")
    assert blamed_override(("trian",), overridden, written) == ("trian", "epochs")
    assert blamed_override(("train",), overridden, written) is None  # a table of the file
    assert blamed_override(("train", "epochs"), overridden, written) is None


@pytest.mark.parametrize(("value", "text"), [
    (5, "5"), (True, "true"), (0.25, "0.25"), ("cse", "cse"), ("a b", '"a b"'), ("", '""'),
    ("x}", '"x}"'), ([1, 2], "1,2"), (["a b", "c"], '"a b,c"'),
])
def test_pass_options_become_pipeline_text(value: object, text: str) -> None:
    assert option_text(value) == text


@pytest.mark.parametrize("value", [{"a": 1}, ["a,b"], [[1]], 'say "hi" there'])
def test_pass_options_that_pipeline_text_cannot_hold_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        option_text(value)


def test_metrics_agree_with_the_checkpoint_before_a_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.jsonl"
    records = [json.dumps({"epoch": e, "loss": 1.0 / e}) for e in (1, 3, 4)]
    path.write_text("\n".join(records) + '\n{"epoch": 5, "lo')
    reconcile_metrics(path, 3)
    assert [json.loads(line)["epoch"] for line in path.read_text().splitlines()] == [1, 3]
    notes = capsys.readouterr().err.splitlines()
    assert notes == [f"dlvm: note: dropped the incomplete last line of '{path}'",
                     f"dlvm: note: dropped 1 record(s) of '{path}' after epoch 3, the "
                     "checkpoint's",
                     f"dlvm: note: '{path}' lacks the metrics of epoch(s) 2"]
