"""Array files in, outputs out: the one place the CLI touches data files.

Every array a command reads (datasets, parameters, arguments, checkpoints) comes through
`open_npz` or `read_array`, which never unpickle and turn each kind of broken file into
one message. The file itself is opened by `dlvm.ir.files` (regular files of any size; a
pipe or device is refused), which also checks every output before any work
(`output_problem`) and writes it atomically (`save_npz`, `save_text`).
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir import files

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive's first entry, or an empty one
PICKLE_MAGIC = b"\x80"
DATA_FILE = "data file"
_DAMAGED = (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error, KeyError)


# ---------------------------------------------------------------- reading


def input_problem(path: Path, what: str = DATA_FILE) -> str | None:
    """Why `path` cannot be read as a `what` (None when it can): a data file must be a
    regular file, a module may be a pipe or device (its front end reads it with a cap)."""
    problem = files.input_problem(path, what=what, streams=what != DATA_FILE)
    return f"cannot read {what} '{files.shown(path)}': {problem}" if problem else None


@contextmanager
def open_data(path: Path) -> Iterator[tuple[str, IO[bytes]]]:
    """The file open for reading, and its kind: "npy" or "npz" by its first bytes (never by
    its name)."""
    with files.open_input(path, what=DATA_FILE, limit=None) as f:
        try:
            magic = f.read(len(NPY_MAGIC))
            f.seek(0)
        except OSError as e:
            raise files.refused_read(path, DATA_FILE, files.reason(e)) from None
        yield _kind(path, magic), f


def _kind(path: Path, magic: bytes) -> str:
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


def file_kind(path: Path) -> str:
    """"npy" or "npz" by the file's first bytes (never by its name)."""
    with open_data(path) as (kind, _):
        return kind


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
    with open_data(path) as (kind, f):
        if kind == "npy":
            raise ir.DlvmError(f"'{path}' holds a single array (.npy), not an .npz archive "
                               "of named arrays")
        try:
            npz = np.load(f, allow_pickle=False)
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
    with open_data(path) as (kind, f):
        if kind == "npy":
            if key is not None:
                raise ir.DlvmError(f"'{path}' is a single array (.npy): it has no array "
                                   f"'{key}'")
            try:
                value: np.ndarray = np.load(f, allow_pickle=False)
            except MemoryError as e:
                raise ir.DlvmError(f"'{path}' does not fit in memory ({e})") from None
            except _DAMAGED as e:
                raise ir.DlvmError(f"'{path}' is not a valid .npy file: {_detail(e)}"
                                   ) from None
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


def output_problem(path: Path) -> str | None:
    """Why `path` cannot be written (None when it can); checked before any work."""
    problem = files.output_problem(path)
    return f"cannot write '{files.shown(path)}': {problem}" if problem else None


def write_npz(f: IO[bytes], arrays: Mapping[str, Any]) -> None:
    """An .npz archive of `arrays`, like `np.savez` but for any names and never pickled."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def save_npz(path: Path, arrays: Mapping[str, Any], what: str = "output") -> None:
    """`arrays` as an .npz at exactly `path`, atomically."""
    files.write_atomic(path, lambda f: write_npz(f, arrays), what=what)


def save_text(path: Path, text: str, what: str = "output") -> None:
    """`text` as UTF-8 at exactly `path`, atomically."""
    files.write_atomic(path, text, what=what)
