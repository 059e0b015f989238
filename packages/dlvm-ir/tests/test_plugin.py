"""The plugin registry: discovery, isolation of broken plugins, duplicates, hints."""

from dataclasses import dataclass

import pytest

import dlvm.ir as ir
from dlvm.ir.plugin import PluginInfo, Registry, hookimpl


@dataclass
class EchoTarget(ir.Target):
    name = "echo"
    factor: int = 1

    def compile(self, module: ir.Module) -> ir.Executable:
        raise ir.DlvmError("echo compiles nothing")


class GoodPlugin:
    @hookimpl
    def register_targets(self, register):
        register("echo", EchoTarget, "an echo", priority=5)
        register("lazy", "dlvm_no_such_module:Target", "never imported unless used")


class DuplicatePlugin:
    @hookimpl
    def register_targets(self, register):
        register("interp", EchoTarget, "clashes with dlvm-ir")


class CrashingPlugin:
    @hookimpl
    def register_passes(self, register):
        raise RuntimeError("boom")


def fresh() -> Registry:
    return ir.make_registry(autoload=False)


def test_dlvm_ir_registers_interp_and_its_own_passes() -> None:
    reg = fresh()
    assert "interp" in reg.names("target")
    assert {"verify", "strip-names"} <= set(reg.names("pass"))
    assert "dl" in reg.names("frontend")
    assert reg.entry("target", "interp").plugin.distribution == "dlvm-ir"


def test_entry_point_discovery_includes_dlvm_ir_once() -> None:
    reg = ir.make_registry()
    owners = [p for p in reg.plugins if p.distribution == "dlvm-ir"]
    assert len(owners) == 1 and owners[0].status == "ok"


def test_default_target_is_the_highest_priority_one() -> None:
    reg = fresh()
    assert reg.default_target() == "interp"
    reg.add_plugin(GoodPlugin(), PluginInfo("good", "dlvm-good", "1.0"))
    assert reg.default_target() == "echo"
    assert reg.make_target("echo", factor=3).factor == 3
    with pytest.raises(ir.RegistryError, match="bad options for target 'echo'"):
        reg.make_target("echo", nope=1)


def test_factories_are_lazy_and_a_failing_import_is_a_clear_error() -> None:
    reg = fresh()
    reg.add_plugin(GoodPlugin(), PluginInfo("good", "dlvm-good", "1.0"))
    with pytest.raises(ir.RegistryError, match="target 'lazy' from dlvm-good failed to load"):
        reg.make_target("lazy")


def test_a_duplicate_name_is_an_error_naming_both_distributions() -> None:
    reg = fresh()
    reg.add_plugin(DuplicatePlugin(), PluginInfo("dup", "dlvm-dup", "0.1"))
    info = reg.plugins[-1]
    assert info.status == "failed"
    assert "target 'interp' is provided by both dlvm-ir and dlvm-dup" in info.error
    assert reg.entry("target", "interp").plugin.distribution == "dlvm-ir"


def test_a_crashing_plugin_is_reported_and_the_rest_keep_working() -> None:
    reg = fresh()
    reg.add_plugin(CrashingPlugin(), PluginInfo("crash", "dlvm-crash", "0.1"))
    reg.add_plugin(GoodPlugin(), PluginInfo("good", "dlvm-good", "1.0"))
    crash = next(p for p in reg.plugins if p.name == "crash")
    assert crash.status == "failed" and "RuntimeError: boom" in crash.error
    assert "echo" in reg.names("target")


def test_strict_mode_reraises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLVM_STRICT_PLUGINS", "1")
    with pytest.raises(RuntimeError, match="boom"):
        fresh().add_plugin(CrashingPlugin(), PluginInfo("crash", "dlvm-crash", "0.1"))


def test_unknown_names_suggest_close_ones_or_the_providing_package() -> None:
    reg = fresh()
    with pytest.raises(ir.RegistryError, match="did you mean 'interp'"):
        reg.entry("target", "intrp")
    with pytest.raises(ir.RegistryError, match="pip install dlvm-llvm-gpu"):
        reg.entry("target", "nvptx")


def test_compile_without_dlvm_ad_names_the_missing_package() -> None:
    text = """
func @f: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
[gradient @f]
func @df: (f32) -> (f32)
"""
    module = ir.parse(text)
    ir.verify(module)
    reg = fresh()
    if reg.has("pass", "differentiation"):
        pytest.skip("dlvm-ad is installed")
    ir.plugin.set_registry(reg)
    try:
        with pytest.raises(ir.DlvmError, match="'differentiation' pass from dlvm-ad"):
            ir.compile(module)
    finally:
        ir.plugin.set_registry(None)
