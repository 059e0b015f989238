"""`dlvm compile`: a module as a target's code, or a one-line error saying why not."""

from __future__ import annotations

from pathlib import Path

import pytest

import dlvm.ir as ir

Invoke = object


def has_llvm() -> bool:
    return ir.registry().has("target", "llvm-cpu")


def test_a_target_that_emits_nothing_says_so(invoke, double: Path) -> None:  # type: ignore[no-untyped-def]
    result = invoke("compile", str(double), "--target", "interp", "--emit", "llvm")
    assert result.exit_code == 1
    assert result.stderr.strip() == ("dlvm: error: target 'interp' cannot emit 'llvm' "
                                     "(it emits: nothing)")


def test_an_unknown_target_is_named(invoke, double: Path) -> None:  # type: ignore[no-untyped-def]
    result = invoke("compile", str(double), "--target", "llvm-gpu")
    assert result.exit_code == 1
    assert "unknown target 'llvm-gpu'" in result.stderr


@pytest.mark.skipif(not has_llvm(), reason="needs dlvm-llvm (the llvm-cpu target)")
def test_llvm_ir_assembly_and_objects(invoke, double: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = invoke("compile", str(double), "-t", "llvm-cpu", "--emit", "llvm")
    assert result.exit_code == 0, result.stderr
    assert "define" in result.stdout and "@dlvm.fn.f(" in result.stdout
    result = invoke("compile", str(double), "-t", "llvm-cpu", "--emit", "asm")
    assert result.exit_code == 0 and "dlvm.fn.f" in result.stdout
    out = tmp_path / "double.o"
    result = invoke("compile", str(double), "-t", "llvm-cpu", "--emit", "obj", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:4] in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"MZ\x90\x00")


@pytest.mark.skipif(not has_llvm(), reason="needs dlvm-llvm (the llvm-cpu target)")
def test_a_kind_the_target_does_not_emit(invoke, double: Path) -> None:  # type: ignore[no-untyped-def]
    result = invoke("compile", str(double), "-t", "llvm-cpu", "--emit", "ptx")
    assert result.exit_code == 1
    assert result.stderr.strip() == ("dlvm: error: target 'llvm-cpu' cannot emit 'ptx' "
                                     "(it emits: llvm, asm, obj)")


@pytest.mark.skipif(not has_llvm(), reason="needs dlvm-llvm (the llvm-cpu target)")
def test_the_output_must_not_be_the_input(invoke, double: Path) -> None:  # type: ignore[no-untyped-def]
    result = invoke("compile", str(double), "-t", "llvm-cpu", "-o", str(double))
    assert result.exit_code == 1
    assert "is also an input" in result.stderr
    assert "func @f" in double.read_text()


@pytest.mark.skipif(not has_llvm(), reason="needs dlvm-llvm (the llvm-cpu target)")
def test_bad_target_options_are_one_line(invoke, double: Path) -> None:  # type: ignore[no-untyped-def]
    result = invoke("compile", str(double), "-t", "llvm-cpu", "--target-option", "opt_level=7")
    assert result.exit_code == 1
    assert "opt_level" in result.stderr and "Traceback" not in result.stderr
