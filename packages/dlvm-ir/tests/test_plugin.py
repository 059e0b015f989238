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
    with pytest.raises(ir.RegistryError, match="target 'lazy' of plugin 'good' "
                       r"\(dlvm-good\) failed to load: ModuleNotFoundError"):
        reg.make_target("lazy")


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


# ---------------------------------------------------------------- name clashes


@dataclass
class OtherVerify(ir.Pass):
    """A third-party pass that reuses dlvm-ir's name `verify`."""

    name = "verify"

    def run(self, module: ir.Module, ctx: ir.PassContext) -> bool:
        ctx.stat("other verify ran")
        return False


def registers_verify(summary: str) -> object:
    class Plugin:
        @hookimpl
        def register_passes(self, register):
            register("verify", OtherVerify, summary)

    return Plugin()


def add_builtins(reg: Registry) -> None:
    from dlvm.ir import builtin_plugin

    reg.add_plugin(builtin_plugin, PluginInfo("ir", "dlvm-ir", "0.1"))


def test_a_clash_unloads_neither_plugin_and_first_party_keeps_the_name() -> None:
    reg = Registry()
    reg.add_plugin(registers_verify("third party"), PluginInfo("myplugin", "aaa-mine", "1.0"))
    add_builtins(reg)  # loaded later, still keeps the plain name
    assert [p.status for p in reg.plugins] == ["ok", "ok"]
    assert reg.entry("pass", "verify").plugin.distribution == "dlvm-ir"
    assert reg.entry("pass", "myplugin:verify").summary == "third party"
    assert reg.entry("pass", "ir:verify").plugin.distribution == "dlvm-ir"
    [clash] = reg.clashes
    assert str(clash) == ("pass 'verify' is provided by both dlvm-ir and aaa-mine: 'verify' is "
                          "dlvm-ir's, aaa-mine's is 'myplugin:verify'")


def test_between_third_party_plugins_the_first_loaded_keeps_the_name() -> None:
    reg = fresh()
    reg.add_plugin(registers_verify("first"), PluginInfo("one", "dlvm-one", "1.0"))
    reg.add_plugin(registers_verify("second"), PluginInfo("two", "dlvm-two", "1.0"))
    assert reg.entry("pass", "verify").plugin.distribution == "dlvm-ir"
    assert reg.entry("pass", "one:verify").summary == "first"
    assert reg.entry("pass", "two:verify").summary == "second"
    reg = Registry()
    reg.add_plugin(registers_verify("first"), PluginInfo("one", "dlvm-one", "1.0"))
    reg.add_plugin(registers_verify("second"), PluginInfo("two", "dlvm-two", "1.0"))
    assert reg.entry("pass", "verify").summary == "first"
    assert "dlvm-one's, dlvm-two's is 'two:verify'" in str(reg.clashes[0])


def test_pipeline_text_reaches_a_shadowed_pass_by_its_qualified_name() -> None:
    reg = fresh()
    reg.add_plugin(registers_verify("mine"), PluginInfo("myplugin", "aaa-mine", "1.0"))
    [plain, qualified] = ir.build_pipeline("verify, myplugin:verify", reg)
    assert type(plain).__module__ == "dlvm.ir.builtin_passes"
    assert isinstance(qualified, OtherVerify)
    with pytest.raises(ir.PipelineError, match="unknown pass 'nobody:verify'"):
        ir.build_pipeline("nobody:verify", reg)


def test_every_name_is_reachable_qualified() -> None:
    reg = fresh()
    reg.add_plugin(GoodPlugin(), PluginInfo("good", "dlvm-good", "1.0"))
    assert reg.qualified_names("target") == ["good:echo", "good:lazy", "ir:interp"]
    assert reg.make_target("good:echo", factor=2).factor == 2


# ---------------------------------------------------------------- targets that cannot be made


@dataclass
class NoDevice(ir.Target):
    name = "fast"

    def __post_init__(self) -> None:
        raise RuntimeError("no device")

    def compile(self, module: ir.Module) -> ir.Executable:
        raise AssertionError("never compiled")


class FastButBroken:
    @hookimpl
    def register_targets(self, register):
        register("fast", NoDevice, "needs a device it does not find", priority=100)
        register("faster", "dlvm_no_such_module:Target", "cannot be imported", priority=200)


