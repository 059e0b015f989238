"""`dlvm.ir.load_module`: a file becomes a module through the front end named, or the one
its suffix calls for, or else DLVM's textual IR; a file of a front end that is missing
names the package to install."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dlvm.ir as ir
from dlvm.ir.frontends import frontend_for
from dlvm.ir.plugin import PluginInfo, Registry, hookimpl, make_registry, set_registry

TEXT = """\
func @f: (f32) -> f32 {
'entry(%x: f32):
    %y = add %x: f32, 1.0: f32
    return %y: f32
}
"""

UNVERIFIED = """\
func @f: (f32) -> f32 {
'entry(%x: f32):
    %y = equal %x: f32, %x: f32
    return %y: bool
}
"""


def from_text(path: str) -> ir.Module:
    """A front end that reads the file as IR text, marking the module as its own."""
    module = ir.parse_file(path)
    module.name = "read-by-plugin"
    return module


def failing(path: str) -> ir.Module:
    raise ValueError("the reader has a bug")


def rejecting(path: str) -> ir.Module:
    raise ir.FrontendError(f"{path}:1:1: error: not a model")


def not_a_module(path: str) -> Any:
    return [path]


class Readers:
    @hookimpl
    def register_frontends(self, register: Callable[..., None]) -> None:
        register("txt", from_text, "IR text under another name", suffixes=(".txt",))
        register("gz-text", from_text, "IR text, longer suffix", suffixes=(".dl.gz",))
        register("buggy", failing, "a reader with a bug", suffixes=(".bug",))
        register("strict", rejecting, "a reader that refuses its input", suffixes=(".no",))
        register("odd", not_a_module, "a reader that returns a list", suffixes=(".odd",))


class Broken:
    @hookimpl
    def register_frontends(self, register: Callable[..., None]) -> None:
        raise RuntimeError("no reader today")


@pytest.fixture
def reg() -> Iterator[Registry]:
    """A registry of dlvm-ir's built-ins and the readers above, process-wide for the test."""
    made = make_registry(autoload=False)
    made.add_plugin(Readers(), PluginInfo("readers", "dlvm-readers", "1.0"))
    set_registry(made)
    yield made
    set_registry(None)


def write(tmp_path: Path, name: str, text: str = TEXT) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.usefixtures("reg")
def test_a_dl_file_is_read_as_ir_text_and_verified(tmp_path: Path) -> None:
    module = ir.load_module(write(tmp_path, "m.dl"))
    assert module.function("f") is not None


@pytest.mark.usefixtures("reg")
def test_a_registered_suffix_chooses_its_front_end(tmp_path: Path) -> None:
    assert ir.load_module(str(write(tmp_path, "m.txt"))).name == "read-by-plugin"


@pytest.mark.usefixtures("reg")
def test_the_longest_matching_suffix_wins(tmp_path: Path, reg: Registry) -> None:
    entry = frontend_for(tmp_path / "m.dl.gz", reg)
    assert entry is not None and entry.name == "gz-text"
    assert frontend_for(tmp_path / ".txt", reg) is None  # a suffix is not a whole name


@pytest.mark.usefixtures("reg")
def test_a_front_end_named_is_used_whatever_the_suffix(tmp_path: Path) -> None:
    path = write(tmp_path, "m.dl")
    assert ir.load_module(path, "txt").name == "read-by-plugin"
    assert ir.load_module(path, "readers:txt").name == "read-by-plugin"


@pytest.mark.usefixtures("reg")
def test_an_unknown_suffix_is_read_as_ir_text(tmp_path: Path) -> None:
    assert ir.load_module(write(tmp_path, "m.ir")).function("f") is not None
    with pytest.raises(ir.DiagnosticError, match=r"m\.mlir:1:1: error: expected a decl"):
        ir.load_module(write(tmp_path, "m.mlir", "garbage("))


@pytest.mark.usefixtures("reg")
def test_verification_can_be_left_to_the_caller(tmp_path: Path) -> None:
    path = write(tmp_path, "m.dl", UNVERIFIED)
    assert ir.load_module(path, verify=False).function("f") is not None
    with pytest.raises(ir.DiagnosticError):
        ir.load_module(path)


@pytest.mark.usefixtures("reg")
@pytest.mark.parametrize(("suffix", "frontend", "package"), [
    (".tel", "tel", "dlvm-tel"), (".onnx", "onnx", "dlvm-onnx"), (".py", "nnkit", "dlvm-nnkit")])
def test_a_file_of_a_missing_dlvm_front_end_names_its_package(
        tmp_path: Path, suffix: str, frontend: str, package: str) -> None:
    path = write(tmp_path, f"model{suffix}", 'print("not IR text")\n')
    with pytest.raises(ir.RegistryError) as caught:
        ir.load_module(path)
    assert caught.value.message == (
        f"cannot read '{path}': {suffix} files are read by the front end '{frontend}', which "
        f"is not available (it is provided by {package}: pip install {package})")
    assert "unterminated" not in str(caught.value)


