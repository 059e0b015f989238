"""Files in and out: the one place DLVM reads an input file and writes an output.

Reading (`read_input`, `read_text`, `open_input`, `read_stream`) takes the bytes of a regular
file, or of a pipe or device (`/dev/stdin`, a FIFO) read in chunks up to a cap, so that
`/dev/zero` is refused after `limit` bytes instead of filling the memory, and Ctrl-C stops a
read that waits or runs long. The cap of text inputs (a module's IR text, TEL source, standard
input) is `MAX_TEXT_BYTES`, 256 MiB; data files (`.npz`, `.npy`) have none, and are read from
regular files only.

Writing: `check_output` refuses, before any work, an output that could not be written or that
would replace an input; `write_atomic` writes `NAME.tmp`, syncs it and renames it over `NAME`,
so a failure (a full disk, a lost permission, Ctrl-C) leaves the old file as it was and no
temporary behind.

Every refusal is a `DlvmError` of one line that names the file: `cannot read module
'model.dl': it is a directory`, `cannot write output 'model.dl': it is also an input`.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO

from .diagnostics import DlvmError

StrPath = str | os.PathLike[str]
Writer = Callable[[BinaryIO], object]

MAX_TEXT_BYTES = 256 * 1024 * 1024  # a module's text: IR, TEL source, standard input
CHUNK_BYTES = 1024 * 1024  # a stream is read this much at a time, so Ctrl-C is seen
TMP_SUFFIX = ".tmp"
SHOWN_PATH_CHARS = 200  # a longer path is shown shortened in messages
NAME_MAX = 255  # the longest file name most file systems take
PATH_MAX = 4096  # the longest path Linux takes (with its final NUL)
BOM = b"\xef\xbb\xbf"

# What an OSError means for a user, by errno; anything else is the system's own words.
REASONS: dict[int, str] = {
    errno.ENOENT: "it does not exist",
    errno.EISDIR: "it is a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENAMETOOLONG: "its name is too long",
    errno.ENOTDIR: "a part of its path is a file, not a directory",
    errno.ELOOP: "its symbolic links form a loop",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EFBIG: "the file would be too large for its file system",
    errno.EIO: "an input/output error of the device",
    errno.ENXIO: "no device or reader is attached to it",
    errno.ETXTBSY: "it is a program that is running",
}


# ---------------------------------------------------------------- messages


def shown(path: StrPath) -> str:
    """`path` as messages show it: whole, unless it is so long that a line would not hold it."""
    text = os.fsdecode(path)
    if len(text) > SHOWN_PATH_CHARS:
        return f"{printable(text[:120])}…{printable(text[-60:])} ({len(text)} characters)"
    return printable(text)


def printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def reason(e: OSError | ValueError) -> str:
    """Why a file operation failed, in a few lowercase words."""
    if isinstance(e, ValueError):  # "embedded null byte" and the like
        return "its name holds a NUL character" if "null" in str(e) else str(e)
    if e.errno in REASONS:
        return REASONS[e.errno]
    text = e.strerror or str(e) or type(e).__name__
    return text[:1].lower() + text[1:]


def size_text(n: int) -> str:
    """`256 MiB`, `1.5 GiB`, `17 bytes`."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}" if n % scale == 0 else f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def too_large(limit: int, what: str, size: int | None = None) -> str:
    """Why an input is refused for its size (`size` when known)."""
    held = f"it holds {size_text(size)}, more" if size is not None else "it holds more"
    return f"{held} than the {size_text(limit)} limit for one {what}"


def refused_read(path: StrPath, what: str, why: str) -> DlvmError:
    return DlvmError(f"cannot read {what} '{shown(path)}': {why}")


def refused_write(path: StrPath, what: str, why: str) -> DlvmError:
    return DlvmError(f"cannot write {what} '{shown(path)}': {why}")


def path_problem(path: StrPath) -> str | None:
    """Why no file can have the name `path` (None when one can): a NUL character, a name
    longer than the system takes. Cheap, so a huge path is refused before any work on it."""
    try:
        data = os.fsencode(path)
    except (TypeError, UnicodeError):
        return "its name cannot be encoded for the file system"
    if b"\0" in data:
        return "its name holds a NUL character"
    if len(data) >= PATH_MAX or any(len(part) > NAME_MAX for part in data.split(b"/")):
        return "its name is too long"
    return None


# ---------------------------------------------------------------- reading


@contextmanager
def open_input(path: StrPath, *, what: str = "file",
               limit: int | None = MAX_TEXT_BYTES) -> Iterator[BinaryIO]:
    """`path` open for reading, as `read_input` reads it: a regular file as it is, a pipe or
    device read into memory first (up to `limit`; with `limit` None, refused)."""
    fd, info = _open_checked(path, what, limit)
    if stat.S_ISREG(info.st_mode):
        stream: BinaryIO = os.fdopen(fd, "rb")
    else:
        try:
            stream = io.BytesIO(_read_capped(fd, path, what, limit or 0))
        finally:
            os.close(fd)
    with stream:
        yield stream


