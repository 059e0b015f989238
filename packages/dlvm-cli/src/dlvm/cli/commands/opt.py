"""`dlvm opt FILE -p PIPELINE`: run passes and print the resulting IR (LLVM's `opt`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

import dlvm.ir as ir
from dlvm.cli.commands import MODULE_FILE_HELP
from dlvm.cli.errors import emit, warnings_reported
from dlvm.cli.inputs import STDIO, check_output, load_module, write_text

if TYPE_CHECKING:
    from dlvm.ir import Module, Pass, PassRecord


def opt(
    file: Annotated[str, typer.Argument(metavar="FILE", help=MODULE_FILE_HELP)],
    passes: Annotated[list[str] | None, typer.Option(
        "--passes", "-p", metavar="PIPELINE",
        help="Pipeline text, e.g. 'cse,dce' or 'inline{threshold=40},O2'; repeatable. "
             "Without it the module is printed in canonical form.")] = None,
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="OUT", help="Write the IR here instead of stdout.")] = STDIO,
    print_after_all: Annotated[bool, typer.Option(
        "--print-after-all", help="Print the module to stderr after every pass.")] = False,
    time_passes: Annotated[bool, typer.Option(
        "--time-passes", help="Print a per-pass timing table to stderr.")] = False,
    stats: Annotated[bool, typer.Option(
        "--stats", help="Print what each pass changed and counted to stderr.")] = False,
    no_verify: Annotated[bool, typer.Option(
        "--no-verify", help="Do not verify after each pass (the input is still verified).")
    ] = False,
    verify_each: Annotated[bool, typer.Option(
        "--verify-each", help="Verify after every pass, also for modules of over 20,000 "
        "instructions (which are otherwise verified once, at the end).")] = False,
) -> None:
    """Run a pass pipeline on a module and print the resulting DLVM IR."""
    check_output(output, inputs=[file])  # before the passes, which may take long
    module = load_module(file)
    pipeline = ",".join(p for p in passes or [] if p.strip())
    with warnings_reported():
        records = ir.run_passes(module, pipeline,
                                verify_each=False if no_verify else (True if verify_each else None),
                                print_after=dump_after_pass if print_after_all else None)
    write_text(output, ir.print_module(module))
    if stats:
        print_stats(records)
    if time_passes:
        print_timing(records)


def changed_word(changed: bool) -> str:
    return "changed" if changed else "unchanged"


def dump_after_pass(p: Pass, module: Module, changed: bool) -> None:
    """LLVM/MLIR-style `-print-after-all` banner followed by the module, on stderr."""
    emit(f"// -----// IR Dump After {p.describe()} ({changed_word(changed)}) //----- //")
    emit(ir.print_module(module).rstrip("\n"))


def print_stats(records: list[PassRecord]) -> None:
    """Per pass: a status line, the instruction counts, then each of its counters."""
    for r in records:
        emit(f"{r.name}: {changed_word(r.changed)}")
        emit(f"  instructions: {r.instructions_before} -> {r.instructions_after}")
        for what, count in sorted(r.stats.items()):
            emit(f"  {what}: {count}")


def print_timing(records: list[PassRecord]) -> None:
    """A `-time-passes` table on stderr, in pipeline order, with a total row."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    total = sum(r.seconds for r in records)
    table = Table(title="Pass execution timing report", title_justify="left")
    table.add_column("Pass")
    table.add_column("Seconds", justify="right")
    table.add_column("%", justify="right")
    percent: Callable[[float], str] = (
        (lambda s: f"{100 * s / total:.1f}") if total > 0 else (lambda s: "-"))
    for r in records:
        table.add_row(Text(r.name), f"{r.seconds:.6f}", percent(r.seconds))
    table.add_section()
    table.add_row("Total", f"{total:.6f}", "100.0" if total > 0 else "-")
    Console(stderr=True).print(table)
