"""Where a key of a TOML file is written, for `FILE:LINE:COL` in error messages.

tomllib gives values without positions; this scanner finds the line of each
key from table headers (`[a.b]`, `[[a.b]]`), `key = …` lines (dotted keys too)
and the keys of one-line inline tables. It only has to be right for files
that tomllib accepted.
"""

from __future__ import annotations

import re

Path = tuple[str | int, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"^(\s*)((?:[A-Za-z0-9_-]+|\"[^\"]*\")(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"))*)"
                  r"\s*=")
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_-]+)\s*=")


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip('"') for p in dotted.split(".")]


def key_positions(text: str) -> dict[Path, tuple[int, int]]:
    """Every key path found → (line, column), both from 1."""
    out: dict[Path, tuple[int, int]] = {}
    table: list[str | int] = []
    arrays: dict[tuple[str, ...], int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        header = _HEADER.match(line)
        if header:
            names = _parts(header[2])
            if header[1] == "[[":
                count = arrays.get(tuple(names), -1) + 1
                arrays[tuple(names)] = count
                table = [*names, count]
                out.setdefault(tuple(names), (number, line.index(header[2]) + 1))
            else:
                table = list(names)
            out[tuple(table)] = (number, line.index(header[2]) + 1)
            continue
        key = _KEY.match(line)
        if not key:
            continue
        path = (*table, *_parts(key[2]))
        out[path] = (number, len(key[1]) + 1)
        rest = line[key.end():]
        for inner in _INLINE_KEY.finditer(rest):
            out[(*path, inner[1])] = (number, key.end() + inner.start(1) + 1)
    return out


def position(positions: dict[Path, tuple[int, int]], path: Path) -> tuple[int, int] | None:
    """The position of `path`, or of its nearest written ancestor."""
    for end in range(len(path), 0, -1):
        found = positions.get(tuple(path[:end]))
        if found is not None:
            return found
    return None
