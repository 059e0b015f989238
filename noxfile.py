"""Developer sessions for the DLVM monorepo (``nox --list`` shows them).

One session per package (``nox -s ir``, ``nox -s cli``, …) installs only that package and
the ``dlvm-*`` packages it depends on, so a missing dependency shows up. ``integration``,
``tests`` (the default), ``lint``, ``demo`` and ``wheels`` work on the whole repository.
The test sessions run pytest on every core this process may use (pytest-xdist).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).resolve().parent
PACKAGES_DIR = ROOT / "packages"
# Third-party plugins as a user would install them: the complete example, and a fixture
# whose import fails.
FIXTURE_PLUGINS = ["examples/plugin",
                   "integration-tests/fixtures/dlvm-broken-plugin"]
# pytest below 9.2: its structured node ids silently turn off pytest-xdist's `loadgroup`
# (xdist 3.8 marks a group by rewriting the node id), and then the lit suite and the Ray
# tests would run once per worker.
TEST_DEPS = ["pytest>=8,<9.2", "pytest-xdist>=3.5", "hypothesis>=6.100", "lit>=18",
             "filecheck>=1.0.6", "psutil>=5",
             "ruff>=0.6", "mypy>=1.10,<2",  # ruff and mypy check the code TEL generates
             "onnxruntime>=1.17,<2"]  # the reference the ONNX importer is tested against


# The spec tests (the modules that use conftest.py's `spec_target` fixture) also run in the
# session of a package that provides a target they check, on that target alone.
SPEC_TARGET_OF = {"dlvm-llvm": "llvm-cpu", "dlvm-llvm-gpu": "nvptx{device=host}"}


def packages() -> list[str]:
    """Folder names under packages/ that hold a pyproject.toml, e.g. ``dlvm-ir``."""
    return sorted(p.parent.name for p in PACKAGES_DIR.glob("*/pyproject.toml"))


def local_deps(package: str) -> list[str]:
    """The ``dlvm-*`` dependencies of ``package`` that are folders under packages/, those
    of its ``test`` extra included (what its own tests need, e.g. dlvm-opt's tests run
    dlvm-ad's output through the optimizer)."""
    with open(PACKAGES_DIR / package / "pyproject.toml", "rb") as f:
        project = tomllib.load(f).get("project", {})
    requirements = [*project.get("dependencies", []),
                    *project.get("optional-dependencies", {}).get("test", [])]
    names = []
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
        name = re.sub(r"[._-]+", "-", match.group(0)).lower() if match else ""
        if name.startswith("dlvm-") and (PACKAGES_DIR / name / "pyproject.toml").exists():
            names.append(name)
    return names


def closure(package: str) -> list[str]:
    """``package`` and, transitively, every local package it depends on."""
    seen: list[str] = []
    todo = [package]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.append(name)
            todo.extend(local_deps(name))
    return sorted(seen)


def editable(paths: list[str]) -> list[str]:
    """``-e PATH`` arguments for ``session.install``."""
    return [arg for path in paths for arg in ("-e", path)]


def everything() -> list[str]:
    """All packages, plus the fixture plugins used by the integration tests."""
    paths = [f"packages/{name}" for name in packages()]
    paths += [p for p in FIXTURE_PLUGINS if (ROOT / p / "pyproject.toml").exists()]
    return paths


def parallel() -> list[str]:
    """pytest-xdist arguments: one worker per core this process may use; tests marked with
    an `xdist_group` (conftest.py) stay on one worker. `-n 0` after `--` runs in one process."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return ["-n", str(cores or 1), "--dist", "loadgroup"]


def spec_test_files() -> list[str]:
    """The test modules that run once per installed target (see conftest.py)."""
    return sorted(path.relative_to(ROOT).as_posix()
                  for path in ROOT.glob("packages/*/tests/test_*.py")
                  if 'usefixtures("spec_target")' in path.read_text(encoding="utf-8"))


def has_tests(folder: Path) -> bool:
    """Whether ``folder`` holds any pytest test modules."""
    return any(folder.rglob("test_*.py")) or any(folder.rglob("*_test.py"))


def package_session(package: str) -> None:
    """Register the session ``nox -s <package without dlvm->`` for one package."""
    tests = f"packages/{package}/tests"
    runnable = has_tests(ROOT / tests)

    def run(session: nox.Session) -> None:
        if not runnable:
            session.skip(f"{tests} holds no tests")
        # the package with its own `test` extra, so a test dependency it forgot shows up
        deps = [f"packages/{name}" + ("[test]" if name == package else "")
                for name in closure(package)]
        session.install(*editable(deps), *TEST_DEPS)
        target = SPEC_TARGET_OF.get(package)
        if target is None:
            session.run("pytest", *parallel(), tests, *session.posargs)
        else:
            session.run("pytest", *parallel(), tests, *spec_test_files(), *session.posargs,
                        env={"DLVM_TEST_TARGET": target})

    run.__doc__ = f"Test {package} with only its own dlvm-* dependencies installed."
    if package in SPEC_TARGET_OF:
        run.__doc__ += f" The spec tests run on {SPEC_TARGET_OF[package]} too."
    # Without tests there is nothing to install: skip before any venv is made.
    nox.session(run, name=package.removeprefix("dlvm-"), venv_backend=None if runnable else "none")


for _package in packages():
    package_session(_package)


@nox.session
def integration(session: nox.Session) -> None:
    """Cross-package tests: every package installed, run integration-tests/."""
    session.install(*editable(everything()), *TEST_DEPS)
    session.run("pytest", *parallel(), "integration-tests", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Every test (package unit tests, lit suites, integration tests) in one venv."""
    session.install(*editable(everything()), *TEST_DEPS)
    session.run("pytest", "-p", "no:cacheprovider", *parallel(), "packages", "integration-tests",
                *session.posargs)


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every package's wheel into dist/, for `pip install --find-links dist dlvm-nnkit`
    (pip then finds the sibling dlvm-* packages there, not on an index)."""
    session.install("uv")
    dist = ROOT / "dist"
    for old in dist.glob("dlvm_*.whl"):  # an earlier version would satisfy pip as well
        old.unlink()
    for name in packages():
        session.run("uv", "build", "--quiet", "--wheel", "--out-dir", str(dist),
                    f"packages/{name}")
    session.log(f"{len(list(dist.glob('dlvm_*.whl')))} wheels in {dist}")


@nox.session
def lint(session: nox.Session) -> None:
    """Run ruff over the repository."""
    session.install("ruff")
    session.run("ruff", "check", ".", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Run a benchmark (`nox -s bench -- llvm_cpu`) with DLVM and the peers it compares to."""
    if not session.posargs:
        session.error("name a benchmark: nox -s bench -- llvm_cpu (see benchmarks/README.md)")
    name, *rest = session.posargs
    session.install(*editable([f"packages/{p}" for p in packages()]), "pip")
    # PyTorch through pip and pinned: it resolves to the small CPU build on these machines
    session.run("python", "-m", "pip", "install", "-q", "torch==2.13.0", "jax[cpu]",
                "onnxruntime", "onnx", success_codes=[0, 1])
    session.run("python", f"benchmarks/{name.removesuffix('.py')}.py", *rest)


@nox.session
def demo(session: nox.Session) -> None:
    """Install DLVM and run the bundled example."""
    session.install(*editable([f"packages/{name}" for name in packages()]))
    pipeline = "examples/digits-mlp/pipeline.toml"
    if (ROOT / pipeline).exists():
        session.run("dlvm", "run", pipeline, *session.posargs)
    else:
        session.run("dlvm", "exec", "examples/website-demo/website-demo.dl", "-f", "f",
                    "--args", "examples/website-demo/inputs.npz", *session.posargs)
