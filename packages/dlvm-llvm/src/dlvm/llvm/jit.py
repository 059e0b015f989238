"""LLVM itself: the host target machine, the optimization pipeline, object code, the JIT,
and the compiled-code cache.

Code is optimized with LLVM's O3 pipeline for the host CPU (its vector width and features),
emitted as an object file, and loaded into an MCJIT engine — so the same bytes can be kept
in the disk cache and loaded again without running LLVM at all.

The cache (`$DLVM_CACHE_DIR/llvm-cpu`, by default `~/.cache/dlvm/llvm-cpu`) holds one
object file and one JSON description per key; the key hashes the module's text, the
function and argument types, the CPU's name and features, and the versions of dlvm-llvm and
LLVM. Files are written to a temporary name and renamed, so processes that compile at once
never read half a file; a damaged entry is ignored and rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm

CACHE_ENV = "DLVM_CACHE_DIR"
_lock = threading.Lock()


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


def optimize(text: str, opt: int = 3) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parse, verify and optimize LLVM IR text for the host."""
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
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod, tm


def emit(text: str, what: str, opt: int = 3) -> bytes | str:
    """Optimized LLVM IR (`llvm`), assembly (`asm`) or an object file (`obj`)."""
    mod, tm = optimize(text, opt)
    if what == "llvm":
        return str(mod)
    if what == "asm":
        return tm.emit_assembly(mod)
    return bytes(tm.emit_object(mod))


class Engine:
    """One MCJIT engine that object files are added to (one per executable)."""

    def __init__(self) -> None:
        initialize()
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
        self.objects: list[Any] = []

    def load(self, obj: bytes) -> None:
        with _lock:
            ref = llvm.ObjectFileRef.from_data(obj)
            self.objects.append(ref)
            self.ee.add_object_file(ref)
            self.ee.finalize_object()

    def address(self, symbol: str) -> int:
        address = self.ee.get_function_address(symbol)
        if not address:
            raise RuntimeError(f"symbol '{symbol}' is not in the compiled code")
        return int(address)


# ---------------------------------------------------------------- the disk cache


@cache
def versions() -> str:
    """What compiled code depends on besides its input: the versions of dlvm-llvm (and a
    hash of its source, so that an edited checkout never loads stale code), llvmlite, LLVM."""
    try:
        mine = metadata.version("dlvm-llvm")
    except metadata.PackageNotFoundError:
        mine = "unknown"
    source = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        source.update(path.read_bytes())
    return f"dlvm-llvm {mine} ({source.hexdigest()[:16]}), llvmlite {llvmlite.__version__}, " \
        "LLVM " + ".".join(map(str, llvm.llvm_version_info))


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (versions(), host().cpu, host().features, *parts):
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


class DiskCache:
    """Object files and their descriptions, by key (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlvm"
        self.folder = Path(folder or os.environ.get(CACHE_ENV) or default) / "llvm-cpu"

    def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        obj = self.folder / f"{key}.o"
        meta = self.folder / f"{key}.json"
        try:
            data = obj.read_bytes()
            info = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if info.get("object_bytes") != len(data):
            return None
        return data, info

    def put(self, key: str, obj: bytes, info: dict[str, Any]) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            info = {**info, "object_bytes": len(obj)}
            self._write(self.folder / f"{key}.o", obj)
            self._write(self.folder / f"{key}.json", json.dumps(info).encode("utf-8"))
        except OSError:
            pass  # an unwritable cache only costs compile time

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