def read_input(path: StrPath, *, what: str = "file", limit: int | None = MAX_TEXT_BYTES
               ) -> bytes:
    """The bytes of the file `path`: a regular file's (at most `limit`; `limit` None: any
    size), or a pipe's or device's, read up to `limit` (with `limit` None, refused)."""
    fd, info = _open_checked(path, what, limit)
    try:
        if limit is None:  # a regular file of any size, in one read
            with os.fdopen(os.dup(fd), "rb") as f:
                try:
                    return f.read()
                except OSError as e:
                    raise refused_read(path, what, reason(e)) from None
        # /proc files say 0 bytes and a file may grow: read to the end, capped, either way
        hint = info.st_size if stat.S_ISREG(info.st_mode) else 0
        return _read_capped(fd, path, what, limit, hint)
    finally:
        os.close(fd)


def _open_checked(path: StrPath, what: str, limit: int | None) -> tuple[int, os.stat_result]:
    """An open descriptor of `path` and its status, once it is known to be readable: not a
    directory, a regular file within `limit`, or a stream that may be read up to one."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:
        raise refused_read(path, what, reason(e)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise refused_read(path, what, "it is a directory, not a file")
        if not stat.S_ISREG(info.st_mode) and limit is None:
            raise refused_read(path, what, "it is not a regular file (a device, pipe or "
                               "socket); give a file")
        if limit is not None and info.st_size > limit:
            raise refused_read(path, what, too_large(limit, what, info.st_size))
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read_capped(fd: int, path: StrPath, what: str, limit: int, size_hint: int = 0) -> bytes:
    """Every byte until the end, in chunks (Ctrl-C is seen between two), at most `limit`."""
    chunks: list[bytes] = []
    total = 0
    want = min(max(size_hint + 1, CHUNK_BYTES), limit + 1)
    while True:
        try:
            chunk = os.read(fd, want)
        except OSError as e:
            raise refused_read(path, what, reason(e)) from None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise refused_read(path, what, too_large(limit, what))
        chunks.append(chunk)
        want = min(CHUNK_BYTES, limit + 1 - total)


def check_input(path: StrPath, *, what: str = "file", limit: int | None = None,
                streams: bool = True) -> None:
    """Refuse, without reading it, an input that cannot be read: missing, a directory,
    unreadable, a regular file over `limit`, or a device or pipe unless `streams`."""
    problem = input_problem(path, limit=limit, what=what, streams=streams)
    if problem is not None:
        raise refused_read(path, what, problem)


def input_problem(path: StrPath, *, limit: int | None = None, what: str = "file",
                  streams: bool = True) -> str | None:
    """Why `path` cannot be read as an input (None when it can), in a few words."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as e:
        return reason(e)
    if stat.S_ISDIR(info.st_mode):
        return "it is a directory, not a file"
    if not stat.S_ISREG(info.st_mode):
        return None if streams else ("it is not a regular file (a device, pipe or socket); "
                                     "give a file")
    if not os.access(path, os.R_OK):
        return "permission denied"
    if limit is not None and info.st_size > limit:
        return too_large(limit, what, info.st_size)
    return None


def read_text(path: StrPath, *, what: str = "file", limit: int | None = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of `path` (a leading byte order mark dropped), read as `read_input`."""
    return decode(read_input(path, what=what, limit=limit), path, what)


def decode(data: bytes, path: StrPath, what: str = "file") -> str:
    """UTF-8 text without its byte order mark; bad bytes are refused naming their offset."""
    try:
        return data.removeprefix(BOM).decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start + (len(BOM) if data.startswith(BOM) else 0)
        raise refused_read(path, what, f"it is not UTF-8 text ({e.reason} at byte {at})"
                           ) from None


def read_stream(stream: BinaryIO, *, name: str = "<stdin>", what: str = "input",
                limit: int = MAX_TEXT_BYTES) -> bytes:
    """A stream's bytes (standard input's), in chunks, at most `limit`."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        fd = None
    if fd is not None:
        return _read_capped(fd, name, what, limit)
    chunks: list[bytes] = []
    total = 0
    while chunk := stream.read(min(CHUNK_BYTES, limit + 1 - total)):
        total += len(chunk)
        if total > limit:
            raise refused_read(name, what, too_large(limit, what))
        chunks.append(bytes(chunk))
    return b"".join(chunks)


# ---------------------------------------------------------------- writing


def temporary(path: StrPath) -> str:
    """Where `path` is written before it is renamed into place."""
    return os.fspath(path) + TMP_SUFFIX


