"""Reading a file into a module: the one way a path becomes a `Module`.

The front end is the one named, or the registered one whose suffixes end the file's
name (`.tel` → dlvm-tel's), or else DLVM's textual IR: IR text is not always named
`.dl` (`.dlvm`, `.ir`, `/dev/stdin`), and the parser's diagnostics then say what is wrong.
A suffix that belongs to one of DLVM's own front ends is never read as IR text: when
that front end is missing the error names the package that provides it.

Whatever the front end, a path that is missing, a directory or unreadable is refused here
in the words of `dlvm.ir.files`; the IR parser reads at most `MAX_TEXT_BYTES`.

Front ends report bad input with `FrontendError` (one line, which starts with
`FILE:LINE:COL: error:` where the place is known) or, for several located problems shown
with their source lines, `DiagnosticError`.
"""

from __future__ import annotations

import os
from pathlib import PurePath

from .core import Module
from .diagnostics import Diagnostic, DiagnosticError, DlvmError
from .files import check_input, read_input
from .parser import parse
from .plugin import (
    KNOWN_PROVIDERS,
    Entry,
    Registry,
    RegistryError,
    describe_error,
    failed_plugin_notes,
    install_hint,
    registry,
)
from .verifier import verify as verify_module


class FrontendError(DlvmError):
    """Bad input to a front end, in one line: `FILE:LINE:COL: error: message` where the
    front end knows the place, else `FILE: error: message`."""


# The suffixes of DLVM's own front ends (→ the front end's name), for a file whose front
# end is not installed: naming the package beats a parse error of the IR parser.
KNOWN_SUFFIXES: dict[str, str] = {".tel": "tel", ".onnx": "onnx", ".py": "nnkit"}
# Why the front end of an installed distribution is not there, by its plugin's status.
INSTALLED_BUT: dict[str, str] = {
    "failed": "{} is installed, but its plugin failed to load",
    "blocked": "{} is installed, but DLVM_DISABLE_PLUGINS leaves its plugin out",
}


def frontend_for(path: str | os.PathLike[str], reg: Registry | None = None) -> Entry | None:
    """The registered front end for `path`: the one with the longest suffix that ends its
    name (`.dl`, `.tel`, `.dl.gz`), or None."""
    reg = reg if reg is not None else registry()
    name = PurePath(path).name
    best: tuple[int, Entry] | None = None
    for entry in reg.entries["frontend"].values():
        if entry.alias_of is not None:
            continue
        for suffix in entry.options.get("suffixes", ()):
            if name.endswith(suffix) and len(name) > len(suffix) and (
                    best is None or len(suffix) > best[0]):
                best = (len(suffix), entry)
    return best[1] if best is not None else None


def load_module(path: str | os.PathLike[str], frontend: str | None = None, *,
                verify: bool = True) -> Module:
    """The module in the file `path`, read by the front end `frontend` (a registered name,
    plain or qualified) or by the one its suffix calls for, and verified unless told not.

    Raises `FrontendError` or `DiagnosticError` for bad input, and `RegistryError` for an
    unknown or missing front end (naming the package to install, with a note for each
    plugin that failed to load and might have provided it).
    """
    reg = registry()
    text = os.fspath(path)
    entry = reg.entry("frontend", frontend) if frontend is not None else frontend_for(text, reg)
    if entry is None:
        refuse_known_suffix(text, reg)
        module = read_text(text, reg)
    else:
        refuse_unreadable(text)
        module = run_frontend(entry, text, reg)
    if verify:
        verify_module(module)
    return module


def refuse_unreadable(path: str) -> None:
    """A missing file or a folder, refused in the same words (and as the same
    `DiagnosticError`) whatever front end would have read it."""
    try:
        check_input(path, what="module")
    except DlvmError as e:
        raise DiagnosticError([Diagnostic(str(e))]) from None


def refuse_known_suffix(path: str, reg: Registry) -> None:
    """A file of one of DLVM's own front ends that is not available: say which package
    provides it, rather than reading it as IR text."""
    name = PurePath(path).name
    suffix = next((s for s in KNOWN_SUFFIXES if name.endswith(s) and name != s), None)
    if suffix is None:
        return
    frontend = KNOWN_SUFFIXES[suffix]
    distribution = KNOWN_PROVIDERS[frontend]
    notes = failed_plugin_notes(reg)
    status = next((p.status for p in reg.plugins if p.distribution == distribution), None)
    if status in INSTALLED_BUT:
        why = INSTALLED_BUT[status].format(distribution)
    else:
        why = f"it is provided by {distribution}: {install_hint(distribution)}"
    raise RegistryError(f"cannot read '{path}': {suffix} files are read by the front end "
                        f"'{frontend}', which is not available ({why})", notes=notes)


def read_text(path: str, reg: Registry) -> Module:
    """DLVM's textual IR; a plugin that failed to load might have been the front end meant
    for this file, so its failure is noted under the parser's errors (not under a file
    that cannot be read at all)."""
    try:
        data = read_input(path, what="module")
    except DlvmError as e:
        raise DiagnosticError([Diagnostic(str(e))]) from None
    try:
        return parse(data, path)
    except DiagnosticError as e:
        present = {d.message for d in e.diagnostics}
        notes = [n for n in failed_plugin_notes(reg) if n not in present]
        if not notes:
            raise
        raise DiagnosticError([*e.diagnostics, *(Diagnostic(n, severity="note")
                                                 for n in notes)]) from None


def run_frontend(entry: Entry, path: str, reg: Registry) -> Module:
    """`entry`'s function on `path`. A `DlvmError` is the front end's message about the
    input; anything else raised by a third-party front end names its plugin."""
    read = entry.load()
    label = f"front end '{reg.display_name(entry)}' of {entry.plugin.label}"
    try:
        module = read(path)
    except (DlvmError, KeyboardInterrupt):
        raise
    except Exception as e:
        if entry.plugin.first_party:
            raise
        raise RegistryError(f"{label} failed on '{path}': {describe_error(e)}") from e
    if not isinstance(module, Module):
        raise RegistryError(f"{label} returned {type(module).__name__}, not a dlvm.ir.Module")
    return module
