"""The hostile-input corpus: `integration-tests/hostile/*.toml`, one case per file, each the
commands a user (or an attacker) might type and what must come of them.

A case writes its files into a scratch folder, runs its commands there in order, and checks
each one: the exit status, words its standard error (or output) must hold, files that must
be left exactly as they were, and that it ends within its time limit. Every command is also
held to what every DLVM command owes a user: no Python traceback and no internal error.

    description = "what the case is about"
    [files]                       # written before the commands (text)
    "model.dl" = '''...'''
    [copy]                        # files of the repository, copied in
    "data.npz" = "examples/digits-mlp/digits.npz"
    [[run]]
    command = ["dlvm", "opt", "model.dl", "-o", "model.dl"]
    exit = 1                      # the exit status (default 1)
    stderr = ["would replace"]    # substrings of standard error
    stdout = []                   # substrings of standard output
    unchanged = ["model.dl"]      # files whose bytes must not change
    absent = []                   # files that must not exist afterwards
    timeout = 60                  # seconds (default 60); a command past it fails the case
    stdin = "..."                 # optional standard input
    stdin_file = "/dev/zero"      # or a file (of the scratch folder, or absolute) as stdin
    env = { DLVM_X = "1" }        # optional environment additions

`{scratch}` in a file's text, a command word or an environment value is the scratch folder's
absolute path (for outputs given as absolute paths). A command that only prepares (writes a
file with `python -c`, makes a link with `ln -s`) says `exit = 0`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "hostile"
CASES = sorted(CORPUS.glob("*.toml"))
CASE_KEYS = {"description", "files", "copy", "run"}
RUN_KEYS = {"command", "exit", "stderr", "stdout", "unchanged", "absent", "timeout", "stdin",
            "stdin_file", "env"}
SCRATCH = "{scratch}"
NEVER = ("Traceback (most recent call last)", "internal error")


def load(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        case = tomllib.load(f)
    unknown = set(case) - CASE_KEYS
    assert not unknown, f"{path.name}: unknown keys {sorted(unknown)}"
    assert case.get("description") and case.get("run"), f"{path.name}: needs description, run"
    for run in case["run"]:
        unknown = set(run) - RUN_KEYS
        assert not unknown, f"{path.name}: unknown keys {sorted(unknown)} in a [[run]]"
        assert not ("stdin" in run and "stdin_file" in run), f"{path.name}: stdin or stdin_file"
    return case


def run_command(argv: list[str], run: dict[str, Any], scratch: Path, env: dict[str, str]
                ) -> subprocess.CompletedProcess[str]:
    """The command, run in the scratch folder with its standard input."""
    common: dict[str, Any] = {"cwd": scratch, "env": env, "capture_output": True,
                              "text": True, "errors": "replace",
                              "timeout": run.get("timeout", 60)}
    if "stdin_file" not in run:
        return subprocess.run(argv, input=run.get("stdin"), **common)
    with open(scratch / run["stdin_file"], "rb") as stdin:
        return subprocess.run(argv, stdin=stdin, **common)


def command_line(argv: list[str]) -> list[str]:
    """`dlvm` and `python` as this environment's own."""
    bin_dir = Path(sys.executable).parent
    head, *rest = argv
    if head == "dlvm":
        return [str(bin_dir / "dlvm"), *rest]
    if head in ("python", "python3"):
        return [sys.executable, *rest]
    return argv


def test_the_corpus_is_there() -> None:
    assert len(CASES) >= 2


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_hostile_case(path: Path, tmp_path: Path) -> None:
    case = load(path)
    scratch = str(tmp_path)
    for name, text in case.get("files", {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace(SCRATCH, scratch), encoding="utf-8")
    for name, source in case.get("copy", {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / source, tmp_path / name)
    for k, run in enumerate(case["run"]):
        what = f"{path.name} [[run]] {k}: {' '.join(run['command'])}"
        before = {name: (tmp_path / name).read_bytes() for name in run.get("unchanged", [])}
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
               **{str(k): str(v).replace(SCRATCH, scratch)
                  for k, v in run.get("env", {}).items()}}
        env.pop("DLVM_DEBUG", None)
        argv = command_line([word.replace(SCRATCH, scratch) for word in run["command"]])
        try:
            done = run_command(argv, run, tmp_path, env)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{what}: still running after {run.get('timeout', 60)} s",
                        pytrace=False)
        report = f"{what}\nexit {done.returncode}\nstderr:\n{done.stderr[-3000:]}\n" \
                 f"stdout:\n{done.stdout[-1500:]}"
        assert done.returncode == run.get("exit", 1), report
        for bad in NEVER:
            assert bad not in done.stderr and bad not in done.stdout, report
        for text in run.get("stderr", []):
            assert text in done.stderr, f"missing {text!r} in standard error\n{report}"
        for text in run.get("stdout", []):
            assert text in done.stdout, f"missing {text!r} in standard output\n{report}"
        for name, data in before.items():
            assert (tmp_path / name).read_bytes() == data, f"{name} changed\n{report}"
        for name in run.get("absent", []):
            assert not (tmp_path / name).exists(), f"{name} exists\n{report}"
