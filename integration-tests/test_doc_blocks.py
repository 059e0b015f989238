"""Every code block of the repository's Markdown files that is meant to be run runs as written:
```python blocks of a file in order in one namespace, ```sh blocks in bash, from the root of a
scratch copy of the repository (so the checkout never changes). One test per Markdown file,
found by glob; a file with blocks marked `<!-- doc-test: gpu -->` has a second test, marked
`gpu`, that runs them too. Commands to type belong in ```sh blocks, not in listings.

The first tests pin down the harness itself (doc_blocks.py) on Markdown written here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TIMEOUT = 300  # seconds for one file's blocks; the slowest README trains for a few seconds


def load_harness() -> ModuleType:
    """doc_blocks.py, beside this file (the tests folder is no package)."""
    spec = importlib.util.spec_from_file_location("doc_blocks", HERE / "doc_blocks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


doc_blocks = load_harness()


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, "doc.md", text)
    return [str(p) for p in doc_blocks.read_document(path, tmp_path).problems]


def run_doc(tmp_path: Path, text: str, gpu: bool = False) -> tuple[int, str]:
    """Run `text` as the repository's only Markdown file, in a copy; (status, output)."""
    repository = tmp_path / "repository"
    write(repository, "doc.md", text)
    done = doc_blocks.run_in_copy(repository, "doc.md", tmp_path / "scratch", gpu=gpu,
                                  timeout=60)
    return done.returncode, done.stdout


# ------------------------------------------------------------------------- the harness


def test_python_blocks_of_a_file_run_in_order_in_one_namespace(tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """# doc
```python
x = 20
```
Some text.
```python
print("x is", x + 1)
```
""")
    assert status == 0, output
    assert "x is 21" in output
    assert "doc.md:2: ran the python block" in output
    assert "doc.md:6: ran the python block" in output


def test_a_failing_python_block_is_reported_at_its_line_in_the_markdown(
        tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """# doc

```python
a = 1
b = undefined_name
```
""")
    assert status == 1
    assert 'File "doc.md", line 5' in output  # the traceback counts the Markdown's lines
    assert "doc.md:3: error: the python block raised NameError" in output
    assert "doc_blocks.py" not in output  # the runner's own frames are left out


def test_a_failing_sh_command_stops_its_block_and_names_its_line(tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """# doc
```sh
echo first
false
echo never
```
""")
    assert status == 1
    assert "first" in output and "never" not in output
    assert "doc.md:4: error: the command exited with status 1" in output
    assert "doc.md:2: error: the sh block failed" in output


def test_sh_blocks_run_from_the_repository_root_with_the_tests_python_first(
        tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """```sh
ls doc.md
python -c "import sys; print(sys.prefix)"
```
""")
    assert status == 0, output
    assert sys.prefix in output


def test_only_python_and_sh_blocks_run(tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """```text
this is not run
```
```toml
key = "not run"
```
```dlvm
module "not run"
```
```python
print("ran")
```
""")
    assert status == 0, output
    assert output.count("ran the") == 1 and "ran the python block" in output


def test_a_skipped_block_is_not_run(tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """<!-- doc-test: skip — it would fail here -->
```sh
false
```
""")
    assert status == 0, output
    assert "ran the" not in output


def test_gpu_blocks_run_only_when_a_gpu_run_asks_for_them(tmp_path: Path) -> None:
    text = """```python
on = ["cpu"]
```
<!-- doc-test: gpu -->
```python
on.append("gpu")
```
```python
print(on)
```
"""
    status, output = run_doc(tmp_path, text)
    assert status == 0 and "['cpu']" in output, output
    status, output = run_doc(tmp_path / "gpu", text, gpu=True)
    assert status == 0 and "['cpu', 'gpu']" in output, output


def test_blocks_run_in_a_copy_and_the_checkout_stays_as_it_was(tmp_path: Path) -> None:
    repository = tmp_path / "repository"
    write(repository, "examples/demo/input.txt", "data\n")
    write(repository, "examples/demo/out/stale.txt", "an earlier run's output\n")
    write(repository, ".nox/tests/marker", "an environment\n")
    write(repository, "doc.md", """```sh
ls examples/demo/input.txt
test ! -e examples/demo/out && test ! -e .nox
mkdir -p examples/demo/out && echo new > examples/demo/out/result.txt
```
""")
    before = sorted(p.relative_to(repository) for p in repository.rglob("*"))
    done = doc_blocks.run_in_copy(repository, "doc.md", tmp_path / "scratch", timeout=60)
    assert done.returncode == 0, done.stdout
    assert sorted(p.relative_to(repository) for p in repository.rglob("*")) == before
    assert (tmp_path / "scratch" / "examples/demo/out/result.txt").read_text() == "new\n"


