"""The code blocks of the repository's Markdown files, and a runner that executes them as a
reader would: ```python blocks of one file in order in one namespace, ```sh blocks in bash,
from the repository root. Other languages (```text, ```toml, ```dlvm, …) are not run.

A block that is not meant to be run is preceded by `<!-- doc-test: skip — REASON -->`; one
that needs a CUDA GPU by `<!-- doc-test: gpu -->`.

`python integration-tests/doc_blocks.py [--gpu] FILE.md…` runs the files' blocks in the
current directory, which should be a scratch copy of the repository (blocks write files, such
as the examples' `out/` folders): `test_doc_blocks.py` makes one for each file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

RUNNABLE = ("python", "sh")
# Tags that readers run but this convention spells differently.
RESPELLED = {"py": "python", "python3": "python", "pycon": "python", "bash": "sh",
             "shell": "sh", "console": "sh", "zsh": "sh"}
# Fences whose lines are not meant to be typed; commands found in them should be ```sh.
LISTINGS = ("text", "")
COMMAND = re.compile(r"^\s*(\$\s+)?(dlvm|python3?|pip|nox)\s")
# Commands that install into the environment the blocks run in, or build environments of
# their own (nox): a block holding one must say why it is skipped.
INSTALLS = re.compile(r"(^|[;&|(])\s*(((python3?\s+-m\s+)?pip3?|uv\s+pip)\s+install|nox)\b",
                      re.MULTILINE)
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:(?P<body>.*?)-->\s*$")
DIRECTIVE_BODY = re.compile(r"^\s*(?P<kind>[\w-]+)\s*(?:[—–]|-{1,2})?\s*(?P<reason>.*?)\s*$")
DIRECTIVE_KINDS = ("skip", "gpu")
# Folders that are no part of a fresh clone: environments, caches, build and run outputs.
NOT_IN_A_CLONE = {".git", ".nox", ".venv", "venv", ".tox", "__pycache__", ".pytest_cache",
                  ".ruff_cache", ".mypy_cache", ".hypothesis", "node_modules", "build", "dist",
                  "out", "Output"}


@dataclass(frozen=True)
class Directive:
    """`<!-- doc-test: KIND — REASON -->` on the line before a block."""

    kind: str
    reason: str
    line: int


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language tag, its code, and where it is."""

    path: str
    line: int
    language: str
    code: str
    directive: Directive | None = None

    @property
    def first_code_line(self) -> int:
        return self.line + 1

    @property
    def runnable(self) -> bool:
        return self.language in RUNNABLE

    @property
    def skipped(self) -> bool:
        return self.directive is not None and self.directive.kind == "skip"

    @property
    def needs_gpu(self) -> bool:
        return self.directive is not None and self.directive.kind == "gpu"

    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Problem:
    """A block written against the convention: `path:line: error: message`."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: error: {self.message}"


@dataclass
class Document:
    """A Markdown file's blocks and the problems found while reading them."""

    path: str
    blocks: list[Block] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_run(self, gpu: bool) -> list[Block]:
        """The blocks a run executes: runnable, not skipped, and GPU blocks only on a GPU."""
        return [b for b in self.blocks
                if b.runnable and not b.skipped and (gpu or not b.needs_gpu)]

    @property
    def has_gpu_blocks(self) -> bool:
        return any(b.needs_gpu for b in self.blocks)


def is_out_of_clone(name: str) -> bool:
    return name in NOT_IN_A_CLONE or name.endswith(".egg-info")


def markdown_files(root: Path) -> list[Path]:
    """Every Markdown file of the repository at `root`, outside environments, caches and
    build outputs, in path order."""
    found = []
    for path in root.rglob("*.md"):
        parts = path.relative_to(root).parts[:-1]
        if not any(is_out_of_clone(p) or p.startswith(".") for p in parts):
            found.append(path)
    return sorted(found)


