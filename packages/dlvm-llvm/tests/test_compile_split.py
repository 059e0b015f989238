"""A large module compiles in parts, in worker processes, and runs the same: the split IR
is complete in each part, the engine links the parts, the disk cache keeps them, and a
worker that errs or dies never changes a result."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.llvm.codegen import jit, split, workers

MLP = """
module "mlp"
stage raw

func @loss: (<16 x 8 x f32>, <8 x f32>, <8 x 4 x f32>, <4 x f32>, <5 x 16 x f32>, <5 x 4 x f32>) -> f32 {
'entry(%w1: <16 x 8 x f32>, %b1: <8 x f32>, %w2: <8 x 4 x f32>, %b2: <4 x f32>, %x: <5 x 16 x f32>, %y: <5 x 4 x f32>):
    %z0 = dot %x: <5 x 16 x f32>, %w1: <16 x 8 x f32>
    %bb0 = padShape %b1: <8 x f32> at 0
    %a0 = add %z0: <5 x 8 x f32>, %bb0: <1 x 8 x f32>
    %h0 = tanh %a0: <5 x 8 x f32>
    %z1 = dot %h0: <5 x 8 x f32>, %w2: <8 x 4 x f32>
    %bb1 = padShape %b2: <4 x f32> at 0
    %s = add %z1: <5 x 4 x f32>, %bb1: <1 x 4 x f32>
    %m = reduce %s: <5 x 4 x f32> by max init -inf: f32 along 1
    %mp = padShape %m: <5 x f32> at 1
    %zc = subtract %s: <5 x 4 x f32>, %mp: <5 x 1 x f32>
    %e = exp %zc: <5 x 4 x f32>
    %se = reduce %e: <5 x 4 x f32> by add init 0.0: f32 along 1
    %ls = log %se: <5 x f32>
    %lsp = padShape %ls: <5 x f32> at 1
    %logp = subtract %zc: <5 x 4 x f32>, %lsp: <5 x 1 x f32>
    %t = multiply %logp: <5 x 4 x f32>, %y: <5 x 4 x f32>
    %total = reduce %t: <5 x 4 x f32> by add init 0.0: f32
    %l = negate %total: f32
    return %l: f32
}

[gradient @loss wrt 0, 1, 2, 3 seedable]
func @dloss: (<16 x 8 x f32>, <8 x f32>, <8 x 4 x f32>, <4 x f32>, <5 x 16 x f32>, <5 x 4 x f32>, f32) -> (<16 x 8 x f32>, <8 x f32>, <8 x 4 x f32>, <4 x f32>)
"""


def arguments() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    shapes = [(16, 8), (8,), (8, 4), (4,), (5, 16)]
    out = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 5)]
    return [*out, y, np.float32(1.0)]


@pytest.fixture
def split_everything(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every module with two functions or more compiles in parts, through `emit(…, "jit")`
    (as the executable asks for code it loads); returns the part counts seen."""
    counts: list[int] = []
    monkeypatch.setattr(jit, "SPLIT_MIN_CHARS", 0)
    emit, cut = jit.emit, split.split

    def emit_jit(text: str, what: str, opt: int = 3) -> bytes | str:
        return emit(text, "jit" if what == "obj" else what, opt)

    def counted(text: str, parts: int, min_chars: int = 0) -> list[str]:
        out = cut(text, parts, min_chars)
        counts.append(len(out))
        return out

    monkeypatch.setattr(jit, "emit", emit_jit)
    monkeypatch.setattr(split, "split", counted)
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    return counts


@pytest.fixture
def ready_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    workers.prewarm()
    assert workers._workers, "no compile worker started"
    for w in workers._workers:
        assert w.started.wait(60), "no compile worker got ready within 60 s"
    yield


def test_a_split_module_computes_what_the_interpreter_computes(
        split_everything: list[int], tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path))
    module = ir.parse(MLP)
    ir.run_passes(module, "differentiation,O3")
    args = arguments()
    want = ir.compile(module, "interp").call("dloss", *args)
    got = ir.compile(module, "llvm-cpu", passes="").call("dloss", *args)
    assert max(split_everything) > 1
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    # the parts are cached as one entry, and loaded again without compiling
    compiled: list[str] = []
    emit = jit.emit
    monkeypatch.setattr(jit, "emit", lambda *a: compiled.append(a[1]) or emit(*a))
    again = ir.compile(module, "llvm-cpu", passes="").call("dloss", *args)
    assert compiled == []
    for g, w in zip(again, got, strict=True):
        np.testing.assert_array_equal(g, w)


def captured_text(monkeypatch: pytest.MonkeyPatch) -> str:
    """The LLVM IR text of the MLP's gradient, as the executable hands it to LLVM."""
    texts: list[str] = []
    emit = jit.emit

    def record(text: str, what: str, opt: int = 3) -> bytes | str:
        texts.append(text)
        return emit(text, what, opt)

    with monkeypatch.context() as m:
        m.setattr(jit, "emit", record)
        module = ir.parse(MLP)
        ir.run_passes(module, "differentiation,O3")
        ir.compile(module, "llvm-cpu", passes="", cache=False).call("dloss", *arguments())
    return max(texts, key=len)