def test_blocks_in_list_items_lose_the_item_indentation(tmp_path: Path) -> None:
    status, output = run_doc(tmp_path, """- an item:
  ```python
  if True:
      print("indented once")
  ```
""")
    assert status == 0, output
    assert "indented once" in output


def test_a_skip_needs_a_reason(tmp_path: Path) -> None:
    assert problems_of(tmp_path, "<!-- doc-test: skip -->\n```sh\nfalse\n```\n") == [
        "doc.md:1: error: 'doc-test: skip' needs a reason: "
        "<!-- doc-test: skip — REASON -->"]


def test_an_unknown_directive_is_a_problem(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, "<!-- doc-test: skp — typo -->\n```sh\ntrue\n```\n")
    assert problem.startswith("doc.md:1: error: unknown doc-test directive 'skp'")


def test_a_directive_must_stand_before_a_block_that_is_run(tmp_path: Path) -> None:
    assert problems_of(tmp_path, "<!-- doc-test: gpu -->\n```text\noutput\n```\n") == [
        "doc.md:1: error: a doc-test directive before a ```text block, which is not run"]
    assert problems_of(tmp_path, "<!-- doc-test: gpu -->\nA paragraph.\n") == [
        "doc.md:1: error: a doc-test directive that no code block follows"]


def test_commands_in_a_text_block_should_be_an_sh_block(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, """```text
dlvm run pipeline.toml         # a command
epoch 1/3  loss 0.5            # its output: fine in a listing
python train.py
```
```
pip install dlvm-ir
```
""")
    assert [p.split(": error: ")[0] for p in problems] == ["doc.md:2", "doc.md:4", "doc.md:7"]
    assert all("make it a ```sh block" in p for p in problems)


def test_commands_in_an_indented_code_block_should_be_an_sh_block(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, "Run it:\n\n    dlvm verify model.dl\n")
    assert problem.startswith("doc.md:3: error: a command in an indented code block")


@pytest.mark.parametrize("tag", ["bash", "shell", "console", "py", "python3"])
def test_runnable_languages_use_the_conventions_tags(tmp_path: Path, tag: str) -> None:
    (problem,) = problems_of(tmp_path, f"```{tag}\necho hi\n```\n")
    assert f"instead of ```{tag}, so that the block is run" in problem


@pytest.mark.parametrize("command", ["pip install -e examples/plugin",
                                     "python3 -m pip install -q nox uv && nox -s demo",
                                     "uv pip install dlvm-ir", "  nox -s tests",
                                     "cd examples/plugin; pip install ."])
def test_an_sh_block_that_installs_must_be_skipped(tmp_path: Path, command: str) -> None:
    (problem,) = problems_of(tmp_path, f"```sh\n{command}\n```\n")
    assert "mark it <!-- doc-test: skip — REASON -->" in problem
    assert problems_of(tmp_path, f"<!-- doc-test: skip — installs -->\n```sh\n{command}\n```\n"
                       ) == []


def test_markdown_files_are_found_everywhere_but_in_environments_and_outputs(
        tmp_path: Path) -> None:
    for name in ["README.md", "docs/a.md", "packages/p/README.md", "examples/e/README.md",
                 ".nox/tests/lib/site-packages/x/README.md", "build/README.md",
                 "examples/e/out/README.md", "packages/p/src/p.egg-info/README.md"]:
        write(tmp_path, name, "# x\n")
    found = [p.relative_to(tmp_path).as_posix() for p in doc_blocks.markdown_files(tmp_path)]
    assert found == ["README.md", "docs/a.md", "examples/e/README.md", "packages/p/README.md"]


# ------------------------------------------------------------------------- the repository


def cases() -> list[object]:
    params: list[object] = []
    for path in doc_blocks.markdown_files(ROOT):
        name = path.relative_to(ROOT).as_posix()
        params.append(pytest.param(name, False, id=name))
        if doc_blocks.read_document(path, ROOT).has_gpu_blocks:
            params.append(pytest.param(name, True, id=f"{name} on a GPU",
                                       marks=pytest.mark.gpu))
    return params


@pytest.mark.parametrize(("document", "gpu"), cases())
def test_every_block_runs_as_written(document: str, gpu: bool, tmp_path: Path) -> None:
    parsed = doc_blocks.read_document(ROOT / document, ROOT)
    assert not parsed.problems, "\n".join(map(str, parsed.problems))
    if not parsed.to_run(gpu):
        return  # nothing to run: the checks above are the test
    done = doc_blocks.run_in_copy(ROOT, document, tmp_path / "repository", gpu=gpu,
                                  timeout=TIMEOUT)
    if done.returncode != 0:
        lines = done.stdout.splitlines()
        shown = "\n".join(lines[-120:])  # the failing block's output and its location
        pytest.fail(f"{document}: a block failed (the last lines of its output):\n{shown}",
                    pytrace=False)
