"""`dlvm.cli.run.files`: the one loader of array files and the one writer of outputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.cli.run.files import (
    input_problem,
    open_npz,
    output_problem,
    read_array,
    read_npz,
    save_npz,
    save_text,
)
from dlvm.ir.files import MAX_TEXT_BYTES


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "is empty, not an .npz or .npy file"),
    (b"PK", "is not a valid .npz archive: a damaged zip file"),
    (b"PK\x03\x04 truncated", "is not a valid .npz archive"),
    (b"\x80\x04\x95", "holds pickled Python objects, which are never loaded"),
    (b"[module]\n", "is not an .npz or .npy file"),
])
def test_broken_files_are_named_without_numpy_advice(tmp_path: Path, content: bytes,
                                                     expected: str) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    for read in (read_npz, read_array):
        with pytest.raises(ir.DlvmError) as e:
            read(path)
        assert expected in str(e.value) and "allow_pickle" not in str(e.value)


def test_missing_files_and_directories_are_told_apart(tmp_path: Path) -> None:
    with pytest.raises(ir.DlvmError, match="does not exist"):
        read_npz(tmp_path / "none.npz")
    with pytest.raises(ir.DlvmError, match="is a directory, not a file"):
        read_npz(tmp_path)


def test_object_arrays_are_refused_not_unpickled(tmp_path: Path) -> None:
    path = tmp_path / "objects.npz"
    np.savez(path, x=np.array([object()], dtype=object))
    with open_npz(path) as npz, pytest.raises(ir.DlvmError) as e:
        npz.array("x")
    assert str(e.value) == (f"array 'x' of '{path}' cannot be read: it holds pickled Python "
                            "objects, which are never loaded")


def test_arrays_are_found_by_content_and_name(tmp_path: Path) -> None:
    with open(tmp_path / "a.npz", "wb") as f:
        np.save(f, np.arange(3))  # an .npy, whatever its name
    np.testing.assert_array_equal(read_array(tmp_path / "a.npz"), np.arange(3))
    with pytest.raises(ir.DlvmError, match=r"holds a single array \(\.npy\)"):
        read_npz(tmp_path / "a.npz")
    np.savez(tmp_path / "two.npz", x=np.zeros(1), y=np.ones(1))
    assert read_array(tmp_path / "two.npz", "y").tolist() == [1.0]
    with pytest.raises(ir.DlvmError, match=r"holds 2 arrays: name one as 'two\.npz:ARRAY'"):
        read_array(tmp_path / "two.npz")
    with open_npz(tmp_path / "two.npz") as npz, pytest.raises(ir.DlvmError) as e:
        npz.array("z", "parameter")
    assert str(e.value) == f"'{tmp_path / 'two.npz'}' has no parameter 'z' (it holds x, y)"


def test_any_array_name_can_be_saved(tmp_path: Path) -> None:
    path = tmp_path / "out"  # no suffix added
    save_npz(path, {"file": np.zeros(2), "allow_pickle": np.int64(3)})
    assert sorted(read_npz(path)) == ["allow_pickle", "file"]


def test_output_problems_are_found_before_writing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert output_problem(tmp_path) == f"cannot write '{tmp_path}': it is a directory"
    assert output_problem(tmp_path / "f" / "g" / "h") == (
        f"cannot write '{tmp_path / 'f' / 'g' / 'h'}': '{tmp_path / 'f'}' is not a directory")
    assert output_problem(tmp_path / "new" / "dir" / "x.npz") is None


def test_data_files_must_be_regular_files_of_any_size(tmp_path: Path) -> None:
    assert input_problem(Path("/dev/zero")) == (
        "cannot read data file '/dev/zero': it is not a regular file (a device, pipe or "
        "socket); give a file")
    with pytest.raises(ir.DlvmError, match="cannot read data file '/dev/zero'"):
        read_npz(Path("/dev/zero"))
    assert input_problem(Path("/dev/zero"), "module") is None  # read with a cap
    n = (MAX_TEXT_BYTES // 8) + 1  # a sparse file larger than a module's cap
    np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.float64, shape=(n,))
    assert read_array(tmp_path / "big.npy").shape == (n,)


def test_outputs_are_written_atomically_with_one_line_errors(tmp_path: Path) -> None:
    save_npz(tmp_path / "out", {"x": np.arange(2)})
    save_text(tmp_path / "t.txt", "é")
    assert sorted(os.listdir(tmp_path)) == ["out", "t.txt"]
    with pytest.raises(ir.DlvmError) as e:
        save_npz(Path("/dev/full"), {"x": np.zeros(10)}, what="checkpoint")
    assert str(e.value) == "cannot write checkpoint '/dev/full': no space left on the device"
