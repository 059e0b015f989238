"""Array files in, outputs out: the one place the CLI touches data files.

Every array a command reads (datasets, parameters, arguments, checkpoints) comes through
`open_npz` or `read_array`, which never unpickle and turn each kind of broken file into
one message. Every output is checked by `output_problem` before any work and written by
`write_atomic`: to `NAME.tmp`, then renamed, so a failure never leaves half a file.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

import dlvm.ir as ir

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive's first entry, or an empty one
PICKLE_MAGIC = b"\x80"
TMP_SUFFIX = ".tmp"
_DAMAGED = (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error, KeyError)


# ---------------------------------------------------------------- reading


def input_problem(path: Path) -> str | None:
    """Why `path` cannot be read as an input file (None when it can)."""
    if path.is_dir():
        return f"'{path}' is a directory, not a file"
    if not path.exists():
        return f"file '{path}' does not exist"
    if not path.is_file():
        return f"'{path}' is not a regular file"
    if not os.access(path, os.R_OK):
        return f"cannot read '{path}': permission denied"
    return None


def file_kind(path: Path) -> str:
    """"npy" or "npz" by the file's first bytes (never by its name)."""
    problem = input_problem(path)
    if problem is not None:
        raise ir.DlvmError(problem)
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
    except OSError as e:
        raise ir.DlvmError(f"cannot read '{path}': {e.strerror or e}") from None
    if magic.startswith(NPY_MAGIC):
        return "npy"
    if magic.startswith(ZIP_MAGICS):
        return "npz"
    if not magic:
        raise ir.DlvmError(f"'{path}' is empty, not an .npz or .npy file")
    if magic.startswith(b"PK"):
        raise ir.DlvmError(f"'{path}' is not a valid .npz archive: a damaged zip file")
    if magic.startswith(PICKLE_MAGIC):
        raise ir.DlvmError(f"'{path}' holds pickled Python objects, which are never loaded")
    raise ir.DlvmError(f"'{path}' is not an .npz or .npy file")


class Archive:
    """An open .npz archive: its array names, and each array read with a one-line error."""

    def __init__(self, path: Path, npz: Any) -> None:
        self.path = path
        self.npz = npz
        self.names: list[str] = list(npz.files)

    def has(self, name: str) -> bool:
        return name in self.names

    def missing(self, name: str, what: str = "array") -> ir.DlvmError:
        holds = ", ".join(self.names) or "nothing"
        return ir.DlvmError(f"'{self.path}' has no {what} '{name}' (it holds {holds})")

    def array(self, name: str, what: str = "array") -> np.ndarray:
        if name not in self.names:
            raise self.missing(name, what)
        try:
            value = self.npz[name]
        except MemoryError as e:
            raise ir.DlvmError(f"{what} '{name}' of '{self.path}' does not fit in memory "
                               f"({e})") from None
        except _DAMAGED as e:
            raise ir.DlvmError(f"{what} '{name}' of '{self.path}' cannot be read: "
                               f"{_detail(e)}") from None
        if not isinstance(value, np.ndarray):
            raise ir.DlvmError(f"'{name}' in '{self.path}' is not a numpy array")
        return value


@contextmanager
def open_npz(path: Path) -> Iterator[Archive]:
    """An .npz archive of named arrays; a single .npy array or any other file is refused."""
    if file_kind(path) == "npy":
        raise ir.DlvmError(f"'{path}' holds a single array (.npy), not an .npz archive "
                           "of named arrays")
    try:
        npz = np.load(path, allow_pickle=False)
    except MemoryError as e:
        raise ir.DlvmError(f"'{path}' does not fit in memory ({e})") from None
    except _DAMAGED as e:
        raise ir.DlvmError(f"'{path}' is not a valid .npz archive: {_detail(e)}") from None
    with npz:
        yield Archive(path, npz)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, by name."""
    with open_npz(path) as archive:
        return {name: archive.array(name) for name in archive.names}


def read_array(path: Path, key: str | None = None) -> np.ndarray:
    """One array: a .npy file, array `key` of an .npz, or the only array of an .npz."""
    if file_kind(path) == "npy":
        if key is not None:
            raise ir.DlvmError(f"'{path}' is a single array (.npy): it has no array '{key}'")
        try:
            value: np.ndarray = np.load(path, allow_pickle=False)
        except MemoryError as e:
            raise ir.DlvmError(f"'{path}' does not fit in memory ({e})") from None
        except _DAMAGED as e:
            raise ir.DlvmError(f"'{path}' is not a valid .npy file: {_detail(e)}") from None
        return value
    with open_npz(path) as archive:
        if key is None:
            if len(archive.names) != 1:
                raise ir.DlvmError(f"'{path}' holds {len(archive.names)} arrays: name one "
                                   f"as '{path.name}:ARRAY' ({', '.join(archive.names)})")
            key = archive.names[0]
        return archive.array(key)


def _detail(e: BaseException) -> str:
    """numpy's reason, without its advice to unpickle (files are never unpickled)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "pickle" in text.lower():
        return "it holds pickled Python objects, which are never loaded"
    return text


# ---------------------------------------------------------------- writing


def temporary(path: Path) -> Path:
    """Where `path` is written before it is renamed into place."""
    return path.with_name(path.name + TMP_SUFFIX)


def output_problem(path: Path) -> str | None:
    """Why `path` cannot be written (None when it can); checked before any work."""
    if path.is_dir():
        return f"'{path}' is a directory"
    if path.exists() and path.is_file() and not os.access(path, os.W_OK):
        return f"'{path}' is read-only"
    for parent in path.parents:
        if not parent.exists():
            continue
        if not parent.is_dir():
            return f"'{parent}' is not a directory"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"cannot create files in '{parent}' (permission denied)"
        break
    if path.is_file() or not path.exists():
        tmp = temporary(path)
        if tmp.exists() and not tmp.is_file():
            return f"'{tmp}' (its temporary file) is in the way"
    return None


def write_atomic(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through `NAME.tmp` and rename it over `path`; on failure nothing is left."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():  # a device or pipe: write it in place
            with open(path, "wb") as f:
                write(f)
            return
        tmp = temporary(path)
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise ir.DlvmError(f"cannot write '{path}': {e.strerror or e}") from None


def remove_stale_temporary(path: Path) -> bool:
    """Remove the `NAME.tmp` a killed write left behind; True when there was one."""
    tmp = temporary(path)
    if not tmp.is_file():
        return False
    tmp.unlink(missing_ok=True)
    return True


def write_npz(f: IO[bytes], arrays: Mapping[str, Any]) -> None:
    """An .npz archive of `arrays`, like `np.savez` but for any names and never pickled."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def save_npz(path: Path, arrays: Mapping[str, Any]) -> None:
    """`arrays` as an .npz at exactly `path`, atomically."""
    write_atomic(path, lambda f: write_npz(f, arrays))


def save_text(path: Path, text: str) -> None:
    """`text` as UTF-8 at exactly `path`, atomically."""
    data = text.encode("utf-8")

    def write(f: IO[bytes]) -> None:
        f.write(data)

    write_atomic(path, write)


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: `samefile` when both exist, else resolved paths."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()
