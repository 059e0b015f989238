"""The plugin registry: passes, targets, front ends, pipelines and instructions by entry point.

Every distribution — the built-in ones included — registers through the
entry-point group `dlvm.plugins`, with pluggy hooks that receive a
`register` callback. Registrations name lazy `"module:attr"` factories, so
listing what is installed imports nothing heavy.

Failures stay with the plugin that caused them: a plugin whose import or
hooks raise (anything but KeyboardInterrupt, `SystemExit` included) is
recorded as failed and the others keep working, and every error raised by
a plugin's code while loading or creating what it registered names the
plugin and its distribution.

Names are plain (`cse`, `interp`). When two plugins register the same name,
neither is unloaded: DLVM's own distributions keep the plain name over
third-party ones (between equals, the first loaded keeps it), the clash is
recorded in `Registry.clashes`, and every registration stays reachable by its
qualified name `<plugin>:<name>` (`opt:cse`, `myplugin:cse`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import shlex
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, NoReturn, Protocol

import pluggy

from . import opdef
from .core import Module
from .diagnostics import DlvmError
from .passes import Pass
from .target import Target

PROJECT = "dlvm"
ENTRY_POINT_GROUP = "dlvm.plugins"
STRICT_ENV = "DLVM_STRICT_PLUGINS"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# DLVM's own distributions: on a name clash with a third-party plugin they keep the plain name.
FIRST_PARTY = frozenset({
    "dlvm-ir", "dlvm-ad", "dlvm-opt", "dlvm-cli", "dlvm-llvm", "dlvm-llvm-gpu", "dlvm-nnkit",
    "dlvm-tel", "dlvm-onnx", "dlvm-ray",
})

# Where first-party names live, for "pip install …" hints when they are missing.
KNOWN_PROVIDERS: dict[str, str] = {
    **dict.fromkeys(["differentiation", "AD", "checkpoint"], "dlvm-ad"),
    **dict.fromkeys(
        ["dce", "cse", "constant-fold", "algebra-simplify", "literal-broadcast-promotion",
         "matrix-chain-reordering", "inline", "cfg-simplify", "cfg-canonicalize", "licm",
         "fuse-elementwise", "O0", "O1", "O2", "O3"], "dlvm-opt"),
    "llvm-cpu": "dlvm-llvm",
    "nvptx": "dlvm-llvm-gpu",
    "nnkit": "dlvm-nnkit",
    "tel": "dlvm-tel",
    "onnx": "dlvm-onnx",
    "ray": "dlvm-ray",
}


def install_hint(*requirements: str) -> str:
    """How every message says to install what is missing: `pip install dlvm-ad`.

    The distribution's name works from an index and from a checkout's wheels
    (`pip install --find-links dist dlvm-ad`, as the README's "Installing" says); a
    requirement with extras or a version (`dlvm-llvm-gpu[libdevice]`) is quoted for the shell.
    """
    return " ".join(["pip install", *map(shlex.quote, requirements)])


KINDS = ("pass", "target", "frontend", "pipeline", "engine")
# The keyword options each kind's `register` callback accepts (see the Register* protocols).
OPTIONS: dict[str, frozenset[str]] = {
    "pass": frozenset({"aliases"}),
    "target": frozenset({"aliases", "priority"}),
    "frontend": frozenset({"aliases", "suffixes"}),
    "pipeline": frozenset({"aliases"}),
    "engine": frozenset({"aliases"}),
}
# A registered name; ':' is left out because it separates a plugin from a name.
NAME = re.compile(r"[A-Za-z0-9_.\-]+")


class NotedError(DlvmError):
    """An error followed by notes: lines that may explain it, such as a plugin that failed
    to load and so registered nothing.

    `str(e)` is the message and then a `note: …` line per note, so that a library user sees
    them; the `dlvm` command prints `message` as its error and each of `notes` as a
    `dlvm: note: …` line.
    """

    def __init__(self, message: str, *, notes: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.notes = list(notes)

    def __str__(self) -> str:
        return "\n".join([self.message, *(f"note: {n}" for n in self.notes)])


class RegistryError(NotedError):
    """An unknown or conflicting name in the registry, or a plugin's object that failed."""


class PluginWarning(UserWarning):
    """Something a plugin provides is unusable; the rest keeps working."""


# ---------------------------------------------------------------- the register callbacks


class RegisterPass(Protocol):
    """`register` of `register_passes`: a `Pass` subclass, or `"module:Class"` naming one."""

    def __call__(self, name: str, factory: str | type[Pass], summary: str = "", *,
                 aliases: Sequence[str] = ()) -> None: ...


class RegisterTarget(Protocol):
    """`register` of `register_targets`: a `Target` subclass (or `"module:Class"`).

    Without `--target`, the highest `priority` that can be created is the default
    (`interp` has 0; a target that needs hardware may claim more).
    """

    def __call__(self, name: str, factory: str | Callable[..., Target], summary: str = "", *,
                 priority: int = 0, aliases: Sequence[str] = ()) -> None: ...


class RegisterFrontend(Protocol):
    """`register` of `register_frontends`: a function `path -> Module` (or `"module:func"`),
    used for the files whose suffix is in `suffixes`."""

    def __call__(self, name: str, factory: str | Callable[[str], Module], summary: str = "", *,
                 suffixes: Sequence[str] = (), aliases: Sequence[str] = ()) -> None: ...


class RegisterPipeline(Protocol):
    """`register` of `register_pipelines`: pipeline text (`"cse,dce"`), or a function
    returning it."""

    def __call__(self, name: str, pipeline: str | Callable[[], str], summary: str = "", *,
                 aliases: Sequence[str] = ()) -> None: ...


class RegisterEngine(Protocol):
    """`register` of `register_engines`: a training engine for `dlvm run` (a class, or
    `"module:Class"`), chosen by `[train.distributed] engine = NAME`; see `dlvm.cli.run.engines`
    for what it implements."""

    def __call__(self, name: str, factory: str | Callable[[], Any], summary: str = "", *,
                 aliases: Sequence[str] = ()) -> None: ...


class Hooks:
    """Hook specifications; a plugin implements any subset with `@hookimpl`."""

    @hookspec
    def register_passes(self, register: RegisterPass) -> None:
        """Register passes: `register("my-pass", "my_plugin.passes:MyPass", "summary")`."""

    @hookspec
    def register_targets(self, register: RegisterTarget) -> None:
        """Register targets: `register("my-target", "my_plugin.target:MyTarget", "summary",
        priority=0)`."""

    @hookspec
    def register_frontends(self, register: RegisterFrontend) -> None:
        """Register front ends: `register("tel", "my_plugin.tel:parse_file", "summary",
        suffixes=(".tel",))`."""

    @hookspec
    def register_pipelines(self, register: RegisterPipeline) -> None:
        """Register named pipelines: `register("my-O1", "cse,dce", "summary")`."""

    @hookspec
    def register_engines(self, register: RegisterEngine) -> None:
        """Register training engines: `register("ray", "dlvm.ray.engine:RayEngine",
        "summary")`; `dlvm run` trains through the one a pipeline names."""

    @hookspec
    def register_instructions(self) -> None:
        """Define instructions: import the module that calls `dlvm.ir.define` (an import
        runs once, however many registries are built)."""


# ---------------------------------------------------------------- records


def describe_error(e: BaseException) -> str:
    """`Type: message` on one line (tables and one-line diagnostics)."""
    message = " ".join(str(e).split())
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


@dataclass
class PluginInfo:
    name: str  # the entry point's name
    distribution: str
    version: str
    status: str = "ok"  # "ok" | "failed" | "blocked"
    error: str = ""
    key: str = ""  # unique among loaded plugins: pluggy's name, the prefix of qualified names
    module: str = ""  # where the plugin object lives

    def __post_init__(self) -> None:
        self.key = self.key or self.name

    @property
    def label(self) -> str:
        """How messages name the plugin: `plugin 'opt' (dlvm-opt)`."""
        return f"plugin '{self.name}' ({self.distribution})"

    @property
    def first_party(self) -> bool:
        return self.distribution in FIRST_PARTY

    def fail(self, error: BaseException | str, where: str = "") -> None:
        """Record a failure; `where` says which step failed when it is not the loading."""
        detail = error if isinstance(error, str) else describe_error(error)
        self.status = "failed"
        self.error = f"{where}: {detail}" if where else detail


UNKNOWN_PROVIDER = PluginInfo("?", "?", "?")


@dataclass
class Entry:
    """One registered name and its lazy factory."""

    kind: str  # "pass" | "target" | "frontend" | "pipeline" | "instruction"
    name: str
    factory: str | Callable[..., Any] | Any
    summary: str
    plugin: PluginInfo
    options: dict[str, Any] = field(default_factory=dict)
    alias_of: str | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.plugin.key}:{self.name}"

    def load(self) -> Any:
        """Import and return the registered object (class, function or pipeline text)."""
        if not isinstance(self.factory, str) or self.kind == "pipeline":
            return self.factory
        module_name, _, attr = self.factory.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a plugin's import error must not crash the host
            raise RegistryError(f"{self.kind} '{self.name}' of {self.plugin.label} failed to "
                                f"load: {describe_error(e)}") from e
        return obj

    def create(self, **options: Any) -> Any:
        """An instance made by the factory with `options`; failures name the plugin.

        A `DlvmError` (a deliberate message, such as a bad option value) passes unchanged.
        """
        factory = self.load()
        try:
            inspect.signature(factory).bind(**options)
        except TypeError as e:
            raise RegistryError(f"bad options for {self.kind} '{self.name}': {e}") from None
        except ValueError:  # no signature to check against: let the call decide
            pass
        try:
            return factory(**options)
        except (DlvmError, KeyboardInterrupt):
            raise
        except BaseException as e:
            raise RegistryError(f"{self.kind} '{self.name}' of {self.plugin.label} could not be "
                                f"created: {describe_error(e)}") from e