def test_a_missing_front_end_notes_the_plugins_that_failed(tmp_path: Path) -> None:
    made = make_registry(autoload=False)
    made.add_plugin(Broken(), PluginInfo("tel", "dlvm-tel", "1.0"))
    set_registry(made)
    try:
        with pytest.raises(ir.RegistryError) as caught:
            ir.load_module(write(tmp_path, "model.tel"))
    finally:
        set_registry(None)
    assert "dlvm-tel is installed, but its plugin failed to load" in caught.value.message
    assert caught.value.notes == ["plugin 'tel' (dlvm-tel) failed to load: RuntimeError: no "
                                  "reader today; see 'dlvm plugins'"]
    assert str(caught.value).endswith("\nnote: " + caught.value.notes[0])


def test_a_front_end_left_out_by_dlvm_disable_plugins_says_so(tmp_path: Path) -> None:
    made = make_registry(autoload=False)
    made.plugins.append(PluginInfo("tel", "dlvm-tel", "1.0", status="blocked"))
    set_registry(made)
    try:
        with pytest.raises(ir.RegistryError, match="dlvm-tel is installed, but "
                           "DLVM_DISABLE_PLUGINS leaves its plugin out"):
            ir.load_module(write(tmp_path, "model.tel"))
    finally:
        set_registry(None)


def test_ir_text_that_does_not_parse_notes_the_plugins_that_failed(tmp_path: Path) -> None:
    made = make_registry(autoload=False)
    made.add_plugin(Broken(), PluginInfo("chain", "dlvm-chain", "1.0"))
    set_registry(made)
    try:
        with pytest.raises(ir.DiagnosticError) as caught:
            ir.load_module(write(tmp_path, "steps.chain", "input 3 x f32\n"))
    finally:
        set_registry(None)
    last = caught.value.diagnostics[-1]
    assert (last.severity, last.location) == ("note", None)
    assert last.message.startswith("plugin 'chain' (dlvm-chain) failed to load")


@pytest.mark.usefixtures("reg")
def test_an_unknown_front_end_name_is_a_registry_error(tmp_path: Path) -> None:
    with pytest.raises(ir.RegistryError, match="unknown frontend 'text'"):
        ir.load_module(write(tmp_path, "m.dl"), "text")


@pytest.mark.usefixtures("reg")
def test_a_front_end_refusing_its_input_raises_a_frontend_error(tmp_path: Path) -> None:
    with pytest.raises(ir.FrontendError, match=r"m\.no:1:1: error: not a model"):
        ir.load_module(write(tmp_path, "m.no"))
    assert issubclass(ir.FrontendError, ir.DlvmError)


@pytest.mark.usefixtures("reg")
def test_a_third_party_front_end_that_crashes_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "m.bug")
    with pytest.raises(ir.RegistryError) as caught:
        ir.load_module(path)
    assert str(caught.value) == (f"front end 'buggy' of plugin 'readers' (dlvm-readers) failed "
                                 f"on '{path}': ValueError: the reader has a bug")
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.usefixtures("reg")
def test_a_front_end_must_return_a_module(tmp_path: Path) -> None:
    with pytest.raises(ir.RegistryError, match=r"'odd' of plugin 'readers' .* returned list, "
                       r"not a dlvm\.ir\.Module"):
        ir.load_module(write(tmp_path, "m.odd"))


@pytest.mark.usefixtures("reg")
def test_a_missing_ir_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ir.DiagnosticError,
                       match=r"cannot read module '.*absent\.dl': it does not exist"):
        ir.load_module(tmp_path / "absent.dl")


@pytest.mark.usefixtures("reg")
def test_every_front_end_gets_missing_files_and_folders_refused_alike(tmp_path: Path) -> None:
    (tmp_path / "folder.bug").mkdir()
    for name, why in (("absent.bug", "it does not exist"),
                      ("folder.bug", "it is a directory, not a file")):
        with pytest.raises(ir.DiagnosticError) as caught:
            ir.load_module(tmp_path / name)  # the buggy reader is never called
        [diagnostic] = caught.value.diagnostics
        assert diagnostic.message == f"cannot read module '{tmp_path / name}': {why}"


@pytest.mark.usefixtures("reg")
def test_the_ir_parser_reads_an_endless_device_only_up_to_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dlvm.ir.files as files

    monkeypatch.setattr(files, "MAX_TEXT_BYTES", 1 << 20)
    monkeypatch.setattr(files.read_input, "__kwdefaults__",
                        {**(files.read_input.__kwdefaults__ or {}), "limit": 1 << 20})
    with pytest.raises(ir.DiagnosticError, match=r"cannot read module '/dev/zero': it holds "
                       r"more than the 1 MiB limit for one module"):
        ir.load_module("/dev/zero")
