"""Pipeline text, pass options, named pipelines and the pass manager."""

from dataclasses import dataclass

import pytest

import dlvm.ir as ir
from dlvm.ir.passes import FunctionPass, PassContext
from dlvm.ir.pipeline import convert_option
from dlvm.ir.plugin import PluginInfo, Registry, hookimpl
from dlvm.ir.verifier import verify_diagnostics

SOURCE = """
func @f: (f32) -> f32 {
'entry(%x: f32):
    %a = add %x: f32, 1.0: f32
    %b = multiply %a: f32, 2.0: f32
    return %b: f32
}
"""


@dataclass
class CountingPass(FunctionPass):
    """Counts instructions; changes nothing."""

    name = "count"
    limit: int = 10
    scale: float = 1.0
    label: str = "x"
    flag: bool = False
    dims: list[int] | None = None

    def run_on_function(self, fn: ir.Function, ctx: PassContext) -> bool:
        ctx.stat("instructions seen", sum(len(b.instructions) for b in fn.blocks))
        return False


@dataclass
class BreakingPass(FunctionPass):
    """Leaves a block without its terminator, which the verifier must catch."""

    name = "break"

    def run_on_function(self, fn: ir.Function, ctx: PassContext) -> bool:
        fn.entry.instructions[-1].erase()
        return True


class _TestPlugin:
    @hookimpl
    def register_passes(self, register):
        register("count", CountingPass, "count instructions", aliases=("cnt",))
        register("break", BreakingPass, "break the IR")

    @hookimpl
    def register_pipelines(self, register):
        register("both", "count{limit=3},verify", "two passes")
        register("loop", "loop", "expands into itself")


@pytest.fixture
def registry() -> Registry:
    reg = ir.make_registry(autoload=False)
    reg.add_plugin(_TestPlugin(), PluginInfo("test", "dlvm-test", "0"))
    ir.plugin.set_registry(reg)
    yield reg
    ir.plugin.set_registry(None)


def test_parse_pipeline_names_options_and_columns() -> None:
    specs = ir.parse_pipeline('cse, inline{threshold=40 mode="a b"},O2')
    assert [s.name for s in specs] == ["cse", "inline", "O2"]
    assert specs[1].options == {"threshold": "40", "mode": "a b"}
    assert specs[2].column == 37
    assert ir.parse_pipeline("  ") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cse,", "column 5: expected a pass name"),
        ("cse dce", "expected ',' between passes"),
        ("a{k}", "expected '=' after option 'k'"),
        ("a{k=1", "expected '}' to close"),
        ("a{k=1 k=2}", "option 'k' given twice"),
        ('a{k="x}', "unterminated quoted"),
    ],
)
def test_pipeline_syntax_errors_say_where(text: str, message: str) -> None:
    with pytest.raises(ir.PipelineError, match=message):
        ir.parse_pipeline(text)


def test_options_are_converted_to_the_field_types(registry: Registry) -> None:
    (p,) = ir.build_pipeline("count{limit=3 scale=0.5 label=abc flag=true dims=1,2}")
    assert (p.limit, p.scale, p.label, p.flag, p.dims) == (3, 0.5, "abc", True, [1, 2])
    assert p.describe() == "count{limit=3 scale=0.5 label=abc flag=true dims=1,2}"
    assert convert_option("none", int | None, "x") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("count{limit=many}", "option 'limit' of pass 'count': expected int"),
        ("count{flag=maybe}", "expected bool"),
        ("count{nope=1}", "pass 'count' has no option 'nope' \\(options: limit, scale"),
        ("coutn", "unknown pass 'coutn' \\(did you mean 'count'\\?\\)"),
        ("zzz", "unknown pass 'zzz'; known: .*count.*; pipelines: both, loop"),
        ("cse", "pass 'cse' is provided by dlvm-opt: pip install dlvm-opt"),
        ("differentiation", "provided by dlvm-ad"),
        ("loop", "expand into themselves"),
        ("both{x=1}", "named pipeline 'both' takes no options"),
    ],
)
def test_bad_pipelines_give_one_clear_error(registry: Registry, text: str, message: str) -> None:
    with pytest.raises(ir.PipelineError, match=message):
        ir.build_pipeline(text)


def test_named_pipelines_and_aliases_expand(registry: Registry) -> None:
    passes = ir.build_pipeline("both,cnt")
    assert [p.name for p in passes] == ["count", "verify", "count"]
    assert passes[0].limit == 3


def test_pass_manager_records_stats_and_prints_after_each_pass(registry: Registry) -> None:
    module = ir.parse(SOURCE)
    seen: list[tuple[str, bool]] = []
    records = ir.run_passes(module, "count,strip-names",
                            print_after=lambda p, m, changed: seen.append((p.name, changed)))
    assert seen == [("count", False), ("strip-names", True)]
    assert records[0].stats["instructions seen"] == 3
    assert records[1].stats["names removed"] == 3
    assert records[1].instructions_before == records[1].instructions_after == 3
    assert "%0.1 = multiply %0.0: f32, 2.0: f32" in ir.print_module(module)


def test_pass_manager_verifies_after_each_pass(registry: Registry) -> None:
    module = ir.parse(SOURCE)
    with pytest.raises(ir.PassError, match="pass 'break' produced malformed IR"):
        ir.run_passes(module, "break")
    module = ir.parse(SOURCE)
    ir.run_passes(module, "break", verify_each=False)
    assert any("does not end with a terminator" in m for m in verify_diagnostics(module))


def test_a_large_module_is_verified_once_after_its_passes(registry: Registry,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Past `VERIFY_EACH_LIMIT` instructions verification runs once, at the end (each run
    costs as much as a pass); the error says how to find the pass, and `verify_each=True`
    names it."""
    from dlvm.ir import passes

    monkeypatch.setattr(passes, "VERIFY_EACH_LIMIT", 2)
    module = ir.parse(SOURCE)
    with pytest.raises(ir.PassError, match=r"the passes count, break, count produced "
                                           r"malformed IR .*--verify-each"):
        ir.run_passes(module, "count,break,count")
    module = ir.parse(SOURCE)
    with pytest.raises(ir.PassError, match="pass 'break' produced malformed IR"):
        ir.run_passes(module, "count,break,count", verify_each=True)
    verified = 0
    verify = passes.PassManager.verify

    def counted(module: ir.Module, after: str) -> None:
        nonlocal verified
        verified += 1
        verify(module, after)

    monkeypatch.setattr(passes.PassManager, "verify", staticmethod(counted))
    ir.run_passes(ir.parse(SOURCE), "strip-names,count,strip-names")
    assert verified == 0  # large: not after each pass (the end runs the verifier itself)


def test_analyses_are_invalidated_when_a_pass_changes_a_function(registry: Registry) -> None:
    from dlvm.ir.analysis import DominatorTree

    module = ir.parse(SOURCE)
    fn = module["f"]
    first = fn.analysis(DominatorTree)
    assert fn.analysis(DominatorTree) is first
    ir.run_passes(module, "strip-names")
    assert fn.analysis(DominatorTree) is not first