@dataclass(frozen=True)
class Clash:
    """Two registrations of one name: `kept` has the plain name, `shadowed` only its
    qualified one."""

    kind: str
    name: str
    kept: Entry
    shadowed: Entry

    def __str__(self) -> str:
        kept, shadowed = self.kept.plugin, self.shadowed.plugin
        if kept is shadowed:
            return (f"{self.kind} '{self.name}' is registered twice by {kept.label}; "
                    "the first registration is kept")
        return (f"{self.kind} '{self.name}' is provided by both {kept.distribution} and "
                f"{shadowed.distribution}: '{self.name}' is {kept.distribution}'s, "
                f"{shadowed.distribution}'s is '{self.shadowed.qualified_name}'")


# ---------------------------------------------------------------- the registry


class Registry:
    def __init__(self) -> None:
        self.plugins: list[PluginInfo] = []
        self.entries: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}  # plain names
        self.qualified: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}  # plugin:name
        self.clashes: list[Clash] = []
        self.manager = pluggy.PluginManager(PROJECT)
        self.manager.add_hookspecs(Hooks)
        self._default_target: str | None = None
        self._unusable_targets: dict[str, str] = {}  # name -> why, warned about once

    # ------------------------------------------------------------ loading

    def add_plugin(self, plugin: Any, info: PluginInfo) -> None:
        """Register one plugin object and collect its registrations atomically: if any of its
        hooks raises, none of them counts and the plugin is recorded as failed."""
        info.module = info.module or _module_of(plugin)
        if self.manager.has_plugin(info.key):  # two distributions, one entry-point name
            info.key = f"{info.distribution}.{info.name}"
        staged: list[Entry] = []

        def registrar(kind: str) -> Callable[..., None]:
            def register(name: str, factory: Any, summary: str = "", **options: Any) -> None:
                unknown = set(options) - OPTIONS[kind]
                if unknown:
                    raise TypeError(f"register() of {kind}s got unknown options "
                                    f"{', '.join(sorted(unknown))} (allowed: "
                                    f"{', '.join(sorted(OPTIONS[kind]))})")
                aliases = tuple(options.pop("aliases", ()))
                for n in (name, *aliases):
                    if not isinstance(n, str) or NAME.fullmatch(n) is None:
                        raise ValueError(f"{kind} name {n!r} must be letters, digits, "
                                         "'_', '.' or '-'")
                staged.append(Entry(kind, name, factory, summary, info, options))
                staged.extend(Entry(kind, a, factory, summary, info, options, alias_of=name)
                              for a in aliases)

            return register

        try:
            with opdef.provided_by(info.distribution):
                self.manager.register(plugin, name=info.key)
                caller = self.manager.subset_hook_caller
                others = [p for p in self.manager.get_plugins() if p is not plugin]
                caller("register_instructions", others)()
                caller("register_passes", others)(register=registrar("pass"))
                caller("register_targets", others)(register=registrar("target"))
                caller("register_frontends", others)(register=registrar("frontend"))
                caller("register_pipelines", others)(register=registrar("pipeline"))
                caller("register_engines", others)(register=registrar("engine"))
        except BaseException as e:  # SystemExit too: one plugin must not end the process
            if self.manager.is_registered(plugin):
                self.manager.unregister(plugin)
            if isinstance(e, KeyboardInterrupt):
                raise
            info.fail(e)
            self.plugins.append(info)
            if strict_mode():
                raise_strictly(e, info)
            return
        self.plugins.append(info)
        for entry in staged:
            self._add_entry(entry)
        self._default_target = None

    def _add_entry(self, e: Entry) -> None:
        """Make `e` reachable by its qualified name, and by its plain name unless an equal or
        first-party provider already has that (see the module docstring)."""
        qualified = self.qualified[e.kind]
        if e.qualified_name in qualified:
            self.clashes.append(Clash(e.kind, e.name, qualified[e.qualified_name], e))
            return
        qualified[e.qualified_name] = e
        plain = self.entries[e.kind]
        existing = plain.get(e.name)
        if existing is None:
            plain[e.name] = e
        elif e.plugin.first_party and not existing.plugin.first_party:
            plain[e.name] = e
            self.clashes.append(Clash(e.kind, e.name, kept=e, shadowed=existing))
        else:
            self.clashes.append(Clash(e.kind, e.name, kept=existing, shadowed=e))

    def load_entry_points(self, blocked: frozenset[str] | set[str] = frozenset()) -> None:
        """Load the `dlvm.plugins` entry points, sorted by distribution and name."""
        eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda ep: (ep.dist.name if ep.dist else "", ep.name))
        for ep in eps:
            dist = ep.dist.name if ep.dist else "?"
            version = ep.dist.version if ep.dist else "?"
            info = PluginInfo(ep.name, dist, version)
            if ep.name in blocked or dist in blocked:
                info.status = "blocked"
                self.plugins.append(info)
                continue
            if any(p.name == ep.name and p.distribution == dist for p in self.plugins):
                continue  # the same distribution seen twice on sys.path
            try:
                with opdef.provided_by(dist):
                    plugin = ep.load()
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # SystemExit too: one plugin must not end the process
                info.fail(e)
                self.plugins.append(info)
                if strict_mode():
                    raise_strictly(e, info)
                continue
            self.add_plugin(plugin, info)

    def plugin(self, key: str) -> PluginInfo | None:
        """The record of the plugin registered under `key` (pluggy's plugin name)."""
        return next((p for p in self.plugins if p.key == key and p.status != "blocked"), None)

    # ------------------------------------------------------------ lookup

    def names(self, kind: str) -> list[str]:
        """The plain names of a kind."""
        return sorted(self.entries[kind])

    def qualified_names(self, kind: str) -> list[str]:
        """Every registration of a kind as `plugin:name`."""
        return sorted(self.qualified[kind])

    def entry(self, kind: str, name: str) -> Entry:
        """The registration of a plain or qualified (`plugin:name`) name."""
        e = self.entries[kind].get(name) or self.qualified[kind].get(name)
        if e is None:
            raise RegistryError(self.unknown(kind, name), notes=failed_plugin_notes(self))
        return e

    def display_name(self, e: Entry) -> str:
        """The name that designates `e` in messages and statistics: its plain name where that
        is `e`'s (`cse`), else its qualified one (`tropical:cse`, shadowed by dlvm-opt's);
        an alias shows the name it stands for."""
        name = e.alias_of or e.name
        plain = self.entries[e.kind].get(name)
        if plain is not None and plain.plugin is e.plugin:
            return name
        return f"{e.plugin.key}:{name}"

    def unknown(self, kind: str, name: str) -> str:
        provider = KNOWN_PROVIDERS.get(name)
        if provider is not None:
            return f"{kind} '{name}' is provided by {provider}: {install_hint(provider)}"
        pool = [*self.entries[kind], *self.qualified[kind]] if ":" in name else self.entries[kind]
        close = difflib.get_close_matches(name, pool, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        known = ", ".join(self.names(kind)) or "none"
        return f"unknown {kind} '{name}'{hint}; known: {known}"

    def has(self, kind: str, name: str) -> bool:
        return name in self.entries[kind] or name in self.qualified[kind]

    def owner(self, kind: str, obj: Any) -> PluginInfo | None:
        """The plugin that registered the class of `obj` (a pass or target instance, or the
        class itself), so that errors raised while it runs can name the plugin."""
        cls = obj if isinstance(obj, type) else type(obj)
        spelled = f"{cls.__module__}:{cls.__qualname__}"
        for e in self.qualified[kind].values():
            if e.factory is cls or e.factory == spelled:
                return e.plugin
        return None

    def instructions(self) -> list[Entry]:
        """Every defined instruction, with the plugin that provides it (`factory`: its
        `OpDef`)."""
        return [Entry("instruction", op.name, op, op.summary, self._provider_of(op))
                for _, op in sorted(opdef.OPS.items())]

    def _provider_of(self, op: opdef.OpDef) -> PluginInfo:
        loaded = [p for p in self.plugins if p.status == "ok"]
        if op.provider:
            found = next((p for p in loaded if p.distribution == op.provider), None)
            return found or PluginInfo("?", op.provider, _version(op.provider))
        # Defined outside any plugin's loading (its module imported earlier): by package.
        package = _package(op.module)
        return next((p for p in loaded if p.module and _package(p.module) == package),
                    UNKNOWN_PROVIDER)

    # ------------------------------------------------------------ targets

    def make_target(self, name: str | None = None, **options: Any) -> Any:
        """An instance of a target; None picks the default (see `default_target`)."""
        if name is None:
            name = self.default_target()
        return self.entry("target", name).create(**options)

    def default_target(self) -> str:
        """The highest-priority target that can be created without options.

        A target that cannot be created (its import or constructor fails) is skipped with
        one `PluginWarning` naming it and its plugin, so it cannot break every run.
        """
        if self._default_target is not None:
            return self._default_target
        candidates = sorted((t for t in self.entries["target"].values() if t.alias_of is None),
                            key=lambda t: (t.options.get("priority", 0), t.name), reverse=True)
        if not candidates:
            raise RegistryError("no target is installed (dlvm-ir provides 'interp')")
        for t in candidates:
            try:
                t.create()
            except DlvmError as e:
                self._skip_target(t, e)
                continue
            self._default_target = t.name
            return t.name
        raise RegistryError("no installed target can be created: "
                            + "; ".join(self._unusable_targets.values()))

    def _skip_target(self, t: Entry, e: DlvmError) -> None:
        if t.name in self._unusable_targets:
            return
        why = str(e) if t.plugin.label in str(e) else f"target '{t.name}' of {t.plugin.label}: {e}"
        self._unusable_targets[t.name] = why
        warnings.warn(f"{why}; it is not used as the default target", PluginWarning,
                      stacklevel=3)


def _module_of(plugin: Any) -> str:
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    return getattr(type(plugin), "__module__", "") or ""


def _package(module: str) -> str:
    """The importable package a module belongs to (`dlvm.opt`, `my_plugin`)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "dlvm" else parts[0]


def strict_mode() -> bool:
    """Whether `DLVM_STRICT_PLUGINS` asks for a plugin's loading error to be raised (and the
    `dlvm` command to show it with its traceback) instead of recorded."""
    return bool(os.environ.get(STRICT_ENV))


def raise_strictly(error: BaseException, info: PluginInfo) -> NoReturn:
    """Raise a plugin's loading error in strict mode: the error itself, with a note naming
    the plugin (its traceback shows where it came from), except that an exit (`SystemExit`)
    becomes a `RegistryError` caused by it, so that it cannot end a program without a word."""
    if isinstance(error, Exception):
        error.add_note(f"raised while loading {info.label} ({STRICT_ENV}=1)")
        raise error
    raise RegistryError(f"{info.label} failed to load: {describe_error(error)}") from error


def failed_plugin_notes(reg: Registry | None = None) -> list[str]:
    """A note for each plugin of `reg` that failed, for errors about something missing:
    what a failed plugin registers is not there. Without `reg`, the process-wide registry's,
    if it has been built (this never builds it)."""
    reg = reg if reg is not None else _REGISTRY
    if reg is None:
        return []
    return [f"{p.label} failed to load: {p.error}; see 'dlvm plugins'"
            for p in reg.plugins if p.status == "failed"]


_REGISTRY: Registry | None = None
_BUILDING = False


def make_registry(autoload: bool | None = None) -> Registry:
    """A fresh registry: entry-point plugins, plus dlvm-ir's own built-ins if not installed."""
    from . import builtin_plugin

    reg = Registry()
    if autoload is None:
        autoload = not os.environ.get("DLVM_DISABLE_PLUGIN_AUTOLOAD")
    if autoload:
        blocked = {b.strip() for b in os.environ.get("DLVM_DISABLE_PLUGINS", "").split(",")
                   if b.strip()}
        reg.load_entry_points(blocked)
    if not reg.manager.is_registered(builtin_plugin) and not any(
        p.distribution == "dlvm-ir" and p.status == "ok" for p in reg.plugins
    ):
        reg.add_plugin(builtin_plugin, PluginInfo("ir", "dlvm-ir", _version("dlvm-ir")))
    return reg


