"""Source locations and compiler-style diagnostics.

Every parse or verify error is rendered as
`FILE:LINE:COL: error: MESSAGE`, then the source line and a caret.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Source:
    """A text with its name, shared by all locations into it."""

    name: str
    text: str

    def line(self, number: int) -> str:
        lines = self.text.split("\n")  # as the lexer counts lines: \f or \v do not end one
        return lines[number - 1].removesuffix("\r") if 0 < number <= len(lines) else ""


@dataclass(frozen=True, slots=True)
class Location:
    source: Source | None
    line: int
    column: int

    def __str__(self) -> str:
        name = self.source.name if self.source else "<unknown>"
        return f"{name}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    message: str
    location: Location | None = None
    severity: str = "error"

    def render(self, with_source: bool = True) -> str:
        if self.location is None:
            return f"{self.severity}: {self.message}"
        head = f"{self.location}: {self.severity}: {self.message}"
        if not with_source or self.location.source is None:
            return head
        text = self.location.source.line(self.location.line)
        if not text.strip():
            return head
        printable = "".join(c if c.isprintable() or c == "\t" else "?" for c in text)
        caret = "".join("\t" if c == "\t" else " " for c in text[: self.location.column - 1])
        return f"{head}\n{printable}\n{caret}^"

    def __str__(self) -> str:
        return self.render(with_source=False)


class DlvmError(Exception):
    """Base of every error DLVM reports to a user (as opposed to a bug)."""


@dataclass
class DiagnosticError(DlvmError):
    """Raised by `parse` and `verify`; holds every diagnostic found."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.render(with_source=False))

    def render(self, with_source: bool = True) -> str:
        return "\n".join(d.render(with_source) for d in self.diagnostics)

    def __str__(self) -> str:
        return self.render(with_source=False)


class DiagnosticSink:
    """Collects diagnostics; raises them together at the end of a phase."""

    def __init__(self, limit: int = 100) -> None:
        self.diagnostics: list[Diagnostic] = []
        self.limit = limit

    def error(self, message: str, location: Location | None = None) -> None:
        if len(self.diagnostics) < self.limit:
            self.diagnostics.append(Diagnostic(message, location))

    def sort(self) -> None:
        """Order by location, so that errors found in later phases read in file order."""
        self.diagnostics.sort(key=lambda d: (d.location is None, d.location and d.location.line,
                                             d.location and d.location.column))

    @property
    def failed(self) -> bool:
        return bool(self.diagnostics)

    def raise_if_failed(self) -> None:
        if self.diagnostics:
            raise DiagnosticError(list(self.diagnostics))
