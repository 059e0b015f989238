"""`dlvm exec`: .npz arguments and results, and one-line errors for bad calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

Invoke = Callable[..., Any]


@pytest.fixture
def args_npz(tmp_path: Path) -> Path:
    path = tmp_path / "in.npz"
    np.savez(path, arg0=np.array([1.5, -2.0], dtype=np.float32))
    return path


def test_prints_results(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["out0: <2 x f32>", "[ 3. -4.]"]


def test_writes_npz(invoke: Invoke, double: Path, args_npz: Path, tmp_path: Path) -> None:
    out = tmp_path / "result"  # no suffix: written under exactly this name
    result = invoke("exec", str(double), "-f", "@f", "--args", str(args_npz), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    with np.load(out) as archive:
        assert archive.files == ["out0"]
        # x + x of small halves is exact on every target
        np.testing.assert_array_equal(archive["out0"], np.array([3.0, -4.0], np.float32))
        assert archive["out0"].dtype == np.float32


def test_explicit_interp_target_and_seed(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz),
                    "--target", "interp", "--seed", "7")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_scalar_arguments_and_results(invoke: Invoke, tmp_path: Path) -> None:
    src = tmp_path / "scalar.dl"
    src.write_text("func @g: (f64) -> f64 {\n'entry(%x: f64):\n"
                   "    %y = multiply %x: f64, %x: f64\n    return %y: f64\n}\n")
    args = tmp_path / "in.npz"
    np.savez(args, arg0=np.array(3.0))
    result = invoke("exec", str(src), "-f", "g", "--args", str(args))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["out0: f64", "9.0"]


def test_unknown_function_lists_available(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "nope", "--args", str(args_npz))
    assert result.exit_code == 1
    assert result.stderr == f"dlvm: error: no function '@nope' to call in '{double}' " \
                            "(available: @f)\n"


def test_wrong_argument_count(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "two.npz"
    np.savez(args, arg0=np.ones(2, np.float32), arg1=np.ones(2, np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert "takes 1 argument, 2 given" in result.stderr
    assert result.stderr.count("\n") == 1


def test_no_args_file_for_a_function_with_arguments(invoke: Invoke, double: Path) -> None:
    result = invoke("exec", str(double), "-f", "f")
    assert result.exit_code == 1
    assert "takes 1 argument, 0 given" in result.stderr


def test_missing_args_file(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(tmp_path / "none.npz"))
    assert result.exit_code == 1
    assert result.stderr == (f"dlvm: error: --args: cannot read data file "
                             f"'{tmp_path / 'none.npz'}': it does not exist\n")


def test_badly_named_arrays(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "named.npz"
    np.savez(args, x=np.ones(2, np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert "arg0" in result.stderr
    assert "found x" in result.stderr


@pytest.mark.parametrize("content", [b"not an archive\n", b""])
def test_not_an_npz(invoke: Invoke, double: Path, tmp_path: Path, content: bytes) -> None:
    args = tmp_path / "bad.npz"
    args.write_bytes(content)
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error:")
    assert "Traceback" not in result.stdout + result.stderr


def test_wrong_shape_is_a_run_time_error(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "shape.npz"
    np.savez(args, arg0=np.ones(3, np.float32))
    result = invoke("exec", str(double), "-f", "f", "--args", str(args))
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error:")


def test_unknown_target(invoke: Invoke, double: Path, args_npz: Path) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz), "-t", "nosuch")
    assert result.exit_code == 1
    assert "nosuch" in result.stderr
    assert "interp" in result.stderr  # the known targets are listed


def test_missing_required_option_is_a_usage_error(invoke: Invoke, double: Path) -> None:
    result = invoke("exec", str(double))
    assert result.exit_code == 2
    assert "--function" in result.stderr


# ---------------------------------------------------------------- hostile input


SPIN = """func @spin: (f32) -> f32 {
'entry(%x: f32):
    branch 'loop(%x: f32)
'loop(%y: f32):
    branch 'loop(%y: f32)
}
"""


@pytest.fixture
def spin(tmp_path: Path) -> tuple[Path, Path]:
    """A function that never returns, and its argument."""
    path, args = tmp_path / "spin.dl", tmp_path / "one.npz"
    path.write_text(SPIN)
    np.savez(args, arg0=np.float32(1))
    return path, args


def one_error(result: Any) -> str:
    """The single line of a failed command, checked to be an ordinary error."""
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("dlvm: error: ")
    return str(result.stderr.strip())


@pytest.mark.parametrize(("options", "expected"), [
    (["--seed", "-1"], "--seed must be a non-negative integer, found -1"),
    (["--max-steps", "0"], "--max-steps must be at least 1, found 0"),
    (["--timeout", "-2"], "--timeout must be a positive number of seconds, found -2.0"),
    (["--timeout", "nan"], "--timeout must be a positive number of seconds, found nan"),
    (["--target-option", "seed=-1"], "target 'interp': option 'seed' must be at least 0, "
                                     "found -1"),
    (["--target-option", 'seed="abc"'], "target 'interp': option 'seed' must be an integer, "
                                        "found 'abc'"),
    (["--target-option", "bogus=1"], "bad options for target 'interp': got an unexpected "
                                     "keyword argument 'bogus'"),
    (["--target-option", "seed"], "--target-option 'seed': expected KEY=VALUE"),
    (["--target-option", "seed=[1"], "--target-option seed: invalid TOML value '[1'"),
    (["--seed", "1", "--target-option", "seed=2"], "--seed and --target-option seed are both "
                                                   "given"),
])
def test_bad_target_options_name_the_option(invoke: Invoke, double: Path, args_npz: Path,
                                            options: list[str], expected: str) -> None:
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz), "-t", "interp",
                    *options)
    assert one_error(result).startswith(f"dlvm: error: {expected}")


def test_target_options_reach_the_target(invoke: Invoke, tmp_path: Path) -> None:
    src = tmp_path / "random.dl"
    src.write_text("func @r: () -> <3 x f64> {\n'entry():\n"
                   "    %y = random 3 from 0.0: f64 upto 1.0: f64\n"
                   "    return %y: <3 x f64>\n}\n")
    runs = [invoke("exec", str(src), "-f", "r", "-t", "interp", *flags).stdout
            for flags in (["--seed", "7"], ["--target-option", "seed=7"],
                          ["--target-option", "seed=8"])]
    assert runs[0].startswith("out0: <3 x f64>")
    assert runs[0] == runs[1] != runs[2]


@pytest.mark.usefixtures("fresh_registry")
def test_interpreter_options_are_ignored_with_a_warning_elsewhere(
        invoke: Invoke, double: Path, args_npz: Path) -> None:
    from dataclasses import dataclass

    import dlvm.ir as ir
    from dlvm.cli.commands.exec_ import target_options
    from dlvm.ir.interp import InterpExecutable
    from dlvm.ir.plugin import PluginInfo, hookimpl, make_registry, set_registry

    @dataclass
    class Plain(ir.Target):
        """A target without `seed` and `max_steps`."""

        name = "plain"
        timeout: float | None = None

        def compile(self, module: ir.Module) -> ir.Executable:
            return InterpExecutable(module)

    class PlainPlugin:
        @hookimpl
        def register_targets(self, register: Callable[..., None]) -> None:
            register("plain", Plain, "the interpreter, without its options", priority=-1)

    reg = make_registry(autoload=False)
    reg.add_plugin(PlainPlugin(), PluginInfo("plain", "dlvm-plain", "1.0"))
    set_registry(reg)
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz),
                    "-t", "plain", "--seed", "3", "--max-steps", "9")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "dlvm: warning: --seed: target 'plain' has no option 'seed'; ignored",
        "dlvm: warning: --max-steps: target 'plain' has no option 'max_steps'; ignored"]
    assert target_options("interp", {"seed": 1, "max_steps": 5, "timeout": 2.5}, []) == {
        "seed": 1, "max_steps": 5, "timeout": 2.5}


@pytest.mark.parametrize(("limit", "expected"), [
    (["--max-steps", "1000"], "'@spin' exceeded the limit of 1000 steps"),
    (["--timeout", "0.2"], "'@spin' exceeded the timeout of 0.2 s"),
])
def test_limits_stop_a_call_that_never_returns(invoke: Invoke, spin: tuple[Path, Path],
                                               limit: list[str], expected: str) -> None:
    path, args = spin
    result = invoke("exec", str(path), "-f", "spin", "--args", str(args), "-t", "interp", *limit)
    assert expected in one_error(result)


@pytest.mark.parametrize(("value", "expected"), [
    (np.array([1e300, 1.0]), "the value 1e+300 overflows f32"),
    (np.array([1.5 + 2j, 1]), "cannot pass an array of complex numbers as <2 x f32>"),
    (np.array(["a", "b"]), "cannot pass an array of strings as <2 x f32>"),
])
def test_unsafe_conversions_name_the_argument(invoke: Invoke, double: Path, tmp_path: Path,
                                              value: np.ndarray, expected: str) -> None:
    args = tmp_path / "in.npz"
    np.savez(args, arg0=value)
    result = invoke("exec", str(double), "-f", "f", "--args", str(args), "-t", "interp")
    line = one_error(result)
    assert line.startswith(f"dlvm: error: '{args}': arg0 ('%x' of '@f'): ") and expected in line


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "is empty, not an .npz or .npy file"),
    (b"PKxx", "is not a valid .npz archive: a damaged zip file"),
    (b"PK\x03\x04 not a zip", "is not a valid .npz archive"),
    (b"\x80\x04\x95pickled", "holds pickled Python objects, which are never loaded"),
    (b"func @f: () -> f32\n", "is not an .npz or .npy file"),
])
def test_broken_args_files_are_one_line(invoke: Invoke, double: Path, tmp_path: Path,
                                        content: bytes, expected: str) -> None:
    args = tmp_path / "bad.npz"
    args.write_bytes(content)
    line = one_error(invoke("exec", str(double), "-f", "f", "--args", str(args)))
    assert expected in line and "allow_pickle" not in line


def test_object_arrays_are_never_unpickled(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "objects.npz"
    np.savez(args, arg0=np.array([{"a": 1}, None], dtype=object))
    line = one_error(invoke("exec", str(double), "-f", "f", "--args", str(args)))
    assert "holds pickled Python objects, which are never loaded" in line


def test_an_npy_file_is_not_an_archive(invoke: Invoke, double: Path, tmp_path: Path) -> None:
    args = tmp_path / "x.npy"
    np.save(args, np.ones(2, np.float32))
    line = one_error(invoke("exec", str(double), "-f", "f", "--args", str(args)))
    assert "holds a single array (.npy), not an .npz archive" in line


def test_an_array_too_big_for_memory_is_one_line(invoke: Invoke, double: Path,
                                                 tmp_path: Path) -> None:
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10**15,)})
    args = tmp_path / "huge.npz"
    with zipfile.ZipFile(args, "w") as archive:
        archive.writestr("arg0.npy", header.getvalue() + bytes(64))
    line = one_error(invoke("exec", str(double), "-f", "f", "--args", str(args)))
    assert "array 'arg0' of" in line and "does not fit in memory" in line


def test_an_oversized_result_is_one_line(invoke: Invoke, tmp_path: Path) -> None:
    src = tmp_path / "big.dl"
    src.write_text("func @big: () -> <100000 x 100000 x 100000 x f32> {\n'entry():\n"
                   "    %y = literal 0.0: <100000 x 100000 x 100000 x f32>\n"
                   "    return %y: <100000 x 100000 x 100000 x f32>\n}\n")
    line = one_error(invoke("exec", str(src), "-f", "big", "-t", "interp"))
    assert "out of memory" in line


def test_dash_writes_the_archive_to_stdout(invoke: Invoke, double: Path, args_npz: Path,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    import io

    monkeypatch.chdir(tmp_path)
    result = invoke("exec", str(double), "-f", "f", "--args", str(args_npz), "-o", "-")
    assert result.exit_code == 0, result.output
    with np.load(io.BytesIO(result.stdout_bytes)) as archive:  # x + x: exact
        np.testing.assert_array_equal(archive["out0"], np.array([3.0, -4.0], np.float32))
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("where", ["dir", "under-a-file", "the-module", "the-args"])
def test_an_unwritable_output_is_refused_before_the_call(
        invoke: Invoke, spin: tuple[Path, Path], where: str) -> None:
    path, args = spin
    output = {"dir": path.parent, "under-a-file": path / "out.npz", "the-module": path,
              "the-args": args}[where]
    source = path.read_text()
    # the call would never return: an error here means nothing ran
    line = one_error(invoke("exec", str(path), "-f", "spin", "--args", str(args),
                            "-o", str(output), "-t", "interp"))
    assert "cannot write" in line or "is also an input" in line
    assert path.read_text() == source
