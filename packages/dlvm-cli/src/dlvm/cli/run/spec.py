"""Reading and validating a pipeline TOML file into a `RunSpec`, before any work.

Every problem is collected as a `Problem` naming the key; `SpecError` prints them as
`FILE:LINE:COL: error: key: message` (`--set KEY: error: …` for an override), one line
each. Whatever can be known without the computation is checked here, so `--dry-run`
finds it too: types down to the elements of arrays, the files read and their arrays,
shapes, dtypes and labels against the functions, target options, and every output path.
Inputs are relative to the pipeline file; outputs to the run's folder (`runs`), which is
chosen here too, so that a dry run shows where a run would write.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import dlvm.ir as ir
from dlvm.cli.inputs import toml_value
from dlvm.cli.toml_text import TomlError, loads
from dlvm.ir import files
from dlvm.ir.plugin import install_hint

from .files import DATA_FILE, input_problem, open_npz, output_problem
from .locate import key_positions, position
from .loss_scale import LARGEST
from .runs import (
    LATEST,
    PIPELINE_RECORD,
    RUN_RECORD,
    RunFolder,
    default_parent,
    describe_runs,
    latest_run,
    name_problem,
    parent_problem,
    timestamp_name,
    written_by,
)
from .schema import ACTIONS, INITS, SCHEMA, TOP_LEVEL, Key

if TYPE_CHECKING:
    from .train import Dataset

KeyPath = tuple[str | int, ...]
PIPELINE_FILE: KeyPath = ()  # the pipeline file itself, among the inputs
RUN_NAME: KeyPath = ("run", "name")
# what an input key names, for messages (and whether a pipe may give it); else a data file
INPUT_KINDS: dict[KeyPath, str] = {("module", "path"): "module"}
MAX_PIPELINE_BYTES = 16 * 1024 * 1024  # a pipeline file holds keys, not data


def dotted(path: KeyPath) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


@dataclass
class Problem:
    path: KeyPath
    message: str
    option: str | None = None  # a command-line option the problem is about, not a key


class SpecError(ir.DlvmError):
    """Every problem of a pipeline file, one `FILE:LINE:COL: error: …` line each, and the
    notes that may explain them (each once), printed after them as `dlvm: note:` lines."""

    def __init__(self, lines: list[str], notes: list[str] | None = None) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.notes = list(dict.fromkeys(notes or ()))


def message_of(e: ir.DlvmError) -> str:
    """An error's own message, without the notes a `NotedError` adds to its text."""
    return e.message if isinstance(e, ir.NotedError) else str(e)


class KeyedError(ir.NotedError):
    """A problem found by a helper, with the key it is about (and notes that may explain
    it, such as a plugin that failed to load)."""

    def __init__(self, path: KeyPath, message: str, *, notes: list[str] | None = None) -> None:
        super().__init__(message, notes=notes or ())
        self.path = path


def format_problems(file: Path, problems: list[Problem], text: str,
                    overridden: list[KeyPath],
                    options: dict[KeyPath, str] | None = None) -> list[str]:
    """One line per problem; `options` names the command-line option (other than `--set`)
    that set a key, e.g. `--name` for run.name."""
    positions = key_positions(text)
    lines = []
    for p in problems:
        if p.option is not None:
            lines.append(f"{p.option}: error: {p.message}")
            continue
        override = blamed_override(p.path, overridden, positions)
        option = (options or {}).get(override) if override is not None else None
        if option is not None:
            lines.append(f"{option}: error: {p.message}")
            continue
        if override is not None:
            where = f"--set {dotted(override)}"
        else:
            pos = position(positions, p.path) if p.path else None
            where = f"{file}:{pos[0]}:{pos[1]}" if pos else str(file)
        key = f"{dotted(p.path)}: " if p.path else ""
        lines.append(f"{where}: error: {key}{p.message}")
    return lines


def blamed_override(path: KeyPath, overridden: list[KeyPath],
                    positions: dict[KeyPath, tuple[int, int]]) -> KeyPath | None:
    """The `--set` a problem comes from: one that set the key or a table above it, or one
    that made the table the problem is about (a table the file does not have)."""
    written = any(k[:len(path)] == path for k in positions) if path else True
    for o in reversed(overridden):
        if path[:len(o)] == o or (not written and o[:len(path)] == path):
            return o
    return None


