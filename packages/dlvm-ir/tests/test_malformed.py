"""The corpus of malformed programs in `tests/malformed/` and their expected diagnostics.

Each file starts with one `// ERROR: LINE:COL: SUBSTRING` comment per independent error
(line numbers count these header lines too). Parsing, and verifying when parsing succeeds,
must raise `DiagnosticError` with exactly one diagnostic per ERROR line, at that line and
column, whose message contains the substring; each must render with its source line and a
caret under the column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import dlvm.ir as ir

CORPUS = Path(__file__).parent / "malformed"
FILES = sorted(CORPUS.glob("*.dl"))
HEADER = re.compile(r"^// ERROR: (\d+):(\d+): (.+)$")


@dataclass(frozen=True)
class Expected:
    line: int
    column: int
    substring: str

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.substring}"


def read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def expectations(text: str) -> list[Expected]:
    out = []
    for line in text.split("\n"):
        m = HEADER.match(line)
        if m:
            out.append(Expected(int(m[1]), int(m[2]), m[3]))
    return out


def diagnose(text: str, filename: str) -> tuple[ir.DiagnosticError, str]:
    """The error from parsing or, when parsing succeeds, from verifying."""
    try:
        module = ir.parse(text, filename=filename)
    except ir.DiagnosticError as e:
        return e, "parse"
    try:
        ir.verify(module)
    except ir.DiagnosticError as e:
        return e, "verify"
    pytest.fail(f"{filename}: parsed and verified without an error")


def describe(error: ir.DiagnosticError) -> str:
    return "\n".join(
        f"  {d.location.line}:{d.location.column}: {d.message}" if d.location else f"  {d.message}"
        for d in error.diagnostics
    )


def printable(line: str) -> str:
    return "".join(c if c.isprintable() or c == "\t" else "?" for c in line)


def test_corpus_is_big_enough() -> None:
    assert len(FILES) >= 45
    several = [p for p in FILES if len(expectations(read(p))) >= 2]
    assert len(several) >= 5


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_malformed_program(path: Path) -> None:
    text = read(path)
    expected = expectations(text)
    assert expected, f"{path.name} has no '// ERROR: LINE:COL: message' header"
    error, phase = diagnose(text, path.name)
    found = describe(error)

    # Every expected error is reported where it is and says what it is.
    for exp in expected:
        at = [d for d in error.diagnostics
              if d.location is not None
              and (d.location.line, d.location.column) == (exp.line, exp.column)]
        assert at, f"{phase}: no diagnostic at {exp.line}:{exp.column}; got:\n{found}"
        assert any(exp.substring in d.message for d in at), (
            f"{phase}: no diagnostic at {exp.line}:{exp.column} says {exp.substring!r}; "
            f"got:\n{found}")

    # Nothing else: no cascade of follow-on errors, nothing missing (notes may follow the
    # errors: a plugin that failed to load might have defined an unknown instruction).
    count = len([d for d in error.diagnostics if d.severity != "note"])
    assert count == len(expected), (
        f"{phase}: expected {len(expected)} diagnostic(s):\n"
        + "\n".join(f"  {e}" for e in expected) + f"\ngot {count}:\n{found}")

    # Each renders as `FILE:LINE:COL: error: MESSAGE`, the source line, and a caret.
    source_lines = text.split("\n")
    rendered = error.render()
    for d in error.diagnostics:
        if d.severity == "note":
            continue
        assert d.location is not None
        line, column = d.location.line, d.location.column
        assert str(d) == f"{path.name}:{line}:{column}: error: {d.message}"
        lines = d.render().split("\n")
        assert len(lines) == 3, f"no source line and caret for {d}:\n{d.render()}"
        source = source_lines[line - 1].removesuffix("\r")
        assert lines[1] == printable(source), (
            f"{d} shows the wrong source line {lines[1]!r}, not {source!r}")
        caret = "".join("\t" if c == "\t" else " " for c in source[: column - 1]) + "^"
        assert lines[2] == caret
        assert d.render() in rendered
