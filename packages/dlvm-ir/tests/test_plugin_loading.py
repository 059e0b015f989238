"""Loading plugins from entry points: whatever a plugin raises (`SystemExit` included) stays
with that plugin, named with its distribution; and a plugin's instructions are there for
the parser without anyone loading plugins first.

The plugins here are real distributions as `importlib.metadata` finds them: a module and a
`*.dist-info` folder with an `entry_points.txt`, on `sys.path` (or `PYTHONPATH`).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dlvm.ir as ir
from dlvm.ir.plugin import PluginInfo, hookimpl, set_registry

AddDist = Callable[[str, str, str], str]


def write_distribution(root: Path, dist: str, entry_point: str, source: str) -> str:
    """A distribution `dist` whose entry point `entry_point` is a module with `source`;
    returns the module's name."""
    module = f"{dist.replace('-', '_')}_module"
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[dlvm.plugins]\n{entry_point} = {module}\n")
    return module


@pytest.fixture
def add_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AddDist]:
    """Install distributions into this process (on sys.path) for one test."""
    monkeypatch.delenv("DLVM_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("DLVM_STRICT_PLUGINS", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules: list[str] = []

    def add(dist: str, entry_point: str, source: str) -> str:
        modules.append(write_distribution(tmp_path, dist, entry_point, source))
        importlib.invalidate_caches()
        return modules[-1]

    yield add
    for module in modules:
        sys.modules.pop(module, None)


def info_of(reg: ir.Registry, dist: str) -> PluginInfo:
    return next(p for p in reg.plugins if p.distribution == dist)


# ---------------------------------------------------------------- failures stay with the plugin


def test_a_plugin_that_exits_on_import_is_recorded_and_the_others_load(add_dist: AddDist
                                                                       ) -> None:
    add_dist("dlvm-exiting", "exiting", "raise SystemExit('bye')")
    reg = ir.make_registry()
    info = info_of(reg, "dlvm-exiting")
    assert (info.name, info.status, info.error) == ("exiting", "failed", "SystemExit: bye")
    assert reg.entry("target", "interp").plugin.status == "ok"


def test_any_base_exception_on_import_is_recorded(add_dist: AddDist) -> None:
    add_dist("dlvm-odd", "odd", """
        class Odd(BaseException):
            pass
        raise Odd("not an Exception")
    """)
    info = info_of(ir.make_registry(), "dlvm-odd")
    assert (info.status, info.error) == ("failed", "Odd: not an Exception")


def test_keyboard_interrupt_is_not_swallowed(add_dist: AddDist) -> None:
    add_dist("dlvm-interrupted", "interrupted", "raise KeyboardInterrupt")
    with pytest.raises(KeyboardInterrupt):
        ir.make_registry()


class ExitsInItsHook:
    @hookimpl
    def register_passes(self, register: ir.plugin.RegisterPass) -> None:
        raise SystemExit(2)


def test_a_plugin_that_exits_in_a_hook_is_recorded_and_unregistered() -> None:
    reg = ir.make_registry(autoload=False)
    plugin = ExitsInItsHook()
    reg.add_plugin(plugin, PluginInfo("exits", "dlvm-exits", "1.0"))
    info = info_of(reg, "dlvm-exits")
    assert (info.status, info.error) == ("failed", "SystemExit: 2")
    assert not reg.manager.is_registered(plugin)
    assert "verify" in reg.names("pass")


def test_a_plugin_that_uses_the_registry_while_it_is_built_fails_alone(
        add_dist: AddDist) -> None:
    add_dist("dlvm-eager", "eager", "import dlvm.ir\ndlvm.ir.registry()\n")
    set_registry(None)
    try:
        reg = ir.registry()
        info = info_of(reg, "dlvm-eager")
        assert info.status == "failed"
        assert "used while it was being built" in info.error
        assert reg.has("target", "interp")
    finally:
        set_registry(None)


def test_two_distributions_may_use_one_entry_point_name(add_dist: AddDist) -> None:
    hooks = """
        from dlvm.ir.plugin import hookimpl

        @hookimpl
        def register_pipelines(register):
            register("twin-pipeline", "verify", "{}")
    """
    add_dist("dlvm-twin-a", "twin", hooks.format("a"))
    add_dist("dlvm-twin-b", "twin", hooks.format("b"))
    reg = ir.make_registry()
    a, b = info_of(reg, "dlvm-twin-a"), info_of(reg, "dlvm-twin-b")
    assert (a.status, b.status) == ("ok", "ok")
    assert reg.entry("pipeline", "twin-pipeline").summary == "a"
    assert reg.entry("pipeline", "dlvm-twin-b.twin:twin-pipeline").summary == "b"


# ---------------------------------------------------------------- instructions for the parser

FROB_PLUGIN = """
    from dlvm.ir.plugin import hookimpl

    CALLS = []

    @hookimpl
    def register_instructions():
        CALLS.append(1)
        import frob_ops
"""

FROB_OPS = """
    import dlvm.ir as ir

    ir.define("frobnicate", "$x", lambda inst, m: inst.x.type, traits=("pure", "elementwise"),
              evaluate=lambda inst, frame: frame.get(inst.x), summary="the identity, frobnicated")
"""

USES_FROB = """
func @f: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = frobnicate %x: <2 x f32>
    return %y: <2 x f32>
}
"""

PLAIN = USES_FROB.replace("frobnicate", "negate")


def run_python(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter that has the distributions in `tmp_path`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DLVM_DISABLE_PLUGIN_AUTOLOAD", "DLVM_STRICT_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


@pytest.fixture
def frob_installed(tmp_path: Path) -> Path:
    module = write_distribution(tmp_path, "dlvm-frob", "frob", FROB_PLUGIN)
    (tmp_path / "frob_ops.py").write_text(textwrap.dedent(FROB_OPS))
    (tmp_path / "frob_name.txt").write_text(module)
    return tmp_path


def test_parsing_finds_a_plugins_instruction_loading_plugins_once(frob_installed: Path
                                                                   ) -> None:
    plugin = (frob_installed / "frob_name.txt").read_text()
    out = run_python(frob_installed, f"""
        import sys
        import dlvm.ir as ir

        ir.verify(ir.parse({PLAIN!r}))
        assert {plugin!r} not in sys.modules, "a module of known instructions loads no plugin"
        module = ir.parse({USES_FROB!r})
        ir.verify(module)
        assert ir.lookup("nothing") is None and ir.lookup("still-nothing") is None
        print(len(sys.modules[{plugin!r}].CALLS), ir.OPS["frobnicate"].provider)
        entry = next(e for e in ir.registry().instructions() if e.name == "frobnicate")
        print(entry.plugin.name, entry.plugin.distribution, entry.summary)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 dlvm-frob", "frob dlvm-frob the identity, frobnicated"]


def test_ensure_instructions_defines_them_for_code_that_lists_ops(frob_installed: Path
                                                                  ) -> None:
    out = run_python(frob_installed, """
        import dlvm.ir as ir
        from dlvm.ir.opdef import ensure_instructions

        assert "frobnicate" not in ir.OPS
        ensure_instructions()
        ensure_instructions()
        print("frobnicate" in ir.OPS)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "True\n"


def test_a_lookup_miss_while_plugins_load_does_not_load_them_again(tmp_path: Path) -> None:
    write_distribution(tmp_path, "dlvm-parses-early", "early", f"""
        import dlvm.ir as ir

        try:
            ir.parse({USES_FROB!r})
        except ir.DiagnosticError as e:
            FOUND = str(e)
    """)
    out = run_python(tmp_path, """
        import dlvm.ir as ir

        reg = ir.registry()
        print(next(p.status for p in reg.plugins if p.distribution == "dlvm-parses-early"))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"