@dataclass
class DistributedSpec:
    """`[train.distributed]`: the engine that runs the steps, and its workers."""

    engine: str = "local"
    workers: int = 1
    address: str = "local"
    max_failures: int = 3
    allreduce: str = "auto"


@dataclass
class TrainSpec:
    step: str
    parameters: list[str]
    init: dict[str, str]
    init_function: str | None
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
    allow_nonfinite: bool
    distributed: DistributedSpec = field(default_factory=lambda: DistributedSpec())
    loss_scaling: LossScalingSpec | None = None  # train.precision = "f16"
    # found by validation, not keys: the data as the step takes it, and where to start
    dataset: Dataset | None = field(default=None, repr=False)
    initial: dict[str, np.ndarray] | None = field(default=None, repr=False)
    start_epoch: int = field(default=0, repr=False)
    evaluate_parameters: int = field(default=0, repr=False)  # the step's first k


@dataclass
class LossScalingSpec:
    initial: float
    interval: int


@dataclass
class DataSpec:
    path: Path
    inputs: str
    labels: str
    scale: float
    one_hot: int | None
    test_fraction: float
    split_seed: int
    arrays: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)


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
    run: RunFolder | None = None  # where the outputs go; None when nothing is written
    resolved: dict[str, Any] = field(default_factory=dict)
    outputs: list[Path] = field(default_factory=list)


# ---------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """`target.name=nvptx` → (("target", "name"), "nvptx"); the value is read as TOML."""
    key, sep, raw = text.partition("=")
    parts = tuple(k.strip() for k in key.split("."))
    if not sep or not all(parts):
        raise SpecError([f"--set {text}: error: expected KEY=VALUE with a dotted KEY, "
                         "e.g. target.name=interp"])
    try:
        return parts, toml_value(raw)
    except ir.DlvmError as e:
        raise SpecError([f"--set {dotted(parts)}: error: {e}"]) from None


