"""The executable's contract: one build per argument shapes, a disk cache that other
processes share safely, kernels split over threads with the same results, results that are
the code's own buffers (not copies) unless they alias an argument, and `llvm-cpu` as the
default target once installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.llvm.codegen import jit
from dlvm.llvm.runtime.executable import LLVMExecutable

LAYER = """
func @layer: (<_ x 8 x f32>, <8 x 4 x f32>, <4 x f32>) -> <_ x 4 x f32> {
'entry(%x: <_ x 8 x f32>, %w: <8 x 4 x f32>, %b: <4 x f32>):
    %h = dot %x: <_ x 8 x f32>, %w: <8 x 4 x f32>
    %b2 = padShape %b: <4 x f32> at 0
    %z = add %h: <_ x 4 x f32>, %b2: <1 x 4 x f32>
    %y = tanh %z: <_ x 4 x f32>
    return %y: <_ x 4 x f32>
}

func @same: (<_ x f32>) -> <_ x f32> {
'entry(%x: <_ x f32>):
    return %x: <_ x f32>
}
"""

BIG = """
func @chain: (<_ x f32>, <_ x f32>, <_ x f32>) -> <_ x f32> {
'entry(%a: <_ x f32>, %b: <_ x f32>, %c: <_ x f32>):
    %ab = multiply %a: <_ x f32>, %b: <_ x f32>
    %t = add %ab: <_ x f32>, %c: <_ x f32>
    %th = tanh %t: <_ x f32>
    %d = subtract %a: <_ x f32>, %c: <_ x f32>
    %n = negate %d: <_ x f32>
    %e = exp %n: <_ x f32>
    %e1 = add %e: <_ x f32>, 1.0: f32
    %s = divide 1.0: f32, %e1: <_ x f32>
    %y = multiply %th: <_ x f32>, %s: <_ x f32>
    return %y: <_ x f32>
}
"""


def params(rng: np.random.Generator, batch: int) -> tuple[np.ndarray, ...]:
    return (rng.standard_normal((batch, 8)).astype(np.float32),
            rng.standard_normal((8, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32))


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What LLVM is run for to build a function (a load from the disk cache is not one;
    the thread pool, built once per process, does not count)."""
    compiled: list[str] = []
    emit = jit.emit

    def counted(text: str, what: str, opt: int = 3) -> bytes | str:
        if "dlvm.entry" in text:
            compiled.append(what)
        return emit(text, what, opt)

    monkeypatch.setattr(jit, "emit", counted)
    return compiled


def test_a_new_batch_size_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = count_compiles(monkeypatch)
    exe = ir.compile(ir.parse(LAYER), "llvm-cpu", cache=False)
    oracle = ir.compile(ir.parse(LAYER), "interp")
    rng = np.random.default_rng(0)
    for batch in (2, 2, 5, 2, 5, 5):
        args = params(rng, batch)
        np.testing.assert_allclose(exe["layer"](*args), oracle["layer"](*args), rtol=1e-5,
                                   atol=1e-6)
    assert len(compiled) == 2


def test_past_the_limit_one_build_with_dynamic_sizes_serves_every_shape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = count_compiles(monkeypatch)
    exe = ir.compile(ir.parse(LAYER), "llvm-cpu", cache=False, max_specializations=2)
    oracle = ir.compile(ir.parse(LAYER), "interp")
    rng = np.random.default_rng(1)
    for batch in (1, 2, 3, 4, 5, 3):
        args = params(rng, batch)
        np.testing.assert_allclose(exe["layer"](*args), oracle["layer"](*args), rtol=1e-5,
                                   atol=1e-6)
    assert len(compiled) == 3  # batch 1, batch 2, then the generic build for the rest


def test_without_specialization_the_dynamic_build_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = count_compiles(monkeypatch)
    exe = ir.compile(ir.parse(LAYER), "llvm-cpu", cache=False, specialize=False)
    rng = np.random.default_rng(2)
    for batch in (1, 7):
        x, w, b = params(rng, batch)
        np.testing.assert_allclose(exe["layer"](x, w, b), np.tanh(x @ w + b), rtol=1e-5,
                                   atol=1e-6)
    assert len(compiled) == 1


def test_the_disk_cache_serves_a_new_executable_without_llvm(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path))
    rng = np.random.default_rng(3)
    args = params(rng, 3)
    first = ir.compile(ir.parse(LAYER), "llvm-cpu")["layer"](*args)
    entries = sorted(p.suffix for p in (tmp_path / "llvm-cpu").iterdir())
    assert entries == [".json", ".o"], entries
    compiled = count_compiles(monkeypatch)
    again = ir.compile(ir.parse(LAYER), "llvm-cpu")["layer"](*args)
    assert compiled == []
    np.testing.assert_array_equal(first, again)  # the same machine code: bit for bit


def test_the_key_changes_with_what_the_code_depends_on() -> None:
    keys = {jit.cache_key("text", "f", "sig"), jit.cache_key("text2", "f", "sig"),
            jit.cache_key("text", "g", "sig"), jit.cache_key("text", "f", "sig2")}
    assert len(keys) == 4
    assert jit.cache_key("text", "f", "sig") == jit.cache_key("text", "f", "sig")


