"""The lit suite in integration-tests/lit, one pytest test per test file.

lit runs once per session (in parallel, as it likes) and writes an xunit file; each test
below looks up its own ``<testcase>`` there. So pytest's summary counts the lit tests, and a
failing test shows filecheck's message.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent / "lit"
NOT_TESTS = {"Inputs", "Output"}  # lit skips these folders too
# `python -m lit` does not work: the lit distribution has no lit/__main__.py.
LIT = [sys.executable, "-c", "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()"]


# the test files by suffix, as lit.cfg.py and the folders' lit.local.cfg set them
SUFFIXES = {".dl", ".tel", ".py"}


def lit_tests() -> list[str]:
    """Suite-relative paths of every test (`.dl`; `.tel` and `.py` in the folders that take
    them), outside ``Inputs`` folders; lit's own `lit.cfg.py` is none."""
    paths = (p.relative_to(SUITE) for p in SUITE.rglob("*")
             if p.suffix in SUFFIXES and not p.name.startswith("lit."))
    return sorted(p.as_posix() for p in paths if not NOT_TESTS.intersection(p.parts[:-1]))


def key(path: str) -> str:
    """A suite-relative path as lit spells it in xunit files: dots in folders become ``_``."""
    folders, _, name = path.rpartition("/")
    return f"{folders.replace('.', '_')}/{name}" if folders else name


def case_key(case: ET.Element) -> str:
    """The path key of a ``<testcase>``.

    lit (18 to 23 at least) writes ``classname="<suite>.<folders>"`` with the folders joined
    by ``/`` (``"<suite>.<suite>"`` for a file at the top of the suite; the suite name has no
    dots) and ``name="<file name>"``. A name that is already a path is taken as it is.
    """
    suite, _, folders = case.get("classname", "").partition(".")
    name = case.get("name", "")
    if "/" in name:
        return key(name)
    return name if folders in ("", suite) else f"{folders}/{name}"


@dataclass
class LitRun:
    """The results of one lit run, by path key, and lit's own output."""

    cases: dict[str, ET.Element]
    log: str

    def find(self, path: str) -> ET.Element | None:
        """The ``<testcase>`` for ``path``: the exact key, else the longest key ending it.

        The second rule covers folders that lit treats as suites of their own (a nested
        lit.cfg.py), whose tests are named relative to that folder.
        """
        wanted = key(path)
        if wanted in self.cases:
            return self.cases[wanted]
        ends = [k for k in self.cases if wanted.endswith("/" + k)]
        return self.cases[max(ends, key=len)] if ends else None


@pytest.fixture(scope="session")
def lit_run(tmp_path_factory: pytest.TempPathFactory) -> LitRun:
    """Run the whole suite once; lit's non-zero exit on failures is read from the xml."""
    out = tmp_path_factory.mktemp("lit")
    xml = out / "results.xml"
    command = [*LIT, "-q", "--xunit-xml-output", str(xml), "-D", f"output={out / 'Output'}",
               str(SUITE)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    log = f"$ {' '.join(command)}\nexit status {proc.returncode}\n{proc.stdout}{proc.stderr}"
    cases: dict[str, ET.Element] = {}
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            cases.setdefault(case_key(case), case)
    return LitRun(cases, log)


LIT_TESTS = lit_tests()


@pytest.mark.parametrize("path", LIT_TESTS, ids=LIT_TESTS)
def test_lit(path: str, lit_run: LitRun) -> None:
    case = lit_run.find(path)
    if case is None:
        pytest.fail(f"lit reported no result for {path}\n{lit_run.log}", pytrace=False)
    for tag in ("failure", "error"):
        failed = case.find(tag)
        if failed is not None:
            pytest.fail(failed.text or failed.get("message") or f"lit: {tag}", pytrace=False)
    skipped = case.find("skipped")
    if skipped is not None:
        pytest.skip(skipped.get("message") or "skipped by lit")
