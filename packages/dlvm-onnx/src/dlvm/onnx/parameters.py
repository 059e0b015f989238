"""Trained parameters read for `dlvm onnx update`: an .npz archive (the checkpoint `dlvm run`
writes), each array checked against the initializer it replaces before anything is written.

An array must have the initializer's shape and hold real numbers: floats, or integers, cast
to the initializer's type. Complex numbers (their imaginary parts would be dropped), strings
(they would be parsed), booleans, Python objects and records are refused, as are values that
are NaN or infinite — also once cast, where a float64 value is beyond float32's range.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

import dlvm.ir as ir
from dlvm.ir.files import read_input

# numpy's kinds of arrays that are not real numbers, in words
NOT_REAL = {"c": "complex numbers", "b": "booleans", "U": "strings", "S": "byte strings",
            "O": "Python objects", "V": "records (structured data)", "M": "dates",
            "m": "time spans"}


def read_parameters(path: str, wanted: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of the archive `path` named in `wanted` (name → the array it replaces),
    each cast to its counterpart's type; any that is missing or does not fit is refused."""
    data = read_input(path, what="parameters", limit=None)
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as e:
        raise ir.DlvmError(f"cannot read parameters '{path}': it is not an .npz archive "
                           f"({type(e).__name__})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ir.DlvmError(f"cannot read parameters '{path}': it is a single array (.npy), "
                           "not an .npz archive of arrays by name (numpy.savez)")
    with archive:
        missing = [n for n in wanted if n not in archive.files]
        if missing:
            raise ir.DlvmError(f"{path}: no parameter '{missing[0]}' (the model's parameters "
                               f"are {', '.join(wanted)})")
        return {name: fitted(path, name, member(archive, path, name), old)
                for name, old in wanted.items()}


def member(archive: np.lib.npyio.NpzFile, path: str, name: str) -> np.ndarray:
    try:
        return np.asarray(archive[name])
    except ValueError as e:
        if "allow_pickle" in str(e):  # an array of objects, stored pickled
            raise ir.DlvmError(f"{path}: '{name}' holds Python objects; parameters must be "
                               "real numbers") from None
        raise ir.DlvmError(f"{path}: '{name}' cannot be read ({e})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ir.DlvmError(f"{path}: '{name}' cannot be read ({type(e).__name__}: "
                           f"{str(e)[:120]})") from None


def fitted(path: str, name: str, new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """`new` as the initializer `old` holds it, once it is known to fit."""
    if new.dtype.kind in NOT_REAL:
        raise ir.DlvmError(f"{path}: '{name}' holds {NOT_REAL[new.dtype.kind]} ({new.dtype}); "
                           f"parameters must be real numbers (the model's is {old.dtype})")
    if new.shape != old.shape:
        raise ir.DlvmError(f"{path}: '{name}' has shape {new.shape}, the model's "
                           f"{old.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = new.astype(old.dtype)
        exact = new.dtype.kind not in "iu" or np.array_equal(cast.astype(new.dtype), new)
    if not np.isfinite(cast).all():
        if new.dtype.kind == "f" and not np.isfinite(new).all():
            raise ir.DlvmError(f"{path}: '{name}' holds NaN or infinite values")
        raise ir.DlvmError(f"{path}: '{name}' holds values beyond the range of {old.dtype}")
    if not exact:
        raise ir.DlvmError(f"{path}: '{name}' holds integers that {old.dtype} cannot hold "
                           "exactly")
    return cast
