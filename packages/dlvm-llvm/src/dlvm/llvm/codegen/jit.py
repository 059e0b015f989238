"""LLVM itself: the host target machine, the optimization pipeline, object code, the JIT,
and the compiled-code cache.

Code is optimized with LLVM's O3 pipeline for the host CPU (its vector width and features),
emitted as an object file, and loaded into an MCJIT engine — so the same bytes can be kept
in the disk cache and loaded again without running LLVM at all. A large module is split
into parts (`split`) that worker processes compile in parallel with this one (`workers`);
its object files are packed into one byte string (`pack_objects`), cached as one entry,
and linked by the engine when it loads them.

The cache (`$DLVM_CACHE_DIR/llvm-cpu`, by default `~/.cache/dlvm/llvm-cpu`) holds one
object file and one JSON description per key; the key hashes the module's text, the
function and argument types, the CPU's name and features, and the versions of dlvm-llvm and
LLVM. Files are written to a temporary name and renamed, so processes that compile at once
never read half a file.

LLVM trusts an object file it loads: damaged bytes crash the process or run wrong code. So
the description holds a SHA-256 digest of the key, the object's bytes and the rest of the
description, and an entry is loaded only when it matches. Any other entry (truncated, other
bytes, another key's object, no digest, an unreadable file) is compiled again and rewritten,
with one warning line that names it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import threading
import warnings
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from dlvm.ir.diagnostics import DlvmError

# the host's LLVM, re-exported: the rest of the package reaches it through this module
from . import split, workers
from .compile_worker import Host as Host
from .compile_worker import emit_single as emit_single
from .compile_worker import host as host
from .compile_worker import initialize as initialize
from .compile_worker import optimize as optimize
from .compile_worker import target_machine as target_machine

CACHE_ENV = "DLVM_CACHE_DIR"
_lock = threading.Lock()


# modules with less code than this (characters of function definitions) compile whole:
# below it, sending parts to other processes costs more than it saves
SPLIT_MIN_CHARS = 60_000
OBJECTS_MAGIC = b"DLVM-OBJECTS\0"
# Lowered DLVM code skips LLVM's loop unrolling pass: the vectorizer interleaves its loops
# itself (several vectors in flight), and unrolling them again cost a quarter of the code
# generation time and a third of the object code of the MLP training step, for no
# measurable speed (MLP step, element-wise chains, reductions)
JIT_UNROLL = False


def emit(text: str, what: str, opt: int = 3) -> bytes | str:
    """Optimized LLVM IR (`llvm`), assembly (`asm`), an object file (`obj`), or object
    code for `Engine.load` (`jit`): a large module's parts compiled in parallel processes
    (see `split` and `workers`) and packed by `pack_objects`."""
    if what != "jit":
        return emit_single(text, what, opt)
    if opt:
        n = workers.count() + 1
        try:
            parts = split.split(text, n, SPLIT_MIN_CHARS) if n > 1 else [text]
            if len(parts) > 1:
                return pack_objects(workers.compile_all(parts, opt, JIT_UNROLL))
        except (split.SplitError, RuntimeError):
            pass  # compiled whole: IR that is wrong as a whole raises its own error there
    return emit_single(text, "obj", opt, JIT_UNROLL)


def pack_objects(objects: list[bytes]) -> bytes:
    """Several object files as one byte string (what the cache stores and `Engine.load`
    takes)."""
    out = [OBJECTS_MAGIC, len(objects).to_bytes(4, "little")]
    for obj in objects:
        out += [len(obj).to_bytes(8, "little"), obj]
    return b"".join(out)


def unpack_objects(data: bytes) -> list[bytes]:
    """The object files of `pack_objects`'s bytes (one object file: itself)."""
    if not data.startswith(OBJECTS_MAGIC):
        return [data]
    pos = len(OBJECTS_MAGIC)
    n = int.from_bytes(data[pos:pos + 4], "little")
    pos += 4
    out = []
    for _ in range(n):
        size = int.from_bytes(data[pos:pos + 8], "little")
        pos += 8
        if size > len(data) - pos:
            raise ValueError("packed object files are truncated")
        out.append(data[pos:pos + size])
        pos += size
    if pos != len(data):
        raise ValueError("packed object files have trailing bytes")
    return out