def test_each_part_is_complete_ir_and_every_function_is_defined_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = captured_text(monkeypatch)
    parts = split.split(text, 3)
    assert len(parts) == 3
    defined: list[str] = []
    for part in parts:
        mod, _ = jit.optimize(part, 0)  # parses and verifies
        defined += [f.name for f in mod.functions if not f.is_declaration
                    and f.linkage.name != "internal"]
    assert len(defined) == len(set(defined))
    assert any(".x.dlvm.kernel." in name for name in defined)
    # an object file asked for (to write out) is one whole object file
    assert jit.emit(text, "obj")[:4] == b"\x7fELF"  # type: ignore[index]
    # small modules, or one part asked for, stay whole
    assert split.split(text, 1) == [text]
    assert split.split(text, 3, min_chars=len(text)) == [text]


def test_globals_are_declared_or_copied() -> None:
    text = "\n".join([
        '; ModuleID = "m"',
        '@"state" = internal global [2 x i64] [i64 1, i64 2]',
        '@"table" = internal constant [2 x i64] [i64 3, i64 4]',
        'define internal i32 @"dlvm.kernel.1"(ptr %".1") noinline',
        "{",
        "entry:",
        '  %".2" = load i64, ptr @"state"',
        '  %".3" = load i64, ptr @"table"',
        "  ret i32 0",
        "}",
        'define i32 @"entry"(ptr %".1")',
        "{",
        "entry:",
        '  %".2" = call i32 @"dlvm.kernel.1"(ptr %".1")',
        '  %".3" = load i64, ptr @"state"',
        '  ret i32 %".2"',
        "}",
        "",
    ])
    host, kernels = split.split(text, 2)
    assert '@"m.x.state" = global [2 x i64]' in host
    assert '@"m.x.state" = external global [2 x i64]' in kernels
    assert '@"table" = internal constant' in kernels and '@"table"' not in host
    assert 'declare i32 @"m.x.dlvm.kernel.1"(ptr %".1") noinline' in host
    for part in (host, kernels):
        jit.optimize(part, 0)
    engine = jit.Engine()
    engine.load(jit.pack_objects([jit.emit(p, "obj") for p in (host, kernels)]))  # type: ignore[misc]
    assert engine.address("entry")


def test_packed_objects_round_trip_and_damage_is_refused() -> None:
    objs = [b"one", b"", b"three"]
    packed = jit.pack_objects(objs)
    assert jit.unpack_objects(packed) == objs
    assert jit.unpack_objects(b"\x7fELF plain") == [b"\x7fELF plain"]
    with pytest.raises(ValueError, match="truncated"):
        jit.unpack_objects(packed[:-2])
    with pytest.raises(ValueError, match="trailing"):
        jit.unpack_objects(packed + b"x")


def test_a_ready_worker_compiles_a_part(ready_workers: None,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    local: list[str] = []
    compile_here = workers.compile_object
    monkeypatch.setattr(workers, "compile_object",
                        lambda text, opt, unroll=True: local.append(text) or compile_here(text, opt, unroll))
    parts = ['define i32 @"a"()\n{\nentry:\n  ret i32 1\n}\n',
             'define i32 @"bb"()\n{\nentry:\n  ret i32 2\n}\n']
    objs = workers.compile_all(parts, 2)
    assert local == [parts[1]]  # the largest here, the other in the worker
    engine = jit.Engine()
    engine.load(jit.pack_objects(objs))
    assert engine.address("a") and engine.address("bb")


def test_a_worker_reports_llvm_errors(ready_workers: None) -> None:
    with pytest.raises(RuntimeError, match="expected"):
        workers.compile_all(['define i32 @"a"()\n{\nentry:\n  ret i32 1\n}\n', "junk"],
                            2)
    # the worker is still usable
    assert len(workers.compile_all(["", ""], 2)) == 2


def test_a_dead_worker_is_replaced_by_compiling_here(ready_workers: None) -> None:
    for w in workers._workers:
        w.process.kill()
        w.process.wait()
    objs = workers.compile_all(['define i32 @"a"()\n{\nentry:\n  ret i32 1\n}\n', ""], 2)
    assert len(objs) == 2 and objs[0]


def test_the_worker_count_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(workers.WORKERS_ENV, "many")
    with pytest.raises(ValueError, match="DLVM_COMPILE_WORKERS must be a whole number"):
        workers.count()
    monkeypatch.setenv(workers.WORKERS_ENV, "0")
    assert workers.count() == 0
    monkeypatch.delenv(workers.WORKERS_ENV)
    assert 0 <= workers.count() <= min(workers.MAX_WORKERS, os.cpu_count() or 1)


def test_a_forked_child_starts_workers_of_its_own(ready_workers: None) -> None:
    parents = list(workers._workers)
    pid = os.fork()
    if pid == 0:  # the child: its compiles must not use the parent's pipes
        code = 1
        try:
            objs = workers.compile_all(['define i32 @"a"()\n{\nentry:\n  ret i32 1\n}\n', ""],
                                       2)
            ok = len(objs) == 2 and all(w not in parents for w in workers._workers)
            code = 0 if ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert workers._workers == parents
    assert len(workers.compile_all(['define i32 @"b"()\n{\nentry:\n  ret i32 2\n}\n', ""], 2)) == 2
