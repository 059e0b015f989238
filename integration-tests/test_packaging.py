"""Every distribution under packages/ ships the same metadata: the license, `py.typed`,
project URLs, a `test` extra, and a README whose links work on a package index page; and
docs/plugins.md covers every hook and links to files that exist."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "https://github.com/dlvm-py/dlvm"
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Code is not prose: `exe["f"](x)` in a code span or block is a call, not a link.
CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.MULTILINE | re.DOTALL)


def links(text: str) -> list[str]:
    """The targets of the Markdown links of `text`, outside code spans and blocks."""
    return LINK.findall(CODE.sub("", text))


def project(package: Path) -> dict:
    with open(package / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_license_ships_in_every_wheel(package: Path) -> None:
    meta = project(package)
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE"]
    assert (package / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_every_package_is_typed(package: Path) -> None:
    name = package.name.removeprefix("dlvm-").replace("-", "_")
    assert (package / "src" / "dlvm" / name / "py.typed").is_file()
    assert not (package / "src" / "dlvm" / "__init__.py").exists()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_metadata_names_the_repository_and_one_test_extra(package: Path) -> None:
    meta = project(package)
    assert meta["urls"]["Homepage"] == REPOSITORY
    assert all(url.startswith(REPOSITORY) for url in meta["urls"].values())
    extras = list(meta.get("optional-dependencies", {}))
    # the tests' extra is `test` everywhere; other extras are features (NVIDIA's libraries)
    assert "test" in extras and not [e for e in extras if "test" in e and e != "test"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_readme_links_are_absolute(package: Path) -> None:
    found = links((package / "README.md").read_text(encoding="utf-8"))
    relative = [link for link in found if not link.startswith("https://")]
    assert not relative, f"{package.name}/README.md: links a package index cannot follow"


def test_every_dependency_has_an_upper_bound() -> None:
    for package in PACKAGES:
        for requirement in project(package)["dependencies"]:
            assert "<" in requirement, f"{package.name}: {requirement}"


def test_the_plugin_guide_covers_every_hook_and_links_to_existing_files() -> None:
    from dlvm.cli.hookspecs import CliHooks
    from dlvm.ir import plugin

    guide = ROOT / "docs" / "plugins.md"
    text = guide.read_text(encoding="utf-8")
    hooks = [n for cls in (plugin.Hooks, CliHooks) for n in vars(cls) if n.startswith("register_")]
    assert len(hooks) == 7
    for name in [*hooks, "RegisterPass", "RegisterTarget", "RegisterFrontend",
                 "RegisterPipeline", "RegisterEngine", "dlvm.plugins", "define", "AdjointContext", "Executable"]:
        assert name in text, name
    for link in links(text):
        if not link.startswith(("https://", "#")):
            assert (guide.parent / link).exists(), link
