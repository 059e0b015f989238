"""Reading and validating a pipeline TOML file into a `RunSpec`, before any work.

Every problem is collected as a `Problem` naming the key; `SpecError` prints them
as `FILE:LINE:COL: error: key: message`, one line each.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir

from .locate import key_positions, position
from .schema import ACTIONS, INITS, SCHEMA, TOP_LEVEL, Key

KeyPath = tuple[str | int, ...]


def dotted(path: KeyPath) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


@dataclass
class Problem:
    path: KeyPath
    message: str


class SpecError(ir.DlvmError):
    """Every problem of a pipeline file, one `FILE:LINE:COL: error: …` line each."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def format_problems(file: Path, problems: list[Problem], text: str,
                    overridden: set[KeyPath]) -> list[str]:
    positions = key_positions(text)
    lines = []
    for p in problems:
        if any(p.path[:len(o)] == o for o in overridden):
            where = f"--set {dotted(p.path)}"
        else:
            pos = position(positions, p.path) if p.path else None
            where = f"{file}:{pos[0]}:{pos[1]}" if pos else str(file)
        key = f"{dotted(p.path)}: " if p.path else ""
        lines.append(f"{where}: error: {key}{p.message}")
    return lines


@dataclass
class TrainSpec:
    step: str
    parameters: list[str]
    init: dict[str, str]
    init_seed: int
    init_scale: float
    load: Path | None
    batch_size: int
    epochs: int
    learning_rate: float
    decay: float
    shuffle_seed: int
    checkpoint: Path | None
    metrics: Path | None
    evaluate: str | None
    metric: str


@dataclass
class DataSpec:
    path: Path
    inputs: str
    labels: str
    scale: float
    one_hot: int | None
    test_fraction: float
    split_seed: int


@dataclass
class CallSpec:
    function: str
    parameters: Path | None
    args: list[tuple[Path, str | None]]
    output: Path | None


@dataclass
class EmitSpec:
    what: str
    output: Path


