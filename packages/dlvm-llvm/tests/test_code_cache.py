"""The disk cache loads only whole entries: a damaged one, of any kind, is compiled again
and rewritten, with one warning line that names it, and never reaches LLVM (which trusts an
object file it loads: damaged bytes crash the process or run wrong code)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.llvm.codegen import jit

SOURCE = """
func @scale: (<_ x f32>, f32) -> <_ x f32> {
'entry(%x: <_ x f32>, %k: f32):
    %y = multiply %x: <_ x f32>, %k: f32
    return %y: <_ x f32>
}
"""
OTHER = SOURCE.replace("multiply", "add")
X = np.arange(5, dtype=np.float32)


def entry_files(folder: Path) -> tuple[Path, Path]:
    (obj,) = (folder / "llvm-cpu").glob("*.o")
    return obj, obj.with_suffix(".json")


def run(source: str = SOURCE) -> np.ndarray:
    return ir.compile(ir.parse(source), "llvm-cpu")["scale"](X, np.float32(3))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One cache holding the entry of `SOURCE`, one holding that of `OTHER`, made once."""
    folders = {}
    with pytest.MonkeyPatch.context() as mp:
        for name, source in (("scale", SOURCE), ("other", OTHER)):
            folders[name] = tmp_path_factory.mktemp(name)
            mp.setenv(jit.CACHE_ENV, str(folders[name]))
            run(source)
    return folders


@pytest.fixture
def cache(pristine: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the pristine cache of `SOURCE`, in use."""
    shutil.copytree(pristine["scale"], tmp_path / "cache")
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiled: list[str] = []
    emit = jit.emit

    def counted(text: str, what: str, opt: int = 3) -> bytes | str:
        compiled.append(what)
        return emit(text, what, opt)

    monkeypatch.setattr(jit, "emit", counted)
    return compiled


def rewrite_json(path: Path, change: Callable[[dict[str, object]], None]) -> None:
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info))


def truncated(obj: Path, meta: Path, other: Path) -> None:
    obj.write_bytes(obj.read_bytes()[:100])


def same_length_other_bytes(obj: Path, meta: Path, other: Path) -> None:
    data = obj.read_bytes()
    obj.write_bytes(np.random.default_rng(0).bytes(len(data)))


def flipped_bytes(obj: Path, meta: Path, other: Path) -> None:
    data = bytearray(obj.read_bytes())
    for k in range(len(data) // 3, len(data), 97):
        data[k] ^= 0xFF
    obj.write_bytes(bytes(data))


def another_entrys_object(obj: Path, meta: Path, other: Path) -> None:
    shutil.copyfile(entry_files(other)[0], obj)


def another_entry_under_this_key(obj: Path, meta: Path, other: Path) -> None:
    other_obj, other_meta = entry_files(other)
    shutil.copyfile(other_obj, obj)
    shutil.copyfile(other_meta, meta)


def missing_digest(obj: Path, meta: Path, other: Path) -> None:
    rewrite_json(meta, lambda info: info.pop("digest"))


def damaged_digest(obj: Path, meta: Path, other: Path) -> None:
    rewrite_json(meta, lambda info: info.update(digest="0" * 64))


def edited_description(obj: Path, meta: Path, other: Path) -> None:
    rewrite_json(meta, lambda info: info["helpers"].update(release="elsewhere"))


def description_not_json(obj: Path, meta: Path, other: Path) -> None:
    meta.write_bytes(b"\x00\xff not json")


def description_nested_too_deep(obj: Path, meta: Path, other: Path) -> None:
    meta.write_text("[" * 100_000)


def object_is_a_folder(obj: Path, meta: Path, other: Path) -> None:
    obj.unlink()
    obj.mkdir()


def description_is_a_fifo(obj: Path, meta: Path, other: Path) -> None:
    meta.unlink()
    os.mkfifo(meta)


DAMAGE = [truncated, same_length_other_bytes, flipped_bytes, another_entrys_object,
          another_entry_under_this_key, missing_digest, damaged_digest, edited_description,
          description_not_json, description_nested_too_deep, object_is_a_folder,
          description_is_a_fifo]
# damage that leaves something the cache cannot replace (it is compiled again each time)
STAYS = {object_is_a_folder, description_is_a_fifo}


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
def test_a_damaged_entry_is_compiled_again_with_one_warning(
        damage: Callable[[Path, Path, Path], None], cache: Path, pristine: dict[str, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    obj, meta = entry_files(cache)
    damage(obj, meta, pristine["other"])
    compiled = count_compiles(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(run(), X * 3)
    assert compiled == ["jit"]
    messages = [str(w.message) for w in caught if issubclass(w.category, jit.CacheWarning)]
    assert len(messages) == 1 and "damaged" in messages[0], messages
    assert "\n" not in messages[0]
    if damage not in STAYS:  # rewritten whole: the next executable loads it
        np.testing.assert_array_equal(run(), X * 3)
        assert compiled == ["jit"]


def test_a_whole_entry_loads_without_llvm_or_warning(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = count_compiles(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(run(), X * 3)
    assert compiled == []


def test_a_missing_file_is_a_quiet_miss(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An object without its description is what a process that is still writing the
    entry leaves: nothing to warn about."""
    entry_files(cache)[1].unlink()
    compiled = count_compiles(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(run(), X * 3)
    assert compiled == ["jit"]


def test_the_digest_covers_the_key_the_object_and_the_description() -> None:
    info = {"abi": {"symbol": "f"}, "object_bytes": 3}
    digest = jit.entry_digest("k1", b"abc", info)
    assert digest == jit.entry_digest("k1", b"abc", dict(info))
    assert len({digest, jit.entry_digest("k2", b"abc", info),
                jit.entry_digest("k1", b"abd", info),
                jit.entry_digest("k1", b"abc", {**info, "abi": {"symbol": "g"}})}) == 4


def test_a_symbol_missing_from_compiled_code_is_a_clear_error() -> None:
    engine = jit.Engine()
    with pytest.raises(ir.DlvmError, match="defines no symbol 'nowhere'"):
        engine.address("nowhere")
