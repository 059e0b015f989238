"""`dlvm compile FILE --target T --emit KIND`: a module as a target's code (LLVM's `llc`).

The target optimizes the module as it would to run it, then writes LLVM IR, assembly, PTX
or an object file; text goes to stdout by default, an object file only with `-o`.
`--emit dlvm` writes the module itself as DLVM IR text, as the front end made it (a `.tel`
or `.py` file becomes IR) or after `--passes`.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

import dlvm.ir as ir
from dlvm.cli.commands import MODULE_FILE_HELP
from dlvm.cli.commands.exec_ import resolve_target, target_options
from dlvm.cli.errors import warnings_reported
from dlvm.cli.inputs import STDIO, check_output, load_module, write_text
from dlvm.ir import files


def compile_(
    file: Annotated[str, typer.Argument(metavar="FILE", help=MODULE_FILE_HELP)],
    target: Annotated[str | None, typer.Option(
        "--target", "-t", metavar="T", help="Target name (default: the fastest installed).")
    ] = None,
    emit: Annotated[str, typer.Option(
        "--emit", metavar="KIND",
        help="llvm, asm, obj (llvm-cpu), ptx (nvptx), or dlvm: the module as DLVM IR.")
    ] = "llvm",
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="OUT", help="Write here instead of stdout.")] = STDIO,
    arch: Annotated[str | None, typer.Option(
        "--arch", metavar="ARCH", help="The GPU architecture, e.g. sm_90 (target nvptx).")
    ] = None,
    passes: Annotated[str | None, typer.Option(
        "--passes", "-p", metavar="PIPELINE",
        help="Passes run before code generation (default: the target's own, e.g. O3).")
    ] = None,
    target_option: Annotated[list[str] | None, typer.Option(
        "--target-option", metavar="KEY=VALUE",
        help="An option of the target (repeatable; the value is read as TOML).")] = None,
) -> None:
    """Compile a module for a target and write its code."""
    if emit == "dlvm":
        emit_dlvm(file, output, passes)
        return
    target_name = resolve_target(target)
    assignments = list(target_option or [])
    if arch is not None:
        assignments.append(f"arch={arch!r}".replace("'", '"'))
    if passes is not None:
        assignments.append(f"passes={passes!r}".replace("'", '"'))
    options = target_options(target_name, {"seed": None, "max_steps": None, "timeout": None},
                             assignments)
    made = ir.registry().make_target(target_name, **options)
    if emit not in made.emits:
        kinds = ", ".join(made.emits) or "nothing"
        raise ir.DlvmError(f"target '{target_name}' cannot emit '{emit}' (it emits: {kinds})")
    check_output(output, inputs=[file])
    if emit == "obj" and output == STDIO and sys.stdout.isatty():
        raise ir.DlvmError("an object file is binary: write it to a file with -o OUT.o")
    module = load_module(file)
    with warnings_reported():
        code = made.emit(module, emit)
    if isinstance(code, bytes):
        write_bytes(output, code)
    else:
        write_text(output, code)


def emit_dlvm(file: str, output: str, passes: str | None) -> None:
    """The module as DLVM IR: what a front end makes of a `.tel` or `.py` file."""
    check_output(output, inputs=[file])
    module = load_module(file)
    if passes:
        with warnings_reported():
            ir.run_passes(module, passes)
    write_text(output, ir.print_module(module))


def write_bytes(path: str, data: bytes) -> None:
    if path == STDIO:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    files.write_atomic(path, data)