def apply_override(doc: dict[str, Any], path: KeyPath, value: Any) -> None:
    node = doc
    for k in path[:-1]:
        nxt = node.setdefault(str(k), {})
        if not isinstance(nxt, dict):
            raise SpecError([f"--set {dotted(path)}: error: '{k}' is not a table"])
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
        self.notes: list[str] = []
        self.run: RunFolder | None = None

    def problem(self, path: KeyPath, message: str | ir.DlvmError) -> None:
        """A problem with the key it is about; an error's notes are kept for the end."""
        if isinstance(message, ir.NotedError):
            self.notes.extend(message.notes)
        self.problems.append(Problem(path, message if isinstance(message, str)
                                     else message_of(message)))

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
        if schema == "passes" and isinstance(table.get("list"), list):
            for i, item in enumerate(table["list"]):
                if isinstance(item, dict):
                    self.check_table(item, "passes.list", (*path, "list", i))
        if schema == "train" and isinstance(table.get("evaluate"), dict):
            self.check_table(table["evaluate"], "train.evaluate", (*path, "evaluate"))
        if schema == "train" and isinstance(table.get("distributed"), dict):
            self.check_table(table["distributed"], "train.distributed", (*path, "distributed"))

    def unknown(self, path: KeyPath, name: str, known: list[str]) -> None:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(known)})"
        self.problem(path, f"unknown key '{name}'{hint}")

    def check_value(self, spec: Key, value: Any, path: KeyPath) -> None:
        if not self.check_type(spec.types, value, path):
            return
        if isinstance(value, list) and spec.items:
            for i, item in enumerate(value):
                self.check_type(spec.items, item, (*path, i))
        if spec.choices and isinstance(value, str) and value not in spec.choices:
            self.problem(path, f"'{value}' is not one of {', '.join(spec.choices)}")
        if spec.minimum is not None and isinstance(value, int | float) and value < spec.minimum:
            self.problem(path, f"must be at least {spec.minimum:g}, found {value}")
        if spec.is_path and not self.system_takes(value, path):
            return
        if spec.must_exist and isinstance(value, str):
            self.existing(value, path)

    def system_takes(self, value: Any, path: KeyPath) -> bool:
        """Whether every path of a path key (a string, or an array's) could name a file:
        a path of megabytes is refused here, before any work on it."""
        items: list[tuple[KeyPath, str]] = []
        if isinstance(value, str):
            items.append((path, value))
        elif isinstance(value, list):
            items.extend(((*path, i), v) for i, v in enumerate(value) if isinstance(v, str))
        ok = True
        for where, text in items:
            problem = files.path_problem(text)
            if problem is not None:
                self.problem(where, f"'{files.shown(text)}': {problem}")
                ok = False
        return ok

    def check_type(self, types: tuple[type, ...], value: Any, path: KeyPath) -> bool:
        """Whether `value` has one of `types` (and is a finite number, if a number)."""
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join(_type_name(t) for t in types)
            self.problem(path, f"expected {names}, found {_type_name(type(value))} "
                         f"{_show(value)}")
            return False
        if isinstance(value, float) and not math.isfinite(value):
            self.problem(path, f"must be a finite number, found {value}")
            return False
        return True

    def existing(self, value: str, path: KeyPath) -> Path | None:
        p = self.path(value)
        problem = input_problem(p, INPUT_KINDS.get(path[:2], DATA_FILE))
        if problem is not None:
            self.problem(path, problem)
            return None
        return p

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base / p

    def output_path(self, value: str) -> Path:
        """An output: relative to the run's folder (absolute paths stay as they are), with
        `..` taken away lexically, since the run's folder may not exist yet."""
        p = Path(value).expanduser()
        if p.is_absolute() or self.run is None:
            return self.path(value)
        return Path(os.path.normpath(self.run.path / p))

    # ---- the whole file

    def load(self, resume: bool, overwrite: bool = False, dry_run: bool = False
             ) -> RunSpec | None:
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
        if resume and "train" not in doc:
            self.problems.append(Problem((), "nothing to resume: the pipeline has no [train]",
                                         "--resume"))
        if self.problems:
            return None
        self.run = self.run_folder(resume, overwrite, dry_run)
        if self.problems:
            return None
        module = self.read_module()
        pipeline = self.pipeline_text()
        train = doc.get("train", {})
        precision = train.get("precision", "f32")
        if precision != "f32":  # before the user's passes, so before `differentiation`
            lowering = f"mixed-precision{{dtype={precision}}}"
            if precision == "f16":
                lowering += f",loss-scaling{{function={train.get('step', '')}}}"
            pipeline = ",".join(p for p in (lowering, pipeline) if p)
        target, options = self.target()
        if module is None or self.problems:
            return None
        spec = RunSpec(self.file, module, pipeline, target, options, run=self.run)
        spec.emit = self.emit_spec(target)
        spec.call = self.call_spec(module)
        if "data" in doc:
            spec.data = self.data_spec()
        if "train" in doc and spec.data is not None:
            spec.train = self.train_spec(module, spec.data, resume)
        spec.outputs = self.check_outputs(resume, overwrite, dry_run)
        if self.problems:
            return None
        spec.resolved = self.resolved(spec)
        return spec

    def read_module(self) -> ir.Module | None:
        table = self.doc["module"]
        path = self.path(table["path"])
        frontend = table.get("frontend")
        try:
            module = ir.load_module(path, frontend, verify=False)
            for i, item in enumerate(table.get("link", [])):
                if not self.link(module, item, ("module", "link", i)):
                    return None
            ir.verify(module)
        except ir.DiagnosticError:
            raise  # the module's own diagnostics, with their own locations
        except ir.DlvmError as e:
            self.problem(("module", "frontend" if frontend else "path"), e)
            return None
        return module

    def link(self, module: ir.Module, item: str, where: KeyPath) -> bool:
        """Link one file into the module (read by its front end, as the module is)."""
        path = self.path(item)
        problem = input_problem(path, "module")
        if problem is not None:
            self.problem(where, problem)
            return False
        try:
            ir.link(module, ir.load_module(path, verify=False), str(path))
        except ir.DiagnosticError:
            raise
        except ir.DlvmError as e:
            self.problem(where, e)
            return False
        return True

    def pipeline_text(self) -> str:
        table = self.doc.get("passes", {})
        if "pipeline" in table and "list" in table:
            self.problem(("passes",), "give either 'pipeline' or 'list', not both")
        if "list" not in table:
            text = table.get("pipeline", "")
            if text:
                try:
                    ir.build_pipeline(text)
                except ir.DlvmError as e:
                    self.problem(("passes", "pipeline"), e)
            return str(text)
        parts = [self.pipeline_item(item, ("passes", "list", i))
                 for i, item in enumerate(table["list"])]
        return ",".join(p for p in parts if p)

    def pipeline_item(self, item: dict[str, Any], path: KeyPath) -> str:
        """One `passes.list` table as pipeline text, checked on its own so that an error
        names its index, and the option it is about."""
        options = item.get("options", {})
        texts = {}
        for key, value in options.items():
            try:
                texts[key] = option_text(value)
            except ValueError as e:
                self.problem((*path, "options", key), str(e))
        name = item.get("name")
        if not isinstance(name, str) or len(texts) != len(options):
            return ""
        body = " ".join(f"{k}={v}" for k, v in texts.items())
        text = name + (f"{{{body}}}" if body else "")
        try:
            ir.build_pipeline(text)
        except ir.DlvmError as e:
            self.notes.extend(e.notes if isinstance(e, ir.NotedError) else ())
            message = re.sub(r"^pipeline column \d+: ", "", message_of(e))
            self.problem(_item_key(path, message, name, options), message)
        return text

    def target(self) -> tuple[str, dict[str, Any]]:
        from .targets import TargetOptionError, check_target_options

        table = self.doc.get("target", {})
        reg = ir.registry()
        try:
            name = table.get("name") or reg.default_target()
            reg.entry("target", name)
        except ir.DlvmError as e:
            self.problem(("target", "name"), e)
            return str(table.get("name", "")), {}
        options = dict(table.get("options", {}))
        try:
            check_target_options(name, options)
        except TargetOptionError as e:
            path: KeyPath = ("target", "options", e.option) if e.option else ("target",)
            self.problem(path, e)
        return name, options

    def emit_spec(self, target: str) -> EmitSpec | None:
        table = self.doc.get("emit")
        if table is None:
            return None
        what = table.get("what", "ir")
        if what != "ir":
            self.problem(("emit", "what"), f"emitting '{what}' needs a target that produces it "
                         f"(target '{target}' does not); {install_hint('dlvm-llvm')} "
                         f"or {install_hint('dlvm-llvm-gpu')}")
        return EmitSpec(what, self.output_path(table["output"]))

    def function(self, module: ir.Module, name: str, path: KeyPath) -> ir.Function | None:
        fn = module.function(name.removeprefix("@"))
        if fn is None:
            known = [f.name for f in module.functions if f.name]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.problem(path, f"the module has no function '@{name}'{hint}")
        return fn

    def call_items(self) -> list[tuple[KeyPath, Path, str | None]]:
        """`call.args` as (key, file, array name): "x.npy", "x.npz:images", or one .npz."""
        raw = self.doc.get("call", {}).get("args", [])
        items = [raw] if isinstance(raw, str) else raw
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, str):
                continue  # reported by check_value
            where: KeyPath = ("call", "args") if isinstance(raw, str) else ("call", "args", i)
            file, key = item, None
            if ":" in item and not os.path.exists(self.path(item)):
                file, key = item.rsplit(":", 1)
            out.append((where, self.path(file), key or None))
        return out

    def call_spec(self, module: ir.Module) -> CallSpec | None:
        table = self.doc.get("call")
        if table is None:
            return None
        fn = self.function(module, table["function"], ("call", "function"))
        params = self.path(table["parameters"]) if "parameters" in table else None
        args = []
        for where, path, key in self.call_items():
            problem = input_problem(path)
            if problem is not None:
                self.problem(where, problem)
            args.append((path, key))
        spec = CallSpec(table["function"].removeprefix("@"), params, args,
                        self.output_path(table["output"]) if "output" in table else None)
        if fn is not None and not self.problems:
            from .actions import call_arguments

            try:
                call_arguments(spec, fn, module)
            except KeyedError as e:
                self.problem(e.path, e)
            except ir.DlvmError as e:
                self.problem(("call", "args"), e)
        return spec

    def data_spec(self) -> DataSpec | None:
        t = self.doc["data"]
        spec = DataSpec(self.path(t["path"]), t.get("inputs", "inputs"), t.get("labels", "labels"),
                        float(t.get("scale", 1.0)), t.get("one_hot"),
                        float(t.get("test_fraction", 0.2)), int(t.get("split_seed", 0)))
        if spec.test_fraction >= 1:
            self.problem(("data", "test_fraction"), "must be below 1")
        from .train import check_data

        try:
            with open_npz(spec.path) as npz:
                for key, name in (("inputs", spec.inputs), ("labels", spec.labels)):
                    if not npz.has(name):
                        self.problem(("data", key), str(npz.missing(name)))
                if not (npz.has(spec.inputs) and npz.has(spec.labels)):
                    return None
                spec.arrays = (npz.array(spec.inputs), npz.array(spec.labels))
        except ir.DlvmError as e:
            self.problem(("data", "path"), e)
            return None
        found = check_data(spec, *spec.arrays)
        for path, message in found:
            self.problem(path, message)
        return None if found else spec

    def loss_scaling_spec(self, t: dict[str, Any]) -> LossScalingSpec | None:
        """Dynamic loss scaling, for f16 only (bf16 has f32's range)."""
        if t.get("precision", "f32") != "f16":
            for key in ("loss_scale", "loss_scale_interval"):
                if key in t:
                    self.problem(("train", key), 'applies to train.precision = "f16"')
            return None
        engine = t.get("distributed", {}).get("engine", "local")
        if engine != "local":
            self.problem(("train", "precision"), f'"f16" trains on the local engine, not '
                         f"'{engine}' (the loss scale is kept by the driver's loop)")
        initial = float(t.get("loss_scale", LARGEST))
        if not 0 < initial <= LARGEST:
            self.problem(("train", "loss_scale"), f"must be above 0 and at most {LARGEST:g} "
                         f"(the seed of the f16 backward pass is an f16), found {initial:g}")
        return LossScalingSpec(initial, int(t.get("loss_scale_interval", 200)))

    def train_spec(self, module: ir.Module, data: DataSpec, resume: bool) -> TrainSpec | None:
        t = self.doc["train"]
        step = self.function(module, t["step"], ("train", "step"))
        evaluate = t.get("evaluate", {})
        eval_fn = (self.function(module, evaluate["function"], ("train", "evaluate", "function"))
                   if "function" in evaluate else None)
        init_fn = (self.function(module, t["init_function"], ("train", "init_function"))
                   if "init_function" in t else None)
        if step is None or (evaluate and eval_fn is None) or ("init_function" in t
                                                              and init_fn is None):
            return None
        n = len(step.type_.arguments) - 3
        if n < 1:
            self.problem(("train", "step"), f"'@{step.name}' must take (params…, inputs, "
                         f"targets, learning_rate); it takes {len(step.type_.arguments)} "
                         "arguments")
            return None
        names = self.parameter_list(t, step, n)
        if names is None:
            return None
        spec = TrainSpec(
            step.name or t["step"], names, self.inits(t, names),
            init_fn.name if init_fn is not None else None, int(t.get("init_seed", 0)),
            float(t.get("init_scale", 0.01)),
            self.path(t["load"]) if "load" in t else None, int(t.get("batch_size", 32)),
            int(t["epochs"]), float(t["learning_rate"]), float(t.get("decay", 0.0)),
            int(t.get("shuffle_seed", 0)),
            self.output_path(t["checkpoint"]) if "checkpoint" in t else None,
            self.output_path(t["metrics"]) if "metrics" in t else None,
            eval_fn.name if eval_fn is not None else None, evaluate.get("metric", "accuracy"),
            bool(t.get("allow_nonfinite", False)), self.distributed_spec(t),
            self.loss_scaling_spec(t))
        from .train import check_signatures, prepare

        before = len(self.problems)
        found = check_signatures(module, spec, data)
        for path, message in found:
            self.problem(path, message)
        if resume:
            if spec.checkpoint is None:
                self.problem(("train", "checkpoint"), "--resume needs a checkpoint file")
            elif not spec.checkpoint.is_file():
                run = f" of run '{self.run.name}'" if self.run is not None else ""
                self.problem(("train", "checkpoint"), f"--resume: '{spec.checkpoint}'{run} "
                             "does not exist yet")
        if len(self.problems) > before:
            return spec
        try:
            prepare(module, spec, data, resume)
            from .engines import make_engine

            make_engine(spec.distributed).check(spec)
        except KeyedError as e:
            self.problem(e.path, e)
        return spec

    def distributed_spec(self, t: dict[str, Any]) -> DistributedSpec:
        d = t.get("distributed", {})
        defaults = DistributedSpec()
        return DistributedSpec(str(d.get("engine", defaults.engine)),
                               int(d.get("workers", defaults.workers)),
                               str(d.get("address", defaults.address)),
                               int(d.get("max_failures", defaults.max_failures)),
                               str(d.get("allreduce", defaults.allreduce)))

    def parameter_list(self, t: dict[str, Any], step: ir.Function, n: int) -> list[str] | None:
        """The parameters' names: strings, unique, one per parameter of the step."""
        given = "parameters" in t
        names = t["parameters"] if given else parameter_names(step, n)
        where: KeyPath = ("train", "parameters") if given else ("train", "step")
        if not all(isinstance(x, str) for x in names):
            return None  # reported by check_value
        if len(names) != n:
            self.problem(where, f"{len(names)} names for the {n} parameters of '@{step.name}'")
            return None
        from .train import EPOCH_KEY

        before = len(self.problems)
        for i, name in enumerate(names):
            at = (*where, i) if given else where
            if not name:
                self.problem(at, "a parameter name must not be empty")
            elif name in names[:i]:
                self.problem(at, f"parameter name '{name}' is given twice")
            elif name == EPOCH_KEY:
                self.problem(at, f"parameter name '{name}' is reserved: checkpoints hold the "
                             "epoch count under it")
        return None if len(self.problems) > before else list(names)

    def inits(self, t: dict[str, Any], names: list[str]) -> dict[str, str]:
        if "init_function" in t:  # the function makes every parameter: no scheme applies
            if "init" in t:
                self.problem(("train", "init_function"), "give either 'init' or "
                             "'init_function', not both")
            if "init_scale" in t:
                self.problem(("train", "init_scale"), "is the spread of init = \"normal\"; "
                             "it has no effect with 'init_function': remove one of them")
            return {}
        init = t.get("init", "glorot")
        inits = {name: init for name in names} if isinstance(init, str) else dict(init)
        for name, scheme in inits.items():
            if name not in names:
                self.problem(("train", "init", name), f"'{name}' is not a parameter "
                             f"({', '.join(names)})")
            elif scheme not in INITS:
                self.problem(("train", "init", name), f"{_show(scheme)} is not one of "
                             f"{', '.join(INITS)}")
        for name in names:
            inits.setdefault(name, "glorot")
        return inits

    # ---- files written

    def files(self, outputs: bool) -> list[tuple[KeyPath, Path]]:
        """The output keys' paths, or the input files' (the pipeline file first)."""
        found: list[tuple[KeyPath, Path]] = [] if outputs else [(PIPELINE_FILE, self.file)]
        for table, keys in SCHEMA.items():
            for name, key in keys.items():
                value = self.doc.get(table, {}).get(name) if "." not in table else None
                wanted = key.is_output if outputs else key.must_exist
                if wanted and isinstance(value, str):
                    path = self.output_path(value) if outputs else self.path(value)
                    found.append(((table, name), path))
        if not outputs:
            found += [(where, path) for where, path, _ in self.call_items()]
        return found

    # ---- the run's folder

    def run_folder(self, resume: bool, overwrite: bool, dry_run: bool) -> RunFolder | None:
        """The folder this run writes into: a new one (named by `run.name` or the time), or
        with --resume the latest run's (or the named one's). None when nothing is written."""
        table = self.doc.get("run", {})
        name = table.get("name")
        if not any(key.is_output and key_name in self.doc.get(table_name, {})
                   for table_name, keys in SCHEMA.items() for key_name, key in keys.items()):
            if name is not None:
                self.problem(("run", "name"), "the pipeline writes no files, so it has no run "
                             "folder to name")
            return None
        parent = self.path(table["dir"]) if "dir" in table else default_parent(self.file)
        problem = parent_problem(parent)
        if problem is not None:
            self.problem(("run", "dir"), problem)
            return None
        if name is not None and (problem := name_problem(name)) is not None:
            self.problem(("run", "name"), problem)
            return None
        if resume:
            name = name if name is not None else latest_run(parent)
            if name is None:
                self.problems.append(Problem((), f"no earlier run in '{parent}' to continue",
                                             "--resume"))
                return None
            if not (parent / name).is_dir():
                self.problem(("run", "name"), f"--resume: no run '{name}' in '{parent}' "
                             f"({describe_runs(parent)})")
                return None
            return RunFolder(parent, name, reused=True)
        if name is None:
            return RunFolder(parent, timestamp_name(parent))
        exists = (parent / name).exists()
        if exists and not (overwrite or dry_run):
            self.problem(("run", "name"), f"run '{name}' already exists in '{parent}': pass "
                         "--resume to continue it, --overwrite to replace its outputs, or "
                         "choose another --name")
        return RunFolder(parent, name, reused=exists)

    def check_outputs(self, resume: bool, overwrite: bool, dry_run: bool) -> list[Path]:
        """Every output path, checked before any work: writable, none an input (save the
        checkpoint that a call reads after training), no two the same, and, outside the run's
        folder, no file replaced that this pipeline's runs did not write (nor their
        checkpoint or metrics without --resume or --overwrite). A dry run refuses none."""
        outputs, inputs = self.files(outputs=True), self.files(outputs=False)
        for i, (where, path) in enumerate(outputs):
            problem = output_problem(path)
            if problem is not None:
                self.problem(where, problem)
                continue
            clash = self.clash(where, path, inputs, outputs[:i]) or self.kept_by_runs(path)
            if clash is not None:
                self.problem(where, clash)
            elif not dry_run and path.is_file():
                replaced = self.replaced(where, path, resume or overwrite)
                if replaced is not None:
                    self.problem(where, replaced)
        return [path for _, path in outputs]

    def kept_by_runs(self, path: Path) -> str | None:
        """Why `path` is the runs' own (the run's record, the `latest` link), if it is."""
        if self.run is None:
            return None
        owned = {self.run.path / RUN_RECORD: "the run's record",
                 self.run.path / PIPELINE_RECORD: "the pipeline as the run ran it",
                 self.run.parent / LATEST: "the link to the newest run"}
        for own, what in owned.items():
            if files.same_file(path, own):
                return f"'{path}' is {what} ({own.name}); choose another name"
        return None

    def replaced(self, where: KeyPath, path: Path, continuing: bool) -> str | None:
        """Why the existing file `path` must not be replaced (None when it may be): inside
        the run's folder it is the run's own; outside, only an earlier run of this pipeline's
        output may be, and a checkpoint or metrics only with --resume or --overwrite."""
        run = self.run
        if run is None or run.holds(path):
            return None
        earlier = written_by(run.parent, path)
        if earlier is None:
            return (f"'{path}' exists, outside the run folder, and no earlier run of this "
                    "pipeline wrote it: refusing to replace it (remove it, or give a path "
                    "relative to the run folder)")
        if where[0] == "train" and not continuing:
            return (f"'{path}' holds the {where[1]} of run '{earlier}' (outside the run "
                    f"folder): pass --resume --name {earlier} to continue that run, or "
                    "--overwrite to replace it")
        return None

    @staticmethod
    def clash(where: KeyPath, path: Path, inputs: list[tuple[KeyPath, Path]],
              earlier: list[tuple[KeyPath, Path]]) -> str | None:
        """Why output `path` would destroy an input or another output (None if it would not)."""
        for source, read in inputs:
            if files.same_file(path, read) and not _hands_over(where, source):
                what = "the pipeline file" if source == PIPELINE_FILE else dotted(source)
                return f"'{path}' is also an input ({what}); refusing to overwrite it"
        for other, written in earlier:
            if files.same_file(path, written):
                return f"'{path}' is also written as {dotted(other)}"
        return None

    def resolved(self, spec: RunSpec) -> dict[str, Any]:
        """The pipeline as it will run, every default filled in and every path absolute."""
        out: dict[str, Any] = {"module": {"path": str(self.path(self.doc["module"]["path"]))},
                               "passes": {"pipeline": spec.pipeline},
                               "target": {"name": spec.target, "options": spec.target_options}}
        for name in ("emit", "call", "data", "train"):
            value = getattr(spec, name)
            if value is not None:
                out[name] = {f.name: _plain(getattr(value, f.name)) for f in fields(value)
                             if f.repr}
        if spec.run is not None:
            out["run"] = {"dir": str(spec.run.parent), "name": spec.run.name,
                          "folder": str(spec.run.path)}
        return out


