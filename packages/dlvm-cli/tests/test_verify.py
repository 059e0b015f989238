"""`dlvm verify`: exit codes and compiler-style diagnostics."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Invoke = Callable[..., Any]


LOCATED = re.compile(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.+)$", re.M)


def test_valid_file_exits_0_silently(invoke: Invoke, double: Path) -> None:
    result = invoke("verify", str(double))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == ""


def test_verbose_prints_ok(invoke: Invoke, double: Path) -> None:
    result = invoke("verify", "-v", str(double))
    assert result.exit_code == 0
    assert result.stdout == f"{double}: ok\n"


def test_invalid_file_reports_file_line_col(invoke: Invoke, two_errors: Path) -> None:
    result = invoke("verify", str(two_errors))
    assert result.exit_code == 1
    found = {(m["file"], int(m["line"]), int(m["col"])) for m in LOCATED.finditer(result.stderr)}
    assert (str(two_errors), 4, 10) in found  # 'frob'
    assert "Traceback" not in result.stdout + result.stderr


def test_all_errors_reported_together(invoke: Invoke, two_errors: Path) -> None:
    result = invoke("verify", str(two_errors))
    messages = [m["msg"] for m in LOCATED.finditer(result.stderr)]
    assert len(messages) == 2
    assert any("frob" in m for m in messages)
    assert any("%z" in m for m in messages)
    # Each diagnostic is followed by its source line and a caret.
    assert "    %w = frob %x: <2 x f32>\n         ^" in result.stderr


def test_every_file_is_checked(invoke: Invoke, two_errors: Path, double: Path,
                               tmp_path: Path) -> None:
    other = tmp_path / "other.dl"
    other.write_text(two_errors.read_text())
    result = invoke("verify", "-v", str(two_errors), str(double), str(other))
    assert result.exit_code == 1
    files = {m["file"] for m in LOCATED.finditer(result.stderr)}
    assert files == {str(two_errors), str(other)}
    assert f"{double}: ok" in result.stdout


def test_missing_file_is_one_line(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("verify", str(tmp_path / "nope.dl"))
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error: cannot read")
    assert result.stderr.count("\n") == 1


def test_stdin(invoke: Invoke, double: Path, two_errors: Path) -> None:
    assert invoke("verify", "-", input=double.read_text()).exit_code == 0
    result = invoke("verify", "-", input=two_errors.read_text())
    assert result.exit_code == 1
    assert "<stdin>:4:10: error:" in result.stderr


def test_binary_garbage_gives_no_traceback(invoke: Invoke, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.dl"
    garbage.write_bytes(bytes(range(256)) * 4)
    result = invoke("verify", str(garbage))
    assert result.exit_code == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("dlvm: error:")


def test_control_characters_give_located_errors(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "ctl.dl"
    path.write_bytes(b"\x01\x02func\x00")
    result = invoke("verify", str(path))
    assert result.exit_code == 1
    assert f"{path}:1:1: error:" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_no_files_is_a_usage_error(invoke: Invoke) -> None:
    assert invoke("verify").exit_code == 2
