"""`dlvm.cli.run.files`: the one loader of array files and the one writer of outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.cli.run.files import (
    open_npz,
    output_problem,
    read_array,
    read_npz,
    remove_stale_temporary,
    same_file,
    save_npz,
    temporary,
    write_atomic,
)


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
    assert output_problem(tmp_path) == f"'{tmp_path}' is a directory"
    assert output_problem(tmp_path / "f" / "g" / "h") == f"'{tmp_path / 'f'}' is not a directory"
    assert output_problem(tmp_path / "new" / "dir" / "x.npz") is None
    temporary(tmp_path / "y").mkdir()
    assert "(its temporary file) is in the way" in (output_problem(tmp_path / "y") or "")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "keep.txt"
    path.write_text("old")

    def fail(f: IO[bytes]) -> None:
        f.write(b"half")
        raise MemoryError

    with pytest.raises(MemoryError):
        write_atomic(path, fail)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_a_killed_writes_temporary_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "params.npz"
    temporary(path).write_bytes(b"")
    assert remove_stale_temporary(path)
    assert not temporary(path).exists() and not remove_stale_temporary(path)


def test_same_file_follows_links_and_resolves_new_paths(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert same_file(tmp_path / "b", tmp_path / "a")
    assert same_file(tmp_path / "sub" / ".." / "new", tmp_path / "new")
    assert not same_file(tmp_path / "a", tmp_path / "new")
