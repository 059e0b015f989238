"""Every failed lookup notes the plugins that failed to load (what they register is missing),
in the error's text for library users; strict mode raises a plugin's loading error; and a
pass is shown by the name it was registered under."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

import dlvm.ir as ir
from dlvm.ir.plugin import (
    PluginInfo,
    Registry,
    failed_plugin_notes,
    hookimpl,
    make_registry,
    set_registry,
)

NOTE = "plugin 'broken' (dlvm-broken) failed to load: RuntimeError: kaboom; see 'dlvm plugins'"

UNKNOWN_OPCODE = """\
func @f: (f32) -> f32 {
'entry(%x: f32):
    %y = frobnicate %x: f32
    return %y: f32
}
"""


class BrokenPlugin:
    @hookimpl
    def register_passes(self, register: Callable[..., None]) -> None:
        raise RuntimeError("kaboom")


class ExitingPlugin:
    @hookimpl
    def register_passes(self, register: Callable[..., None]) -> None:
        raise SystemExit(3)


@pytest.fixture
def broken() -> Iterator[Registry]:
    """The process-wide registry, with one plugin that failed to load."""
    reg = make_registry(autoload=False)
    reg.add_plugin(BrokenPlugin(), PluginInfo("broken", "dlvm-broken", "9.9"))
    set_registry(reg)
    yield reg
    set_registry(None)


# ---------------------------------------------------------------- notes


@pytest.mark.parametrize("kind", ["pass", "target", "frontend", "pipeline", "engine"])
def test_an_unknown_name_of_any_kind_notes_the_failed_plugins(broken: Registry,
                                                              kind: str) -> None:
    with pytest.raises(ir.RegistryError) as caught:
        broken.entry(kind, "mystery")
    assert caught.value.message.startswith(f"unknown {kind} 'mystery'")
    assert caught.value.notes == [NOTE]
    assert str(caught.value) == f"{caught.value.message}\nnote: {NOTE}"


def test_an_unknown_target_notes_them_in_library_use(broken: Registry) -> None:
    module = ir.parse(UNKNOWN_OPCODE.replace("frobnicate", "negate"))
    with pytest.raises(ir.RegistryError, match=re.escape(f"\nnote: {NOTE}")):
        ir.compile(module, target="mystery")


def test_an_unknown_pass_in_pipeline_text_notes_them(broken: Registry) -> None:
    with pytest.raises(ir.PipelineError) as caught:
        ir.build_pipeline("verify,mystery")
    assert caught.value.message.startswith("pipeline column 8: unknown pass 'mystery'")
    assert caught.value.notes == [NOTE]
    assert f"note: {NOTE}" in str(caught.value)


def test_an_unknown_instruction_in_text_is_followed_by_a_note(broken: Registry) -> None:
    with pytest.raises(ir.DiagnosticError) as caught:
        ir.parse(UNKNOWN_OPCODE, "f.dl")
    first, note = caught.value.diagnostics
    assert str(first) == "f.dl:3:10: error: unknown instruction 'frobnicate'"
    assert (note.severity, note.message, note.location) == ("note", NOTE, None)
    assert str(caught.value).endswith(f"\nnote: {NOTE}")


def test_the_builder_notes_them_for_an_unknown_instruction(broken: Registry) -> None:
    b = ir.Builder()
    with pytest.raises(ir.RegistryError) as caught:
        b.create("frobnicate")
    assert caught.value.notes == [NOTE]
    with pytest.raises(AttributeError,
                       match=re.escape(f"no instruction 'frobnicate'\nnote: {NOTE}")):
        b.frobnicate  # noqa: B018


def test_without_failed_plugins_there_is_no_note() -> None:
    reg = make_registry(autoload=False)
    with pytest.raises(ir.RegistryError) as caught:
        reg.entry("pass", "mystery")
    assert caught.value.notes == []
    assert "note:" not in str(caught.value)
    assert failed_plugin_notes(reg) == []


def test_the_notes_never_build_the_registry() -> None:
    set_registry(None)
    from dlvm.ir import plugin

    assert failed_plugin_notes() == []
    assert plugin._REGISTRY is None


# ---------------------------------------------------------------- strict mode


def test_strict_mode_raises_the_plugins_error_naming_the_plugin(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLVM_STRICT_PLUGINS", "1")
    with pytest.raises(RuntimeError, match="kaboom") as caught:
        make_registry(autoload=False).add_plugin(BrokenPlugin(),
                                                 PluginInfo("broken", "dlvm-broken", "9.9"))
    assert caught.value.__notes__ == [
        "raised while loading plugin 'broken' (dlvm-broken) (DLVM_STRICT_PLUGINS=1)"]


def test_strict_mode_turns_a_plugins_exit_into_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLVM_STRICT_PLUGINS", "1")
    with pytest.raises(ir.RegistryError, match=r"plugin 'exiting' \(dlvm-exiting\) failed to "
                       "load: SystemExit: 3") as caught:
        make_registry(autoload=False).add_plugin(ExitingPlugin(),
                                                 PluginInfo("exiting", "dlvm-exiting", "1.0"))
    assert isinstance(caught.value.__cause__, SystemExit)


# ---------------------------------------------------------------- the names passes are shown by


@dataclass
class ThirdPartyVerify(ir.Pass):
    """A plugin's `verify`, shadowed by dlvm-ir's own."""

    name = "verify"
    strict: bool = False

    def run(self, module: ir.Module, ctx: ir.PassContext) -> bool:
        ctx.stat("third-party verify ran")
        return False


@dataclass
class Unnamed(ir.Pass):
    """A pass whose class does not set `name`."""

    def run(self, module: ir.Module, ctx: ir.PassContext) -> bool:
        return False


class Tropical:
    @hookimpl
    def register_passes(self, register: Callable[..., None]) -> None:
        register("verify", ThirdPartyVerify, "shadowed by dlvm-ir's")
        register("tidy", Unnamed, "registered under a name its class lacks", aliases=("tidy-up",))


@pytest.fixture
def tropical() -> Registry:
    reg = make_registry(autoload=False)
    reg.add_plugin(Tropical(), PluginInfo("tropical", "dlvm-tropical", "1.0"))
    return reg


def test_a_shadowed_pass_is_shown_by_its_qualified_name(tropical: Registry) -> None:
    passes = ir.build_pipeline("verify,tropical:verify,ir:verify", tropical)
    assert [p.display_name for p in passes] == ["verify", "tropical:verify", "verify"]
    records = ir.PassManager(passes).run(ir.parse(UNKNOWN_OPCODE.replace("frobnicate",
                                                                         "negate")))
    assert [r.name for r in records] == ["verify", "tropical:verify", "verify"]
    assert records[1].stats == {"third-party verify ran": 1}


def test_options_follow_the_registered_name(tropical: Registry) -> None:
    (made,) = ir.build_pipeline("tropical:verify{strict=true}", tropical)
    assert made.describe() == "tropical:verify{strict=true}"


def test_a_pass_is_shown_by_its_registered_name_not_its_class_attribute(
        tropical: Registry) -> None:
    assert [p.describe() for p in ir.build_pipeline("tidy,tidy-up", tropical)] == [
        "tidy", "tidy"]


def test_a_pass_made_directly_is_shown_by_its_class_name() -> None:
    assert ThirdPartyVerify().display_name == "verify"