CONCURRENT = textwrap.dedent("""
    import sys
    import numpy as np
    import dlvm.ir as ir
    src = open(sys.argv[1]).read()
    exe = ir.compile(ir.parse(src), "llvm-cpu")
    a = np.linspace(-2, 2, 1000, dtype=np.float32)
    y = exe["chain"](a, a + 1, a - 1)
    want = np.tanh(a * (a + 1) + a - 1) / (1 + np.exp(-(a - (a - 1))))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    print("ok")
""")


def test_processes_that_compile_at_once_share_the_cache_safely(tmp_path: Path) -> None:
    source = tmp_path / "chain.dl"
    source.write_text(BIG)
    script = tmp_path / "run.py"
    script.write_text(CONCURRENT)
    env = {**os.environ, jit.CACHE_ENV: str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, str(script), str(source)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err
    files = sorted(p.name for p in (tmp_path / "cache" / "llvm-cpu").iterdir())
    assert not [f for f in files if f.endswith(".tmp")], files
    folder = tmp_path / "cache" / "llvm-cpu"
    entries = [f for f in files if f.endswith(".json")
               and "the thread pool" not in (folder / f).read_text()]  # the pool's own entry
    assert len(entries) == 1, files
    out = subprocess.run([sys.executable, str(script), str(source)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_kernels_split_over_threads_give_the_same_results(threads: int) -> None:
    n = 1 << 18
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    exe = ir.compile(ir.parse(BIG), "llvm-cpu", cache=False, threads=threads)
    assert isinstance(exe, LLVMExecutable) and exe.threads == threads
    got = exe["chain"](a, b, c)
    want = ir.compile(ir.parse(BIG), "interp")["chain"](a, b, c)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_results_are_the_codes_buffers_and_an_argument_comes_back_as_a_copy() -> None:
    exe = ir.compile(ir.parse(LAYER), "llvm-cpu", cache=False)
    x, w, b = params(np.random.default_rng(6), 3)
    y = exe["layer"](x, w, b)
    assert y.flags.c_contiguous and y.flags.writeable and y.base is not None
    assert not np.shares_memory(y, x) and not np.shares_memory(y, w)
    z = exe["layer"](x, w, b)
    assert not np.shares_memory(y, z)  # the next call does not overwrite a result
    np.testing.assert_array_equal(y, z)  # the same code run twice: bit for bit
    v = np.arange(5, dtype=np.float32)
    out = exe["same"](v)
    out[0] = 42
    assert v[0] == 0  # handing back an argument copies it


def test_llvm_cpu_is_the_default_target_when_installed() -> None:
    assert ir.registry().make_target(None).name == "llvm-cpu"
    assert isinstance(ir.compile(ir.parse(BIG)), LLVMExecutable)


FOREVER = """
func @spin: (i64) -> i64 {
'entry(%n: i64):
    branch 'loop(%n: i64)
'loop(%i: i64):
    %j = add %i: i64, 1: i64
    %go = greaterThan %j: i64, -1: i64
    conditional %go: bool then 'loop(%j: i64) else 'done(%j: i64)
'done(%r: i64):
    return %r: i64
}
"""


def test_a_timeout_stops_an_endless_loop_and_the_executable_carries_on() -> None:
    exe = ir.compile(ir.parse(FOREVER), "llvm-cpu", cache=False, timeout=0.2)
    with pytest.raises(ir.ExecutionError, match=r"'@spin' exceeded the timeout of 0.2 s"):
        exe["spin"](np.int64(0))
    with pytest.raises(ir.ExecutionError, match="exceeded the timeout"):
        exe["spin"](np.int64(5))  # the deadline is per call


def test_the_cli_passes_the_timeout_to_llvm_cpu(tmp_path: Path) -> None:
    source = tmp_path / "spin.dl"
    source.write_text(FOREVER)
    args = tmp_path / "args.npz"
    np.savez(args, arg0=np.int64(0))
    out = subprocess.run([sys.executable, "-m", "dlvm.cli", "exec", str(source), "-f", "spin",
                          "--target", "llvm-cpu", "--args", str(args), "--timeout", "0.3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "exceeded the timeout of 0.3 s" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_dropped_result_gives_its_memory_back_for_the_next_call() -> None:
    """No fresh allocation per call in steady state: a result numpy no longer holds returns
    to the pool (a large one freed to libc would be faulted in again page by page)."""
    n = 1 << 20
    exe = ir.compile(ir.parse(BIG), "llvm-cpu", cache=False, threads=1)
    a = np.linspace(-1, 1, n, dtype=np.float32)
    y = exe["chain"](a, a, a)
    first = y.ctypes.data
    want = y.copy()
    del y
    z = exe["chain"](a, a, a)
    assert z.ctypes.data == first
    np.testing.assert_array_equal(z, want)  # the same code run twice: bit for bit
    kept = exe["chain"](a, a, a)  # while z lives, a new call gets other memory
    assert kept.ctypes.data != z.ctypes.data