def copy_repository(root: Path, destination: Path) -> Path:
    """A copy of the repository as a fresh clone has it (no environments, caches or
    outputs), for blocks to run in without changing the checkout."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if is_out_of_clone(n) or n.endswith(".pyc")}

    shutil.copytree(root, destination, ignore=ignore, symlinks=True)
    return destination


def parse_directive(line: str, number: int, path: str,
                    problems: list[Problem]) -> Directive | None:
    """The directive on `line`, or None when the line is none; a malformed one is a
    problem."""
    match = DIRECTIVE.match(line)
    if match is None:
        return None
    body = DIRECTIVE_BODY.match(match["body"])
    kind, reason = (body["kind"], body["reason"]) if body else ("", "")
    if kind not in DIRECTIVE_KINDS:
        problems.append(Problem(path, number, f"unknown doc-test directive '{kind}' (one of "
                                f"{', '.join(DIRECTIVE_KINDS)})"))
        return None
    if kind == "skip" and not reason:
        problems.append(Problem(path, number, "'doc-test: skip' needs a reason: "
                                "<!-- doc-test: skip — REASON -->"))
        return None
    return Directive(kind, reason, number)


def check_block(block: Block, problems: list[Problem]) -> None:
    """Problems of one block: a tag the convention spells otherwise, commands in a
    listing, a directive on a block that is not run."""
    if block.language in RESPELLED:
        problems.append(Problem(block.path, block.line, f"write ```{RESPELLED[block.language]}"
                                f" instead of ```{block.language}, so that the block is run"))
    elif block.language in LISTINGS:
        for offset, text in enumerate(block.code.splitlines()):
            if COMMAND.match(text):
                problems.append(Problem(block.path, block.first_code_line + offset,
                                        f"a command to type in a ```{block.language or ''} "
                                        f"block: make it a ```sh block ({text.strip()!r})"))
    if block.language == "sh" and not block.skipped and INSTALLS.search(block.code):
        problems.append(Problem(block.path, block.line, "an sh block that installs packages "
                                "or builds environments (pip install, nox) would change what "
                                "the tests run with: mark it <!-- doc-test: skip — REASON -->"))
    if block.directive is not None and not block.runnable:
        problems.append(Problem(block.path, block.directive.line,
                                f"a doc-test directive before a ```{block.language} block, "
                                "which is not run"))


def indented_commands(lines: list[str], path: str, inside_fence: list[bool]) -> list[Problem]:
    """Commands in indented code blocks (four spaces after a blank line), which are never
    run: they should be ```sh blocks."""
    problems = []
    for i, text in enumerate(lines):
        if inside_fence[i] or not text.startswith("    ") or not COMMAND.match(text):
            continue
        if i > 0 and not lines[i - 1].strip():
            problems.append(Problem(path, i + 1, "a command in an indented code block: make "
                                    f"it a ```sh block ({text.strip()!r})"))
    return problems


def read_document(path: Path, root: Path) -> Document:
    """The blocks of the Markdown file at `path` (named relative to `root`)."""
    name = path.relative_to(root).as_posix()
    document = Document(name)
    lines = path.read_text(encoding="utf-8").splitlines()
    inside_fence = [False] * len(lines)
    pending: Directive | None = None
    i = 0
    while i < len(lines):
        directive = parse_directive(lines[i], i + 1, name, document.problems)
        if directive is not None:
            if pending is not None:
                document.problems.append(Problem(name, pending.line, "a doc-test directive "
                                                 "that no code block follows"))
            pending = directive
            i += 1
            continue
        opening = FENCE.match(lines[i])
        if opening is None:
            if lines[i].strip() and pending is not None:
                document.problems.append(Problem(name, pending.line, "a doc-test directive "
                                                 "that no code block follows"))
                pending = None
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        language = opening["info"].split()[0].lower() if opening["info"].strip() else ""
        closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            text = lines[j]
            body.append(text[min(indent, len(text) - len(text.lstrip(" "))):])
            j += 1
        if j == len(lines):
            document.problems.append(Problem(name, i + 1, "a code block that is never closed"))
        for k in range(i, min(j + 1, len(lines))):
            inside_fence[k] = True
        block = Block(name, i + 1, language, "\n".join(body) + "\n", pending)
        check_block(block, document.problems)
        document.blocks.append(block)
        pending = None
        i = j + 1
    if pending is not None:
        document.problems.append(Problem(name, pending.line,
                                         "a doc-test directive that no code block follows"))
    document.problems += indented_commands(lines, name, inside_fence)
    document.problems.sort(key=lambda p: p.line)
    return document


