"""LLVM for the host CPU: parse, optimize and emit IR text; also a compile worker's loop.

This file imports nothing but llvmlite, so that a worker process started as
`python compile_worker.py` is ready in the time of a Python start-up and an import of
llvmlite (importing the `dlvm.llvm` package would add DLVM's IR library). `jit` re-exports
these functions for the rest of the package.

A worker reads requests from stdin and writes answers to stdout until stdin closes:
request: 4-byte flags (the opt level, plus `UNROLL_FLAG`), 8-byte length, IR text (UTF-8);
answer: 1-byte status (0: object code, 1: an error message), 8-byte length, payload.
Integers are little-endian. It writes one byte 'R' when it is ready.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from typing import IO

import llvmlite.binding as llvm

UNROLL_FLAG = 0x100


@cache
def initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class Host:
    triple: str
    cpu: str
    features: str


@cache
def host() -> Host:
    initialize()
    return Host(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                llvm.get_host_cpu_features().flatten())


def target_machine(opt: int = 3) -> llvm.TargetMachine:
    """A new target machine for the host (an engine takes ownership of the one it gets)."""
    h = host()
    target = llvm.Target.from_triple(h.triple)
    return target.create_target_machine(cpu=h.cpu, features=h.features, opt=opt,
                                        reloc="default", codemodel="jitdefault", jit=True)


def optimize(text: str, opt: int = 3, unroll: bool = True
             ) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parse, verify and optimize LLVM IR text for the host (`unroll`: with LLVM's loop
    unrolling pass, which code whose loops the vectorizer already interleaves can skip)."""
    initialize()
    tm = target_machine(opt)
    mod = llvm.parse_assembly(text)
    mod.verify()
    mod.triple = host().triple
    mod.data_layout = str(tm.target_data)
    if opt:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = unroll
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod, tm


def emit_single(text: str, what: str, opt: int = 3, unroll: bool = True) -> bytes | str:
    """Optimized LLVM IR (`llvm`), assembly (`asm`) or an object file (`obj`) of the
    module as one unit, in this process."""
    mod, tm = optimize(text, opt, unroll)
    if what == "llvm":
        return str(mod)
    if what == "asm":
        return tm.emit_assembly(mod)
    return bytes(tm.emit_object(mod))


def read_exactly(stream: IO[bytes], n: int) -> bytes | None:
    """`n` bytes, or None at the end of the stream."""
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Answer compile requests until `inp` ends."""
    initialize()
    host()
    out.write(b"R")
    out.flush()
    while True:
        head = read_exactly(inp, 12)
        if head is None:
            return
        flags = int.from_bytes(head[:4], "little")
        body = read_exactly(inp, int.from_bytes(head[4:], "little"))
        if body is None:
            return
        try:
            status, payload = 0, emit_single(body.decode("utf-8"), "obj", flags & 0xFF,
                                             bool(flags & UNROLL_FLAG))
        except Exception as e:  # the parent reports it as its own compile would
            status, payload = 1, f"{type(e).__name__}: {e}".encode()
        assert isinstance(payload, bytes)
        out.write(bytes([status]) + len(payload).to_bytes(8, "little"))
        out.write(payload)
        out.flush()


if __name__ == "__main__":
    import contextlib
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    with contextlib.suppress(OSError):  # the parent ended (its pipes closed): so does this
        serve(sys.stdin.buffer, sys.stdout.buffer)