class MissingSymbol(DlvmError):
    """Compiled code that lacks a function it should define."""


class Engine:
    """One MCJIT engine that object files are added to (one per executable)."""

    def __init__(self) -> None:
        initialize()
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
        self.objects: list[Any] = []

    def load(self, obj: bytes) -> None:
        """Add object code (one object file, or several packed: they refer to each other's
        symbols, which finalizing them together resolves)."""
        with _lock:
            for part in unpack_objects(obj):
                ref = llvm.ObjectFileRef.from_data(part)
                self.objects.append(ref)
                self.ee.add_object_file(ref)
            self.ee.finalize_object()

    def address(self, symbol: str) -> int:
        address = self.ee.get_function_address(symbol)
        if not address:
            raise MissingSymbol(f"the compiled code defines no symbol '{symbol}' (if it came "
                                "from the code cache, delete the cache's folder)")
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
    for path in sorted(Path(__file__).parents[1].rglob("*.py")):  # the whole package
        source.update(path.read_bytes())
    return f"dlvm-llvm {mine} ({source.hexdigest()[:16]}), llvmlite {llvmlite.__version__}, " \
        "LLVM " + ".".join(map(str, llvm.llvm_version_info))


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (versions(), host().cpu, host().features, *parts):
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


MAX_DESCRIPTION_BYTES = 64 << 20


class CacheWarning(UserWarning):
    """A cache entry could not be used (it is compiled again)."""


class DamagedEntry(Exception):
    """Why a cache entry's files do not make a whole entry."""


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (a folder, a FIFO or a larger
    file in the cache is damage, never something to wait on or fill the memory with)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DamagedEntry(f"its {what} is not a regular file")
        if info.st_size > limit:
            raise DamagedEntry(f"its {what} is larger than expected")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


def entry_digest(key: str, obj: bytes, info: dict[str, Any]) -> str:
    """What ties an entry's files together: the key, the object and the description (its
    JSON in one canonical spelling), hashed."""
    h = hashlib.sha256()
    for part in (key.encode("ascii"), obj,
                 json.dumps(info, sort_keys=True, separators=(",", ":")).encode("utf-8")):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


class DiskCache:
    """Object files and their descriptions, by key (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlvm"
        self.folder = Path(folder or os.environ.get(CACHE_ENV) or default) / "llvm-cpu"

    def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        """The entry of `key` if it is there and whole; None if it is not there (or is being
        written), and None with a warning if it is damaged."""
        try:
            text = read_regular(self.folder / f"{key}.json", MAX_DESCRIPTION_BYTES,
                                "description")
            info = json.loads(text)
            if not isinstance(info, dict) or not isinstance(info.get("digest"), str):
                raise DamagedEntry("its description holds no digest")
            size = info.get("object_bytes")
            if not isinstance(size, int) or size < 0:
                raise DamagedEntry("its description holds no object size")
            data = read_regular(self.folder / f"{key}.o", size, "object file")
            digest = info.pop("digest")
            if len(data) != size or digest != entry_digest(key, data, info):
                raise DamagedEntry("its digest does not match its contents")
        except (FileNotFoundError, NotADirectoryError):
            return None  # no entry (or no cache folder: an unusable cache costs compile time)
        except OSError as e:
            self.damaged(key, f"it cannot be read: {e.strerror or e}")
            return None
        except (ValueError, RecursionError):
            self.damaged(key, "its description is not JSON")
            return None
        except DamagedEntry as e:
            self.damaged(key, str(e))
            return None
        return data, info

    def damaged(self, key: str, why: str) -> None:
        warnings.warn(f"llvm-cpu code cache: the entry {key[:16]}… in '{self.folder}' is "
                      f"damaged ({why}); compiling it again", CacheWarning, stacklevel=3)

    def put(self, key: str, obj: bytes, info: dict[str, Any]) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            info = {**info, "object_bytes": len(obj)}
            info["digest"] = entry_digest(key, obj, info)
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