@dataclass
class RunSpec:
    file: Path
    module: ir.Module
    pipeline: str
    target: str
    target_options: dict[str, Any]
    emit: EmitSpec | None = None
    call: CallSpec | None = None
    data: DataSpec | None = None
    train: TrainSpec | None = None
    resolved: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """`target.name=nvptx` → (("target", "name"), "nvptx"); the value is read as TOML."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ir.DlvmError(f"--set '{text}': expected KEY=VALUE, e.g. target.name=interp")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return tuple(k.strip() for k in key.split(".")), value


def apply_override(doc: dict[str, Any], path: KeyPath, value: Any) -> None:
    node = doc
    for k in path[:-1]:
        nxt = node.setdefault(str(k), {})
        if not isinstance(nxt, dict):
            raise ir.DlvmError(f"--set {dotted(path)}: '{k}' is not a table")
        node = nxt
    node[str(path[-1])] = value


# ---------------------------------------------------------------- the loader


class Loader:
    """Checks a parsed document against SCHEMA, then against the module and the data."""

    def __init__(self, file: Path, doc: dict[str, Any]) -> None:
        self.file = file
        self.base = file.resolve().parent
        self.doc = doc
        self.problems: list[Problem] = []

    def problem(self, path: KeyPath, message: str) -> None:
        self.problems.append(Problem(path, message))

    # ---- shape of the document

    def check_table(self, table: dict[str, Any], schema: str, path: KeyPath) -> None:
        keys = SCHEMA[schema]
        for name, value in table.items():
            spec = keys.get(name)
            if spec is None:
                self.unknown((*path, name), name, list(keys))
                continue
            self.check_value(spec, value, (*path, name))
        for name, spec in keys.items():
            if spec.required and name not in table:
                self.problem(path, f"missing required key '{name}' ({spec.help})")
        if schema == "passes.list" or schema not in ("passes", "train"):
            return
        if schema == "passes" and isinstance(table.get("list"), list):
            for i, item in enumerate(table["list"]):
                if isinstance(item, dict):
                    self.check_table(item, "passes.list", (*path, "list", i))
                else:
                    self.problem((*path, "list", i), "expected a table {name = …}")
        if schema == "train" and isinstance(table.get("evaluate"), dict):
            self.check_table(table["evaluate"], "train.evaluate", (*path, "evaluate"))

    def unknown(self, path: KeyPath, name: str, known: list[str]) -> None:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(known)})"
        self.problem(path, f"unknown key '{name}'{hint}")

    def check_value(self, spec: Key, value: Any, path: KeyPath) -> None:
        ok = isinstance(value, spec.types) and not (
            isinstance(value, bool) and bool not in spec.types)
        if not ok:
            names = " or ".join(_type_name(t) for t in spec.types)
            self.problem(path, f"expected {names}, found {_type_name(type(value))} "
                         f"{_show(value)}")
            return
        if spec.choices and isinstance(value, str) and value not in spec.choices:
            self.problem(path, f"'{value}' is not one of {', '.join(spec.choices)}")
        if spec.minimum is not None and isinstance(value, int | float) and value < spec.minimum:
            self.problem(path, f"must be at least {spec.minimum:g}, found {value}")
        if spec.is_path and isinstance(value, str) and spec.must_exist:
            self.existing(value, path)

    def existing(self, value: str, path: KeyPath) -> Path | None:
        p = self.path(value.split(":", 1)[0] if value.count(":") == 1 and
                      not Path(value).exists() else value)
        if not p.is_file():
            self.problem(path, f"file '{p}' does not exist")
            return None
        return p

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base / p

    # ---- the whole file

    def load(self, resume: bool) -> RunSpec | None:
        doc = self.doc
        for name, value in doc.items():
            if name not in TOP_LEVEL:
                self.unknown((name,), name, list(TOP_LEVEL))
            elif not isinstance(value, dict):
                self.problem((name,), f"expected a table [{name}], found {_show(value)}")
            else:
                self.check_table(value, name, (name,))
        if "module" not in doc:
            self.problem((), "missing table [module] (the module to compile)")
        if not any(a in doc for a in ACTIONS):
            self.problem((), "nothing to do: add [emit], [call] or [train]")
        if "train" in doc and "data" not in doc:
            self.problem(("train",), "training needs a [data] table")
        if self.problems:
            return None
        module = self.read_module()
        pipeline = self.pipeline_text()
        target, options = self.target()
        if module is None or self.problems:
            return None
        spec = RunSpec(self.file, module, pipeline, target, options)
        spec.emit = self.emit_spec(target)
        spec.call = self.call_spec(module)
        if "data" in doc:
            spec.data = self.data_spec()
        if "train" in doc and spec.data is not None:
            spec.train = self.train_spec(module, spec.data, resume)
        if self.problems:
            return None
        spec.resolved = self.resolved(spec)
        return spec

    def read_module(self) -> ir.Module | None:
        table = self.doc["module"]
        path = self.path(table["path"])
        frontend = table.get("frontend")
        try:
            if frontend is not None:
                entry = ir.registry().entry("frontend", frontend)
                module = entry.load()(str(path))
            else:
                from dlvm.cli.inputs import frontend_for

                module = frontend_for(str(path))(str(path))
            ir.verify(module)
        except ir.DiagnosticError:
            raise  # the module's own diagnostics, with their own locations
        except ir.DlvmError as e:
            self.problem(("module", "frontend" if frontend else "path"), str(e))
            return None
        return module

    def pipeline_text(self) -> str:
        table = self.doc.get("passes", {})
        if "pipeline" in table and "list" in table:
            self.problem(("passes",), "give either 'pipeline' or 'list', not both")
        if "list" in table:
            parts = []
            for item in table["list"]:
                opts = ",".join(f"{k}={_option(v)}" for k, v in item.get("options", {}).items())
                parts.append(item["name"] + (f"{{{opts}}}" if opts else ""))
            text, where = ",".join(parts), ("passes", "list")
        else:
            text, where = table.get("pipeline", ""), ("passes", "pipeline")
        if text:
            try:
                ir.build_pipeline(text)
            except ir.DlvmError as e:
                self.problem(where, str(e))
        return text

    def target(self) -> tuple[str, dict[str, Any]]:
        table = self.doc.get("target", {})
        reg = ir.registry()
        name = table.get("name") or reg.default_target()
        try:
            reg.entry("target", name)
        except ir.DlvmError as e:
            self.problem(("target", "name"), str(e))
        return name, dict(table.get("options", {}))

    def emit_spec(self, target: str) -> EmitSpec | None:
        table = self.doc.get("emit")
        if table is None:
            return None
        what = table.get("what", "ir")
        if what != "ir":
            self.problem(("emit", "what"), f"emitting '{what}' needs a target that produces it "
                         f"(target '{target}' does not); install dlvm-llvm or dlvm-llvm-gpu")
        return EmitSpec(what, self.path(table["output"]))

    def function(self, module: ir.Module, name: str, path: KeyPath) -> ir.Function | None:
        fn = module.function(name.removeprefix("@"))
        if fn is None:
            known = [f.name for f in module.functions if f.name]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.problem(path, f"the module has no function '@{name}'{hint}")
        return fn

    def call_spec(self, module: ir.Module) -> CallSpec | None:
        table = self.doc.get("call")
        if table is None:
            return None
        fn = self.function(module, table["function"], ("call", "function"))
        params = self.path(table["parameters"]) if "parameters" in table else None
        raw = table.get("args", [])
        items = [raw] if isinstance(raw, str) else raw
        args: list[tuple[Path, str | None]] = []
        for i, item in enumerate(items):
            where = ("call", "args") if isinstance(raw, str) else ("call", "args", i)
            if not isinstance(item, str):
                self.problem(where, f"expected a file name, found {_show(item)}")
                continue
            file, _, key = item.partition(":") if item.count(":") == 1 else (item, "", "")
            p = self.path(file)
            if not p.is_file():
                self.problem(where, f"file '{p}' does not exist")
            args.append((p, key or None))
        spec = CallSpec(table["function"].removeprefix("@"), params, args,
                        self.path(table["output"]) if "output" in table else None)
        if fn is not None and not self.problems:
            from .actions import call_arguments

            try:
                call_arguments(spec, fn)
            except ir.DlvmError as e:
                self.problem(("call", "args"), str(e))
        return spec

    def data_spec(self) -> DataSpec | None:
        t = self.doc["data"]
        spec = DataSpec(self.path(t["path"]), t.get("inputs", "inputs"), t.get("labels", "labels"),
                        float(t.get("scale", 1.0)), t.get("one_hot"),
                        float(t.get("test_fraction", 0.2)), int(t.get("split_seed", 0)))
        if spec.test_fraction >= 1:
            self.problem(("data", "test_fraction"), "must be below 1")
        try:
            with np.load(spec.path) as npz:
                for key, name in (("inputs", spec.inputs), ("labels", spec.labels)):
                    if name not in npz.files:
                        self.problem(("data", key), f"'{spec.path.name}' has no array '{name}' "
                                     f"(it has {', '.join(npz.files)})")
                if self.problems:
                    return None
                self.shapes = (npz[spec.inputs].shape, npz[spec.labels].shape,
                               npz[spec.labels].dtype)
        except (OSError, ValueError) as e:
            self.problem(("data", "path"), f"cannot read '{spec.path}': {e}")
            return None
        inputs, labels, dtype = self.shapes
        if inputs[0] != labels[0]:
            self.problem(("data", "labels"), f"{labels[0]} labels for {inputs[0]} inputs")
        if spec.one_hot is not None and (len(labels) != 1 or dtype.kind not in "iu"):
            self.problem(("data", "one_hot"), f"one_hot needs integer labels of one dimension, "
                         f"found {dtype} of shape {labels}")
        return spec

    def train_spec(self, module: ir.Module, data: DataSpec, resume: bool) -> TrainSpec | None:
        t = self.doc["train"]
        step = self.function(module, t["step"], ("train", "step"))
        evaluate = t.get("evaluate", {})
        eval_fn = (self.function(module, evaluate["function"], ("train", "evaluate", "function"))
                   if "function" in evaluate else None)
        if step is None or (evaluate and eval_fn is None):
            return None
        n = len(step.type_.arguments) - 3
        if n < 1:
            self.problem(("train", "step"), f"'@{step.name}' must take (params…, inputs, "
                         f"targets, learning_rate); it takes {len(step.type_.arguments)} "
                         "arguments")
            return None
        names = t.get("parameters") or parameter_names(step, n)
        if len(names) != n:
            self.problem(("train", "parameters"), f"{len(names)} names for the {n} parameters "
                         f"of '@{step.name}'")
            return None
        init = t.get("init", "glorot")
        inits = {name: init for name in names} if isinstance(init, str) else dict(init)
        for name, scheme in inits.items():
            if name not in names:
                self.problem(("train", "init", name), f"'{name}' is not a parameter "
                             f"({', '.join(names)})")
            elif scheme not in INITS:
                self.problem(("train", "init", name), f"'{scheme}' is not one of "
                             f"{', '.join(INITS)}")
        for name in names:
            inits.setdefault(name, "glorot")
        spec = TrainSpec(
            step.name or t["step"], list(names), inits, int(t.get("init_seed", 0)),
            float(t.get("init_scale", 0.01)),
            self.path(t["load"]) if "load" in t else None, int(t.get("batch_size", 32)),
            int(t["epochs"]), float(t["learning_rate"]), float(t.get("decay", 0.0)),
            int(t.get("shuffle_seed", 0)),
            self.path(t["checkpoint"]) if "checkpoint" in t else None,
            self.path(t["metrics"]) if "metrics" in t else None,
            eval_fn.name if eval_fn is not None else None, evaluate.get("metric", "accuracy"))
        from .train import check_signatures

        for path, message in check_signatures(module, spec, data, self.shapes):
            self.problem(path, message)
        if resume:
            if spec.checkpoint is None:
                self.problem(("train", "checkpoint"), "--resume needs a checkpoint file")
            elif not spec.checkpoint.is_file():
                self.problem(("train", "checkpoint"), f"--resume: '{spec.checkpoint}' does not "
                             "exist yet")
        return spec

    def resolved(self, spec: RunSpec) -> dict[str, Any]:
        """The pipeline as it will run, every default filled in and every path absolute."""
        out: dict[str, Any] = {"module": {"path": str(self.path(self.doc["module"]["path"]))},
                               "passes": {"pipeline": spec.pipeline},
                               "target": {"name": spec.target, "options": spec.target_options}}
        for name in ("emit", "call", "data", "train"):
            value = getattr(spec, name)
            if value is not None:
                out[name] = {k: (str(v) if isinstance(v, Path) else v)
                             for k, v in vars(value).items()}
        return out


def parameter_names(fn: ir.Function, n: int) -> list[str]:
    """The names of `fn`'s first `n` arguments in the IR (`%w1` → "w1"), else param0…"""
    if fn.is_declaration:
        return [f"param{i}" for i in range(n)]
    return [a.name or f"param{i}" for i, a in enumerate(fn.entry.arguments[:n])]


def _option(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _type_name(t: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
            dict: "a table", list: "an array"}.get(t, t.__name__)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def load_spec(file: str | Path, overrides: tuple[str, ...] | list[str] = (),
              resume: bool = False) -> RunSpec:
    """Read, override and validate a pipeline file; raises SpecError listing every problem."""
    path = Path(file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ir.DlvmError(f"cannot read '{path}': {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ir.DlvmError(f"'{path}' is not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        where = f"{path}:{at[1]}:{at[2]}" if at else str(path)
        message = str(e).split(" (at ")[0]
        raise SpecError([f"{where}: error: invalid TOML: {message}"]) from None
    overridden: set[KeyPath] = set()
    for item in overrides:
        key, value = parse_override(item)
        apply_override(doc, key, value)
        overridden.add(key)
    loader = Loader(path, doc)
    spec = loader.load(resume)
    if spec is None:
        raise SpecError(format_problems(path, loader.problems, text, overridden))
    return spec
