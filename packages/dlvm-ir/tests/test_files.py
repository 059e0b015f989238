"""`dlvm.ir.files`: every input is read within a cap, every output is checked before any work
and written whole or not at all, and every refusal is one line that names the file."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

import dlvm.ir as ir
from dlvm.ir.files import (
    MAX_TEXT_BYTES,
    check_output,
    open_input,
    output_problem,
    path_problem,
    read_input,
    read_stream,
    read_text,
    remove_stale_temporary,
    same_file,
    shown,
    temporary,
    write_atomic,
)


def refusal(action: object, *args: object, **kwargs: object) -> str:
    """The one-line message of the DlvmError that `action(*args, **kwargs)` raises."""
    with pytest.raises(ir.DlvmError) as e:
        action(*args, **kwargs)  # type: ignore[operator]
    message = str(e.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------- reading


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "m.dl"
    path.write_bytes(b"x" * 3_000_000)
    assert read_input(path) == b"x" * 3_000_000
    assert read_input(str(path), limit=None) == b"x" * 3_000_000
    with open_input(path) as f:
        assert f.read() == b"x" * 3_000_000


def test_text_is_utf8_without_its_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "t.tel"
    path.write_bytes(b"\xef\xbb\xbfmodule \xc3\xa9")
    assert read_text(path) == "module é"
    path.write_bytes(b"ok\xff")
    assert refusal(read_text, path, what="TEL source") == (
        f"cannot read TEL source '{path}': it is not UTF-8 text (invalid start byte at byte 2)")


@pytest.mark.parametrize(("name", "why"), [
    ("absent.dl", "it does not exist"),
    (".", "it is a directory, not a file"),
    ("file.dl/inner.dl", "a part of its path is a file, not a directory"),
    ("n" * 300, "its name is too long"),
    ("nul\0.dl", "its name holds a NUL character"),
    ("loop", "its symbolic links form a loop"),
])
def test_every_unreadable_path_is_refused_in_one_line_naming_it(tmp_path: Path, name: str,
                                                                 why: str) -> None:
    (tmp_path / "file.dl").write_text("")
    os.symlink("loop", tmp_path / "loop")
    path = str(tmp_path / name)
    for read in (read_input, read_text):
        assert refusal(read, path, what="module") == (
            f"cannot read module '{shown(path)}': {why}")
    with pytest.raises(ir.DlvmError, match="cannot read data file"), open_input(
            path, what="data file", limit=None):
        pass


def test_a_file_nobody_may_read_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "secret.dl"
    path.write_text("")
    path.chmod(0)
    assert refusal(read_input, path) == f"cannot read file '{path}': permission denied"


def test_a_regular_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.dl"
    path.write_bytes(b"x" * 2049)
    assert read_input(path, limit=2049) == b"x" * 2049
    assert refusal(read_input, path, what="module", limit=2048) == (
        f"cannot read module '{path}': it holds 2.0 KiB, more than the 2 KiB limit for one "
        "module")


def test_an_endless_device_is_read_up_to_the_limit_only() -> None:
    assert refusal(read_input, "/dev/zero", what="module", limit=3 << 20) == (
        "cannot read module '/dev/zero': it holds more than the 3 MiB limit for one module")
    assert MAX_TEXT_BYTES == 256 << 20


def test_without_a_limit_only_regular_files_are_read() -> None:
    assert refusal(read_input, "/dev/zero", what="data file", limit=None) == (
        "cannot read data file '/dev/zero': it is not a regular file (a device, pipe or "
        "socket); give a file")


def test_files_that_claim_no_size_are_read_to_their_end() -> None:
    assert b"Name:" in read_input("/proc/self/status")


def test_a_pipe_is_read_to_its_end_within_the_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"printf 'abc' > '{fifo}'"])
    try:
        with open_input(fifo) as f:
            assert f.read() == b"abc"
    finally:
        writer.wait(10)


def test_a_stream_is_capped_too() -> None:
    read, write = os.pipe()
    os.write(write, b"y" * 5000)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        assert refusal(read_stream, stream, limit=4096) == (
            "cannot read input '<stdin>': it holds more than the 4 KiB limit for one input")
    read, write = os.pipe()
    os.write(write, b"ok")
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        assert read_stream(stream) == b"ok"


@pytest.mark.parametrize(("path", "why"), [
    ("a" * 5_000_000, "its name is too long"),
    ("/".join(["d"] * 2100), "its name is too long"),
    ("n" * 256, "its name is too long"),
    ("x\0y", "its name holds a NUL character"),
    ("/".join(["d" * 255] * 15), None),
])
def test_names_no_file_can_have_are_found_without_the_file_system(path: str,
                                                                   why: str | None) -> None:
    assert path_problem(path) == why


def test_a_very_long_path_is_shortened_in_messages() -> None:
    path = "/" + "d" * 5_000_000
    message = refusal(read_input, path)
    assert len(message) < 300 and "(5000001 characters)" in message


# ---------------------------------------------------------------- checking outputs


def test_an_output_that_is_an_input_is_refused_by_any_name(tmp_path: Path) -> None:
    model = tmp_path / "model.dl"
    model.write_text("x")
    os.symlink(model, tmp_path / "link.dl")
    os.link(model, tmp_path / "hard.dl")
    (tmp_path / "sub").mkdir()
    for output in (model, tmp_path / "link.dl", tmp_path / "hard.dl",
                   tmp_path / "sub" / ".." / "model.dl"):
        message = refusal(check_output, output, inputs=[None, model])
        assert message.startswith(f"cannot write output '{output}': it is also an input")
    absent = tmp_path / "new.dl"
    assert "it is also an input" in refusal(check_output, absent, inputs=[absent])
    check_output(tmp_path / "other.dl", inputs=[model])


def test_outputs_that_cannot_be_written_are_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "ro.dl").write_text("")
    (tmp_path / "ro.dl").chmod(0o444)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    (tmp_path / "busy.dl.tmp").mkdir()
    cases = {
        tmp_path: "it is a directory",
        tmp_path / "file" / "x" / "y.dl": f"'{tmp_path / 'file'}' is not a directory",
        tmp_path / "ro.dl": "it is read-only",
        tmp_path / "ro" / "new" / "x.dl": f"cannot create files in '{tmp_path / 'ro'}' (it is "
                                          "read-only)",
        tmp_path / ("n" * 252): "its name is too long",
        tmp_path / "busy.dl": f"'{tmp_path / 'busy.dl.tmp'}' (its temporary file) is in the way",
        "": "the name is empty",
    }
    try:
        for path, why in cases.items():
            assert output_problem(path) == why, path
            assert refusal(check_output, path, what="checkpoint") == (
                f"cannot write checkpoint '{shown(path)}': {why}")
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_outputs_that_can_be_written_pass(tmp_path: Path) -> None:
    (tmp_path / "old.dl").write_text("")
    for path in (tmp_path / "old.dl", tmp_path / "new.dl", tmp_path / "a" / "b" / "c.npz",
                 "/dev/null"):
        check_output(path)


# ---------------------------------------------------------------- writing


def test_outputs_are_written_whole_from_bytes_text_or_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "out.txt"
    write_atomic(path, "é\n")
    assert path.read_bytes() == "é\n".encode()
    write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    write_atomic(str(path), lambda f: f.write(b"streamed"))
    assert path.read_bytes() == b"streamed"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.txt"]


def test_a_failing_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "params.npz"
    path.write_bytes(b"good")

    def fails(f: object) -> None:
        raise OSError(28, "No space left on device")

    assert refusal(write_atomic, path, fails, what="checkpoint") == (
        f"cannot write checkpoint '{path}': no space left on the device")
    assert path.read_bytes() == b"good" and not Path(temporary(path)).exists()

    def interrupted(f: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, interrupted)
    assert path.read_bytes() == b"good" and not Path(temporary(path)).exists()


def test_a_full_device_is_a_one_line_error() -> None:
    assert refusal(write_atomic, "/dev/full", b"x" * 10, what="metrics") == (
        "cannot write metrics '/dev/full': no space left on the device")


def test_a_replaced_file_keeps_its_mode_and_a_link_is_written_through(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("old")
    path.chmod(0o750)
    os.symlink(path, tmp_path / "link")
    write_atomic(tmp_path / "link", "new")
    assert (tmp_path / "link").is_symlink() and path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750


def test_devices_and_pipes_are_written_in_place() -> None:
    write_atomic("/dev/null", "anything")
    read, write = os.pipe()
    try:
        write_atomic(f"/proc/self/fd/{write}", "through /dev/stdout")  # a link to pipe:[…]
        assert os.read(read, 100) == b"through /dev/stdout"
    finally:
        os.close(read)
        os.close(write)


def test_a_killed_writes_temporary_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    assert not remove_stale_temporary(path)
    Path(temporary(path)).write_text("half")
    assert remove_stale_temporary(path) and not Path(temporary(path)).exists()


def test_same_file_sees_links_and_dots(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("")
    os.symlink(tmp_path / "a", tmp_path / "b")
    assert same_file(tmp_path / "a", tmp_path / "b")
    assert same_file(tmp_path / "x" / ".." / "new", tmp_path / "new")
    assert same_file(tmp_path / "new", tmp_path / "." / "new")
    assert not same_file(tmp_path / "a", tmp_path / "new")