def same_file(a: StrPath, b: StrPath) -> bool:
    """Whether two paths name one file: `samefile` when both exist (hard and symbolic links
    too), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        pass
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def check_output(path: StrPath, *, inputs: Iterable[StrPath | None] = (),
                 what: str = "output") -> None:
    """Refuse, before any work, an output that would replace one of `inputs`, or that could
    not be written: a directory, a path under a file, a read-only file or folder, a name too
    long. A file nobody may write (no `w` in its mode) is refused even for root."""
    for source in inputs:
        if source is not None and same_file(path, source):
            also = "" if os.fspath(source) == os.fspath(path) else f" ('{shown(source)}')"
            raise refused_write(path, what, f"it is also an input{also}; refusing to "
                                "replace it")
    problem = output_problem(path)
    if problem is not None:
        raise refused_write(path, what, problem)


def output_problem(path: StrPath) -> str | None:
    """Why `path` cannot be written (None when it can), in a few words."""
    text = os.fspath(path)
    if not text:
        return "the name is empty"
    try:
        info: os.stat_result | None = os.stat(text)
    except (FileNotFoundError, NotADirectoryError):  # the folders are looked at below
        info = None
    except (OSError, ValueError) as e:
        return reason(e)
    if info is not None and stat.S_ISDIR(info.st_mode):
        return "it is a directory"
    folder = os.path.dirname(os.path.abspath(text))
    if info is None or stat.S_ISREG(info.st_mode):
        if info is not None and not _writable(text, info):
            return "it is read-only"
        problem = folder_problem(folder)
        if problem is not None:
            return problem
        name = os.path.basename(os.path.realpath(text))
        if len(os.fsencode(name + TMP_SUFFIX)) > _name_max(folder):
            return "its name is too long"
        tmp = temporary(os.path.realpath(text))
        if os.path.lexists(tmp) and not os.path.isfile(tmp):
            return f"'{shown(tmp)}' (its temporary file) is in the way"
    elif not os.access(text, os.W_OK):  # a device or a pipe, written in place
        return "permission denied"
    return None


def folder_problem(folder: str) -> str | None:
    """Why files cannot be made in `folder` (None when they can): the nearest folder that
    exists must be a writable directory (the rest are made)."""
    current = folder
    while True:
        try:
            info = os.stat(current)
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent
            continue
        except (OSError, ValueError) as e:
            return reason(e)
        if not stat.S_ISDIR(info.st_mode):
            return f"'{shown(current)}' is not a directory"
        if not _writable(current, info, os.W_OK | os.X_OK):
            return f"cannot create files in '{shown(current)}' (it is read-only)"
        return None


def _writable(path: str, info: os.stat_result, mode: int = os.W_OK) -> bool:
    """Writable by this process, and by someone at all (root ignores a read-only mode)."""
    return bool(info.st_mode & 0o222) and os.access(path, mode)


def _name_max(folder: str) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX") if os.path.isdir(folder) else NAME_MAX
    except (OSError, ValueError):
        return NAME_MAX


def write_atomic(path: StrPath, data: bytes | str | Writer, *, what: str = "output") -> None:
    """Write `data` (bytes, text as UTF-8, or a function that writes to the open file) to
    `path`: `NAME.tmp` first, synced, then renamed over `NAME`; missing folders are made.
    On failure nothing is left and the old file is as it was. A device or pipe (`/dev/null`)
    is written in place; a symbolic link is written through, to the file it names."""
    write = _writer(data)
    try:
        try:
            mode: int | None = os.stat(path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise refused_write(path, what, "it is a directory")
        if mode is not None and not stat.S_ISREG(mode):  # /dev/null, a pipe, /dev/stdout
            with open(path, "wb") as f:
                write(f)
            return
        target = os.path.realpath(path) if os.path.islink(path) else os.fspath(path)
        folder = os.path.dirname(os.path.abspath(target))
        os.makedirs(folder, exist_ok=True)
        tmp = temporary(target)
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            _keep_mode(target, tmp)
            os.replace(tmp, target)
        except BaseException:
            _remove(tmp)
            raise
    except (OSError, ValueError) as e:
        raise refused_write(path, what, reason(e)) from None


def append_text(path: StrPath, text: str, *, what: str = "output") -> None:
    """Add `text` (UTF-8) at the end of `path`, made with its folders when missing: a log
    written a line at a time, such as training metrics."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "ab") as f:
            f.write(text.encode("utf-8"))
    except (OSError, ValueError) as e:
        raise refused_write(path, what, reason(e)) from None


def _writer(data: bytes | str | Writer) -> Writer:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        payload = data
        return lambda f: f.write(payload)
    return data


def _keep_mode(target: str, tmp: str) -> None:
    """A replaced file keeps its permission bits."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return
    os.chmod(tmp, mode)


def _remove(path: str) -> None:
    with suppress(OSError):
        os.unlink(path)


def remove_stale_temporary(path: StrPath) -> bool:
    """Remove the `NAME.tmp` a killed write left behind; True when there was one."""
    tmp = temporary(path)
    if not os.path.isfile(tmp) or os.path.islink(tmp):
        return False
    _remove(tmp)
    return True
