"""`dlvm opt`: pipelines, printing, instrumentation and outputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dlvm.ir as ir

Invoke = Callable[..., Any]


def test_no_pipeline_prints_canonical_form(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double))
    assert result.exit_code == 0
    assert result.stdout == ir.print_module(ir.parse(double.read_text()))
    assert result.stderr == ""


def test_round_trip(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    first = invoke("opt", str(double)).stdout
    again = tmp_path / "again.dl"
    again.write_text(first)
    second = invoke("opt", str(again))
    assert second.exit_code == 0
    assert second.stdout == first


def test_verify_pass(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "verify")
    assert result.exit_code == 0
    assert result.stdout == invoke("opt", str(double)).stdout


def test_strip_names_changes_names(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names")
    assert result.exit_code == 0
    assert "%y" not in result.stdout
    assert "'entry" not in result.stdout
    assert "func @f" in result.stdout  # function names stay
    ir.verify(ir.parse(result.stdout))


def test_repeated_p_options_are_joined(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names", "-p", "verify", "--stats")
    assert result.exit_code == 0
    assert "strip-names: changed" in result.stderr
    assert "verify: unchanged" in result.stderr


def test_unknown_pass_is_a_one_line_error(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names,no-such-pass")
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error:")
    assert "no-such-pass" in result.stderr.splitlines()[0]
    assert result.stdout == ""
    assert "Traceback" not in result.stdout + result.stderr


def test_bad_pass_option(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names{bogus=1}")
    assert result.exit_code == 1
    assert "bogus" in result.stderr


def test_print_after_all(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names,verify", "--print-after-all")
    assert result.exit_code == 0
    err = result.stderr
    assert "// -----// IR Dump After strip-names (changed) //----- //" in err
    assert "// -----// IR Dump After verify (unchanged) //----- //" in err
    after_strip = err.split("IR Dump After strip-names")[1].split("IR Dump After verify")[0]
    assert "func @f" in after_strip
    assert "%y" not in after_strip


def test_time_passes(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names,verify", "--time-passes")
    assert result.exit_code == 0
    err = result.stderr
    assert "strip-names" in err
    assert "verify" in err
    assert "Total" in err
    assert "%" in err
    assert "func @f" in result.stdout  # the table does not go to stdout


def test_stats(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names", "--stats")
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert lines[0] == "strip-names: changed"
    assert "  instructions: 2 -> 2" in lines
    assert "  names removed: 2" in lines


def test_output_file(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.dl"
    result = invoke("opt", str(double), "-p", "strip-names", "-o", str(out))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "'0(" in out.read_text()


def test_unwritable_output(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    result = invoke("opt", str(double), "-o", str(tmp_path))  # a directory
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error: cannot write")


def test_stdin(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", "-", "-p", "strip-names", input=double.read_text())
    assert result.exit_code == 0
    assert "%0.0 = add" in result.stdout


def test_invalid_input_is_rejected_before_passes(invoke: Invoke, two_errors: Path) -> None:
    result = invoke("opt", str(two_errors), "-p", "strip-names", "--stats")
    assert result.exit_code == 1
    assert f"{two_errors}:4:10: error:" in result.stderr
    assert "strip-names: " not in result.stderr


def test_no_verify_still_runs(invoke: Invoke, double: Path) -> None:
    result = invoke("opt", str(double), "-p", "strip-names", "--no-verify")
    assert result.exit_code == 0


def test_verify_each_is_passed_to_the_pass_manager(invoke: Invoke, double: Path,
                                                   monkeypatch: Any) -> None:
    seen: list[object] = []
    run = ir.run_passes

    def spy(module: ir.Module, pipeline: str, **kwargs: Any) -> Any:
        seen.append(kwargs.get("verify_each"))
        return run(module, pipeline, **kwargs)

    monkeypatch.setattr(ir, "run_passes", spy)
    for flags, expected in (([], None), (["--verify-each"], True), (["--no-verify"], False)):
        assert invoke("opt", str(double), "-p", "strip-names", *flags).exit_code == 0
        assert seen.pop() is expected


def test_an_unwritable_output_is_refused_before_the_passes(invoke: Invoke, double: Path,
                                                           tmp_path: Path) -> None:
    for output in (tmp_path, double / "out.dl"):
        result = invoke("opt", str(double), "-p", "no-such-pass", "-o", str(output))
        assert result.exit_code == 1
        assert result.stderr.startswith(f"dlvm: error: cannot write output '{output}': ")
        assert result.stderr.count("\n") == 1


def test_the_output_is_replaced_whole(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.dl"
    result = invoke("opt", str(double), "-o", str(out))
    assert result.exit_code == 0
    assert out.read_text() == ir.print_module(ir.parse(double.read_text()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["double.dl", "out.dl"]
