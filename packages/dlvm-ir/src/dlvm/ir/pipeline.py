"""Pipeline text: `differentiation,cse,inline{threshold=40},O2`.

Elements are pass names or named pipelines, each with optional
`{key=value key=value}` options (list values are comma-separated, strings
may be quoted). Option values are converted to the types of the pass's
dataclass fields.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .passes import Pass, set_registered_name
from .plugin import NotedError, Registry, RegistryError, failed_plugin_notes, registry

_NAME = re.compile(r"[A-Za-z0-9_.\-]+(?::[A-Za-z0-9_.\-]+)?")  # or plugin:name
MAX_EXPANSION_DEPTH = 16


class PipelineError(NotedError):
    """Bad pipeline text, an unknown pass or a bad option; `notes` name the plugins that
    failed to load when a name is unknown."""

    def __init__(self, message: str, text: str = "", column: int | None = None, *,
                 notes: Sequence[str] = ()) -> None:
        if column is not None:
            message = f"pipeline column {column + 1}: {message}"
        super().__init__(message, notes=notes)
        self.text = text
        self.column = column


@dataclass(frozen=True)
class PassSpec:
    name: str
    options: dict[str, str]
    column: int = 0


def parse_pipeline(text: str) -> list[PassSpec]:
    """Split pipeline text into pass names with their raw option strings."""
    specs: list[PassSpec] = []
    i, n = 0, len(text)

    def skip_ws() -> None:
        nonlocal i
        while i < n and text[i].isspace():
            i += 1

    skip_ws()
    if i == n:
        return specs
    while True:
        skip_ws()
        m = _NAME.match(text, i)
        if m is None:
            found = repr(text[i]) if i < n else "end of text"
            raise PipelineError(f"expected a pass name, found {found}", text, i)
        start, name, i = i, m.group(), m.end()
        options: dict[str, str] = {}
        skip_ws()
        if i < n and text[i] == "{":
            i += 1
            while True:
                skip_ws()
                if i < n and text[i] == "}":
                    i += 1
                    break
                km = _NAME.match(text, i)
                if km is None:
                    raise PipelineError(f"expected an option name in '{name}{{…}}'", text, i)
                key, i = km.group(), km.end()
                if i >= n or text[i] != "=":
                    raise PipelineError(f"expected '=' after option '{key}'", text, i)
                i += 1
                value, i = _option_value(text, i)
                if key in options:
                    raise PipelineError(f"option '{key}' given twice", text, km.start())
                options[key] = value
        specs.append(PassSpec(name, options, start))
        skip_ws()
        if i == n:
            return specs
        if text[i] != ",":
            raise PipelineError(f"expected ',' between passes, found {text[i]!r}", text, i)
        i += 1


def _option_value(text: str, i: int) -> tuple[str, int]:
    n = len(text)
    if i < n and text[i] == '"':
        j = text.find('"', i + 1)
        if j < 0:
            raise PipelineError("unterminated quoted option value", text, i)
        return text[i + 1: j], j + 1
    j = i
    while j < n and not text[j].isspace() and text[j] != "}":
        j += 1
    if j == n:
        raise PipelineError("expected '}' to close the options", text, n)
    return text[i:j], j


def convert_option(value: Any, hint: Any, what: str) -> Any:
    """Convert a text (or TOML) option value to the type of a pass field."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value in (None, "none", "None") and len(args) < len(typing.get_args(hint)):
            return None
        return convert_option(value, args[0], what)
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(hint) or (str,)
        items = value if isinstance(value, list | tuple) else [
            s for s in str(value).split(",") if s != ""]
        out = [convert_option(v, inner, what) for v in items]
        return out if origin is list else tuple(out)
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            text = str(value).lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError
        if hint is int:
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if hint is float:
            return float(value)
        if hint is str:
            return str(value)
    except (TypeError, ValueError):
        name = getattr(hint, "__name__", str(hint))
        raise PipelineError(f"{what}: expected {name}, found {value!r}") from None
    return value


def make_pass(name: str, options: dict[str, Any], reg: Registry | None = None) -> Pass:
    """Instantiate a registered pass with options (text or already-typed values); it is
    shown by the name it is registered under (`Registry.display_name`)."""
    reg = reg or registry()
    entry = reg.entry("pass", name)
    types_ = entry.load().option_types()
    kwargs = {}
    for key, value in options.items():
        if key not in types_:
            known = ", ".join(types_) or "none"
            raise PipelineError(f"pass '{name}' has no option '{key}' (options: {known})")
        kwargs[key] = convert_option(value, types_[key], f"option '{key}' of pass '{name}'")
    made: Pass = entry.create(**kwargs)
    set_registered_name(made, reg.display_name(entry))
    return made


def build_pipeline(text: str, reg: Registry | None = None, _depth: int = 0) -> list[Pass]:
    """Passes for pipeline text, with named pipelines expanded."""
    reg = reg or registry()
    if _depth > MAX_EXPANSION_DEPTH:
        raise PipelineError("named pipelines expand into themselves")
    passes: list[Pass] = []
    for spec in parse_pipeline(text):
        if reg.has("pipeline", spec.name):
            if spec.options:
                raise PipelineError(f"named pipeline '{spec.name}' takes no options", text,
                                    spec.column)
            body = reg.entry("pipeline", spec.name).load()
            passes.extend(build_pipeline(body() if callable(body) else body, reg, _depth + 1))
            continue
        if not reg.has("pass", spec.name):
            message = reg.unknown("pass", spec.name)
            pipelines = reg.names("pipeline")
            if pipelines and "; known: " in message:
                message += f"; pipelines: {', '.join(pipelines)}"
            raise PipelineError(message, text, spec.column, notes=failed_plugin_notes(reg))
        try:
            passes.append(make_pass(spec.name, spec.options, reg))
        except RegistryError as e:
            raise PipelineError(e.message, text, spec.column, notes=e.notes) from None
    return passes
