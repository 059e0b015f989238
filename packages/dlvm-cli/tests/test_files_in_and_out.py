"""Files in and out of the `dlvm` command: inputs read within a cap, outputs that never
replace an input, and Ctrl-C that ends any read or command with exit 130 and one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.cli import errors
from dlvm.cli.inputs import toml_value
from dlvm.cli.run.train import append_metrics
from dlvm.ir import files

from .conftest import DOUBLE

DLVM = str(Path(sys.executable).parent / "dlvm")
PROMPTLY = 10  # seconds from SIGINT to exit, with room for a busy machine


def test_stdin_is_read_up_to_a_modules_cap(invoke: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_TEXT_BYTES", len(DOUBLE) - 1)
    result = invoke("verify", "-", input=DOUBLE)
    assert result.exit_code == 1
    assert result.stderr == (f"dlvm: error: cannot read module '<stdin>': it holds more than "
                             f"the {len(DOUBLE) - 1} bytes limit for one module\n")
    monkeypatch.setattr(files, "MAX_TEXT_BYTES", len(DOUBLE))
    assert invoke("verify", "-", input=DOUBLE).exit_code == 0


@pytest.mark.parametrize("command", [
    ["opt", "{model}", "-o", "{model}"],
    ["opt", "{model}", "-o", "{link}"],
    ["compile", "{model}", "--emit", "dlvm", "-o", "{model}"],
    ["compile", "{model}", "-t", "llvm-cpu", "--emit", "llvm", "-o", "{dotted}"],
    ["exec", "{model}", "-f", "f", "-o", "{model}"],
])
def test_no_command_writes_over_its_module(invoke: Any, tmp_path: Path,
                                           command: list[str]) -> None:
    model = tmp_path / "model.dl"
    model.write_text(DOUBLE)
    (tmp_path / "sub").mkdir()
    os.symlink(model, tmp_path / "link.dl")
    names = {"model": str(model), "link": str(tmp_path / "link.dl"),
             "dotted": str(tmp_path / "sub" / ".." / "model.dl")}
    result = invoke(*[word.format(**names) for word in command])
    assert result.exit_code == 1
    assert result.stderr.startswith("dlvm: error: cannot write output '")
    assert "it is also an input" in result.stderr and result.stderr.count("\n") == 1
    assert model.read_text() == DOUBLE


def test_an_interrupted_command_says_so_in_one_line(invoke: Any,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ir, "run_passes", interrupted)
    (tmp_path / "m.dl").write_text(DOUBLE)
    result = invoke("opt", str(tmp_path / "m.dl"), "-p", "cse")
    assert result.exit_code == errors.EXIT_INTERRUPTED
    assert result.stderr == "dlvm: note: interrupted\n"


@pytest.mark.parametrize("command", [["verify", "{fifo}"], ["run", "{fifo}"]])
def test_ctrl_c_ends_a_read_that_never_ends(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    argv = [DLVM, *[word.format(fifo=fifo) for word in command]]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as process, \
            open(fifo, "wb") as writer:  # opens once the command opens it to read
        writer.write(b"// a module that never ends\n")
        writer.flush()
        assert_interrupted_promptly(process)


def test_ctrl_c_ends_a_read_of_stdin_that_never_ends() -> None:
    with subprocess.Popen([DLVM, "opt", "-"], stdin=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        assert process.stdin is not None
        process.stdin.write(b"// a module that never ends\n")
        process.stdin.flush()
        assert_interrupted_promptly(process)


def assert_interrupted_promptly(process: subprocess.Popen[Any]) -> None:
    """SIGINT while the process reads: it ends with exit 130 and one note, promptly."""
    wait_until_reading(process.pid)
    start = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.wait(timeout=PROMPTLY)
    assert time.monotonic() - start < PROMPTLY
    assert process.stderr is not None
    stderr = process.stderr.read()
    stderr = stderr if isinstance(stderr, str) else stderr.decode()
    assert process.returncode == errors.EXIT_INTERRUPTED, stderr
    assert stderr == "dlvm: note: interrupted\n"


def test_ctrl_c_ends_a_compile_promptly(tmp_path: Path) -> None:
    mlp = Path(__file__).resolve().parents[3] / "examples" / "digits-mlp" / "mlp.dl"
    argv = [DLVM, "opt", str(mlp), "-p", "differentiation,O2,O3,O2,O3", "--print-after-all",
            "-o", str(tmp_path / "out.dl")]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        first = process.stderr.readline()  # the passes have started
        assert first.startswith("// -----// IR Dump After"), first
        start = time.monotonic()
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        process.wait(timeout=PROMPTLY)
    assert time.monotonic() - start < PROMPTLY
    assert process.returncode == errors.EXIT_INTERRUPTED
    assert rest.endswith("dlvm: note: interrupted\n") and "Traceback" not in rest
    assert not (tmp_path / "out.dl").exists()


READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}  # read(2), as /proc/PID/syscall numbers it


def wait_until_reading(pid: int) -> None:
    """Until the process waits in read(2), so that the signal interrupts the read itself
    (skipped where /proc does not tell)."""
    number = READ_SYSCALL.get(os.uname().machine)
    deadline = time.monotonic() + PROMPTLY
    while number is not None and time.monotonic() < deadline:
        try:
            syscall = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            break
        if syscall[:1] == [number]:
            return
        time.sleep(0.01)
    pytest.skip("cannot tell when the process waits in a read")


def test_metrics_that_cannot_be_written_are_a_one_line_error() -> None:
    with pytest.raises(ir.DlvmError) as e:
        append_metrics(Path("/dev/full"), {"epoch": 1, "loss": 0.5})
    assert str(e.value) == "cannot write metrics '/dev/full': no space left on the device"


@pytest.mark.parametrize("raw", ["[" * 10_000 + "]" * 10_000, "{a=" * 10_000 + "1" + "}" * 10_000])
def test_command_line_values_nested_thousands_deep_are_refused(raw: str) -> None:
    with pytest.raises(ir.DlvmError) as e:
        toml_value(raw)
    assert str(e.value).endswith(": arrays or tables are nested too deeply")
    assert len(str(e.value)) < 200


def test_data_files_keep_their_checks_through_the_shared_reader(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    os.symlink(tmp_path / "a.npz", tmp_path / "link.npz")
    from dlvm.cli.run.files import read_npz

    assert read_npz(tmp_path / "link.npz")["x"].tolist() == [0, 1, 2]