def test_the_default_target_skips_targets_that_cannot_be_made_warning_once() -> None:
    import warnings

    from dlvm.ir.interp import InterpTarget
    from dlvm.ir.plugin import PluginWarning

    reg = fresh()
    reg.add_plugin(FastButBroken(), PluginInfo("fastplug", "dlvm-fast", "1.0"))
    with pytest.warns(PluginWarning) as record:
        assert reg.default_target() == "interp"
    assert [str(w.message) for w in record] == [
        "target 'faster' of plugin 'fastplug' (dlvm-fast) failed to load: ModuleNotFoundError: "
        "No module named 'dlvm_no_such_module'; it is not used as the default target",
        "target 'fast' of plugin 'fastplug' (dlvm-fast) could not be created: RuntimeError: no "
        "device; it is not used as the default target"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(reg.make_target(), InterpTarget)
    with pytest.raises(ir.RegistryError, match=r"target 'fast' of plugin 'fastplug' "
                       r"\(dlvm-fast\) could not be created: RuntimeError: no device"):
        reg.make_target("fast")


def test_compile_uses_the_default_that_can_be_made() -> None:
    import numpy as np

    reg = fresh()
    reg.add_plugin(FastButBroken(), PluginInfo("fastplug", "dlvm-fast", "1.0"))
    module = ir.parse("""
func @f: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
""")
    ir.plugin.set_registry(reg)
    try:
        with pytest.warns(ir.plugin.PluginWarning):
            exe = ir.compile(module)
    finally:
        ir.plugin.set_registry(None)
    assert exe.call("f", np.float32(2.0))[0] == 2.0


class ExitingTarget(ir.Target):
    def __init__(self) -> None:
        raise SystemExit("constructor exits")

    def compile(self, module: ir.Module) -> ir.Executable:
        raise AssertionError("never compiled")


def test_an_exit_in_a_constructor_is_an_error_naming_the_plugin() -> None:
    class Plugin:
        @hookimpl
        def register_targets(self, register):
            register("exits", ExitingTarget, "exits when made")

    reg = fresh()
    reg.add_plugin(Plugin(), PluginInfo("exiter", "dlvm-exiter", "1.0"))
    with pytest.raises(ir.RegistryError, match=r"target 'exits' of plugin 'exiter' "
                       r"\(dlvm-exiter\) could not be created: SystemExit: constructor exits"):
        reg.make_target("exits")


# ---------------------------------------------------------------- the register callbacks


def test_register_refuses_unknown_options_and_bad_names() -> None:
    class Misspelled:
        @hookimpl
        def register_targets(self, register):
            register("echo", EchoTarget, "", priorty=5)

    class Qualified:
        @hookimpl
        def register_passes(self, register):
            register("mine:cse", OtherVerify, "")

    reg = fresh()
    reg.add_plugin(Misspelled(), PluginInfo("typo", "dlvm-typo", "1.0"))
    reg.add_plugin(Qualified(), PluginInfo("colon", "dlvm-colon", "1.0"))
    typo, colon = reg.plugins[-2:]
    assert typo.status == colon.status == "failed"
    assert "got unknown options priorty (allowed: aliases, priority)" in typo.error
    assert "pass name 'mine:cse' must be letters, digits" in colon.error


def test_the_hooks_document_typed_register_callbacks() -> None:
    import typing

    from dlvm.ir import plugin

    hints = {name: typing.get_type_hints(getattr(plugin.Hooks, name))["register"]
             for name in ("register_passes", "register_targets", "register_frontends",
                          "register_pipelines")}
    assert hints == {"register_passes": plugin.RegisterPass,
                     "register_targets": plugin.RegisterTarget,
                     "register_frontends": plugin.RegisterFrontend,
                     "register_pipelines": plugin.RegisterPipeline}
    params = typing.get_type_hints(plugin.RegisterTarget.__call__)
    assert params["priority"] is int


def test_the_owner_of_a_pass_or_target_is_found_from_the_object() -> None:
    reg = fresh()
    reg.add_plugin(GoodPlugin(), PluginInfo("good", "dlvm-good", "1.0"))
    assert reg.owner("target", EchoTarget(factor=2)).label == "plugin 'good' (dlvm-good)"
    [verify] = ir.build_pipeline("verify", reg)
    assert reg.owner("pass", verify).distribution == "dlvm-ir"  # named as "module:Class"
    assert reg.owner("pass", OtherVerify()) is None


def test_an_instruction_defined_twice_names_who_has_it() -> None:
    class Redefines:
        @hookimpl
        def register_instructions(self):
            ir.define("add", "$x", lambda inst, m: inst.x.type)

    reg = fresh()
    reg.add_plugin(Redefines(), PluginInfo("redef", "dlvm-redef", "1.0"))
    info = reg.plugins[-1]
    assert (info.status, info.error) == (
        "failed", "ValueError: instruction 'add' is already defined by dlvm-ir")
    assert ir.OPS["add"].provider == "dlvm-ir"