def registry() -> Registry:
    """The process-wide registry, built on first use (which defines plugins' instructions)."""
    global _REGISTRY, _BUILDING
    if _REGISTRY is None:
        if _BUILDING:
            raise RegistryError("the plugin registry was used while it was being built "
                                "(by a plugin's import or hook)")
        _BUILDING = True
        opdef._plugins_loaded = True  # a lookup miss from here on must not load it again
        try:
            _REGISTRY = make_registry()
        finally:
            _BUILDING = False
    return _REGISTRY


def set_registry(reg: Registry | None) -> None:
    """Replace (or with None, reset) the process-wide registry; for tests and tools."""
    global _REGISTRY
    _REGISTRY = reg


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def unrelated_dlvm_installed() -> bool:
    """The PyPI name `dlvm` belongs to an unrelated project whose `dlvm/__init__.py`
    would mask this namespace package."""
    try:
        metadata.distribution("dlvm")
    except metadata.PackageNotFoundError:
        return False
    return True


__all__ = ["ENTRY_POINT_GROUP", "FIRST_PARTY", "PROJECT", "STRICT_ENV", "Clash", "Entry",
           "Hooks", "NotedError", "PluginInfo", "PluginWarning", "RegisterEngine",
           "RegisterFrontend", "RegisterPass", "RegisterPipeline", "RegisterTarget", "Registry",
           "RegistryError", "describe_error", "failed_plugin_notes", "hookimpl", "hookspec",
           "make_registry", "registry", "set_registry", "strict_mode", "unrelated_dlvm_installed"]
