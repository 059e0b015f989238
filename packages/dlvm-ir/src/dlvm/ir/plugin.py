"""The plugin registry: passes, targets, front ends and named pipelines by entry point.

Every distribution — the built-in ones included — registers through the
entry-point group `dlvm.plugins`, with pluggy hooks that receive a
`register` callback. Registrations name lazy `"module:attr"` factories, so
listing what is installed imports nothing heavy. A plugin that fails to
load is recorded and reported; the others keep working.
"""

from __future__ import annotations

import difflib
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from .diagnostics import DlvmError

PROJECT = "dlvm"
ENTRY_POINT_GROUP = "dlvm.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

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
}


class RegistryError(DlvmError):
    """An unknown or conflicting name in the registry."""


class Hooks:
    """Hook specifications; a plugin implements any subset with `@hookimpl`."""

    @hookspec
    def register_passes(self, register: Callable[..., None]) -> None:
        """Register passes: `register(name, "module:Class", summary, aliases=())`."""

    @hookspec
    def register_targets(self, register: Callable[..., None]) -> None:
        """Register targets: `register(name, "module:Class", summary, priority=0)`."""

    @hookspec
    def register_frontends(self, register: Callable[..., None]) -> None:
        """Register front ends: `register(name, "module:function", summary, suffixes=())`."""

    @hookspec
    def register_pipelines(self, register: Callable[..., None]) -> None:
        """Register named pipelines: `register(name, "pass,pass{opt=v}", summary)`."""

    @hookspec
    def register_instructions(self) -> None:
        """Define instructions (import the module that calls `dlvm.ir.define`)."""


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    status: str = "ok"  # "ok" | "failed" | "blocked"
    error: str = ""


@dataclass
class Entry:
    """One registered name and its lazy factory."""

    kind: str  # "pass" | "target" | "frontend" | "pipeline"
    name: str
    factory: str | Callable[..., Any]
    summary: str
    plugin: PluginInfo
    options: dict[str, Any] = field(default_factory=dict)
    alias_of: str | None = None

    def load(self) -> Any:
        """Import and return the registered object (class, function or pipeline text)."""
        if not isinstance(self.factory, str) or self.kind == "pipeline":
            return self.factory
        module_name, _, attr = self.factory.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception as e:  # a plugin's import error must not crash the host
            raise RegistryError(f"{self.kind} '{self.name}' from {self.plugin.distribution} "
                                f"failed to load: {type(e).__name__}: {e}") from e
        return obj


KINDS = ("pass", "target", "frontend", "pipeline")


class Registry:
    def __init__(self) -> None:
        self.plugins: list[PluginInfo] = []
        self.entries: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}
        self.manager = pluggy.PluginManager(PROJECT)
        self.manager.add_hookspecs(Hooks)

    # ------------------------------------------------------------ loading

    def add_plugin(self, plugin: Any, info: PluginInfo) -> None:
        """Register one plugin object and collect its registrations atomically."""
        staged: list[Entry] = []

        def registrar(kind: str) -> Callable[..., None]:
            def register(name: str, factory: Any, summary: str = "", **options: Any) -> None:
                aliases = options.pop("aliases", ())
                staged.append(Entry(kind, name, factory, summary, info, options))
                staged.extend(Entry(kind, a, factory, summary, info, options, alias_of=name)
                              for a in aliases)

            return register

        try:
            self.manager.register(plugin, name=info.name)
            caller = self.manager.subset_hook_caller
            others = [p for p in self.manager.get_plugins() if p is not plugin]
            caller("register_instructions", others)()
            caller("register_passes", others)(register=registrar("pass"))
            caller("register_targets", others)(register=registrar("target"))
            caller("register_frontends", others)(register=registrar("frontend"))
            caller("register_pipelines", others)(register=registrar("pipeline"))
            for e in staged:
                existing = self.entries[e.kind].get(e.name)
                if existing is not None:
                    raise RegistryError(
                        f"{e.kind} '{e.name}' is provided by both "
                        f"{existing.plugin.distribution} and {info.distribution}")
        except Exception as e:
            if self.manager.is_registered(plugin):
                self.manager.unregister(plugin)
            info.status, info.error = "failed", f"{type(e).__name__}: {e}"
            self.plugins.append(info)
            if os.environ.get("DLVM_STRICT_PLUGINS"):
                raise
            return
        for e in staged:
            self.entries[e.kind][e.name] = e
        self.plugins.append(info)

    def load_entry_points(self, blocked: frozenset[str] | set[str] = frozenset()) -> None:
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
                plugin = ep.load()
            except Exception as e:
                info.status, info.error = "failed", f"{type(e).__name__}: {e}"
                self.plugins.append(info)
                if os.environ.get("DLVM_STRICT_PLUGINS"):
                    raise
                continue
            self.add_plugin(plugin, info)

    # ------------------------------------------------------------ lookup

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries[kind])

    def entry(self, kind: str, name: str) -> Entry:
        e = self.entries[kind].get(name)
        if e is None:
            raise RegistryError(self.unknown(kind, name))
        return e

    def unknown(self, kind: str, name: str) -> str:
        provider = KNOWN_PROVIDERS.get(name)
        if provider is not None:
            return f"{kind} '{name}' is provided by {provider}: pip install {provider}"
        close = difflib.get_close_matches(name, self.entries[kind], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        known = ", ".join(self.names(kind)) or "none"
        return f"unknown {kind} '{name}'{hint}; known: {known}"

    def has(self, kind: str, name: str) -> bool:
        return name in self.entries[kind]

    def make_target(self, name: str | None = None, **options: Any) -> Any:
        """An instance of a target; None picks the fastest installed one."""
        if name is None:
            name = self.default_target()
        cls = self.entry("target", name).load()
        try:
            return cls(**options)
        except TypeError as e:
            raise RegistryError(f"bad options for target '{name}': {e}") from None

    def default_target(self) -> str:
        targets = self.entries["target"].values()
        usable = [t for t in targets if t.alias_of is None]
        if not usable:
            raise RegistryError("no target is installed (dlvm-ir provides 'interp')")
        return max(usable, key=lambda t: (t.options.get("priority", 0), t.name)).name


_REGISTRY: Registry | None = None


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
    """The process-wide registry, built on first use."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = make_registry()
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


__all__ = ["ENTRY_POINT_GROUP", "PROJECT", "Entry", "Hooks", "PluginInfo", "Registry",
           "RegistryError", "hookimpl", "hookspec", "make_registry", "registry", "set_registry",
           "unrelated_dlvm_installed"]