def _item_key(path: KeyPath, message: str, name: str, options: dict[str, Any]) -> KeyPath:
    """The key of a `passes.list` item that a pipeline error is about."""
    key = next((k for k in re.findall(r"'([^']+)'", message) if k in options), None)
    if key is not None:
        return (*path, "options", key)
    if "option" in message and options:
        return (*path, "options")
    return (*path, "name") if f"'{name}'" in message else path


def _hands_over(output: KeyPath, source: KeyPath) -> bool:
    """The checkpoint may be what a call reads: the call runs after training."""
    return output == ("train", "checkpoint") and source[:2] in (("call", "parameters"),
                                                               ("call", "args"))


def _plain(value: Any) -> Any:
    """A value of a spec as JSON holds it (paths as strings, tables as objects)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value) if f.repr}
    return value


def option_text(value: Any) -> str:
    """A TOML value as a pass option in pipeline text (`{key=value key=value}`)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, list):
        items = [str(v).lower() if isinstance(v, bool) else str(v) for v in value]
        if any(isinstance(v, dict | list) for v in value) or any(
                "," in v or '"' in v for v in items):
            raise ValueError("the items of a list option must be strings, numbers or booleans "
                             "without commas or quotes")
        return _quoted(",".join(items))
    raise ValueError(f"expected a string, number, boolean or array, found {_show(value)}")