# --------------------------------------------------------------------------- running


class BlockFailed(Exception):
    """A block did not run through; the message says where and why."""


def reader_frames(tb: TracebackType | None, path: str) -> TracebackType | None:
    """The traceback from the first frame of the Markdown file on (the runner's own frames
    say nothing to a reader)."""
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    return tb


def run_python(block: Block, namespace: dict[str, object]) -> None:
    """Execute a python block in the file's namespace; line numbers are the Markdown
    file's."""
    source = "\n" * (block.first_code_line - 1) + block.code
    try:
        exec(compile(source, block.path, "exec"), namespace)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise BlockFailed(f"{block.where()}: error: the python block exited with "
                              f"status {e.code}") from None
    except BaseException as e:
        frames = reader_frames(e.__traceback__, block.path) or e.__traceback__
        sys.stdout.write("".join(traceback.format_exception(type(e), e, frames)))
        raise BlockFailed(f"{block.where()}: error: the python block raised "
                          f"{type(e).__name__}: {e}") from None


def run_sh(block: Block) -> None:
    """Run an sh block in bash, stopping at the first failing command, whose line (the
    Markdown file's) is reported."""
    trap = ("set -eo pipefail; trap 'status=$?; echo \"$0:$LINENO: error: the command "
            "exited with status $status\" >&2' ERR")
    script = trap + "\n" * (block.first_code_line - 1) + block.code
    sys.stdout.flush()
    done = subprocess.run(["bash", "-c", script, block.path], check=False)
    if done.returncode != 0:
        raise BlockFailed(f"{block.where()}: error: the sh block failed (exit status "
                          f"{done.returncode})")


RUNNERS: dict[str, Callable[[Block, dict[str, object]], None]] = {
    "python": run_python,
    "sh": lambda block, namespace: run_sh(block),
}


def run_document(document: Document, gpu: bool) -> Iterator[str]:
    """Run the document's blocks in order, yielding one line per block; raises BlockFailed
    at the first that fails."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in document.to_run(gpu):
        started = time.perf_counter()
        RUNNERS[block.language](block, namespace)
        yield f"{block.where()}: ran the {block.language} block " \
              f"({time.perf_counter() - started:.1f} s)"


def run_in_copy(root: Path, document: str, scratch: Path, gpu: bool = False,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the blocks of `document` (a path relative to `root`) in a fresh copy of the
    repository at `scratch`, in a child Python process whose `python`, `dlvm`, … come first
    on PATH; its output (stdout and stderr, interleaved) is the result's stdout."""
    copy_repository(root, scratch)
    bin_folder = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bin_folder, os.environ.get("PATH", "")])}
    command = [sys.executable, str(Path(__file__).resolve()), *(["--gpu"] if gpu else []),
               document]
    return subprocess.run(command, cwd=scratch, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="Markdown files, relative to "
                        "the current directory (a copy of the repository root)")
    parser.add_argument("--gpu", action="store_true", help="also run the blocks marked gpu")
    args = parser.parse_args(argv)
    root = Path.cwd()
    status = 0
    for path in args.files:
        document = read_document(root / path, root)
        for problem in document.problems:
            print(problem)
            status = 1
        try:
            for report in run_document(document, args.gpu):
                print(report, flush=True)
        except BlockFailed as e:
            sys.stdout.flush()
            print(e, flush=True)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