def _quoted(text: str) -> str:
    if text and not re.search(r'[\s{}"]', text):
        return text
    if '"' in text:
        raise ValueError(f"{text!r}: a pass option cannot hold both quotes and spaces or "
                         "braces")
    return f'"{text}"'


def parameter_names(fn: ir.Function, n: int) -> list[str]:
    """The names of `fn`'s first `n` arguments in the IR (`%w1` → "w1"), else param0…"""
    if fn.is_declaration:
        return [f"param{i}" for i in range(n)]
    return [a.name or f"param{i}" for i, a in enumerate(fn.entry.arguments[:n])]


def argument_name(fn: ir.Function, index: int) -> str:
    """`'%x' of '@f'` for argument `index` of `@f`, or `argument 1 of '@f'` when unnamed."""
    args = fn.entry.arguments if fn.blocks else []
    name = args[index].name if index < len(args) else None
    return f"'%{name}' of '@{fn.name}'" if name else f"argument {index} of '@{fn.name}'"


def _type_name(t: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
            dict: "a table", list: "an array"}.get(t, t.__name__)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def load_spec(file: str | Path, overrides: tuple[str, ...] | list[str] = (),
              resume: bool = False, overwrite: bool = False, name: str | None = None,
              dry_run: bool = False) -> RunSpec:
    """Read, override and validate a pipeline file; raises SpecError listing every problem.
    `name` (`--name`) sets run.name; a dry run refuses nothing for its outputs."""
    path = Path(file)
    text = files.read_text(path, what="pipeline file", limit=MAX_PIPELINE_BYTES)
    try:
        doc = loads(text)
    except TomlError as e:
        where = f"{path}:{e.line}:{e.column}" if e.line is not None else str(path)
        raise SpecError([f"{where}: error: invalid TOML: {e.message}"]) from None
    overridden: list[KeyPath] = []
    for item in overrides:
        key, value = parse_override(item)
        apply_override(doc, key, value)
        overridden.append(key)
    options: dict[KeyPath, str] = {}
    if name is not None:
        apply_override(doc, RUN_NAME, name)
        overridden.append(RUN_NAME)
        options[RUN_NAME] = "--name"
    loader = Loader(path, doc)
    try:
        spec = loader.load(resume, overwrite, dry_run)
    except OSError as e:  # a file system check the keys' own checks did not foresee
        name = f" '{files.shown(e.filename)}'" if e.filename else ""
        raise ir.DlvmError(f"{path}: cannot use the file{name}: {files.reason(e)}") from None
    if spec is None:
        raise SpecError(format_problems(path, loader.problems, text, overridden, options),
                        loader.notes)
    return spec
