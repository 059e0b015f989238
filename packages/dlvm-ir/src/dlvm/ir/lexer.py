"""Tokens of DLVM's textual IR.

Newlines separate statements, so they are tokens — except inside `( )`,
`[ ]` and `< >`, where a long operand list or type may wrap freely, and
after a `,`, where an operand list may wrap.
Locations are byte offsets, turned into line:column only when a
diagnostic needs one.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from .diagnostics import Location, Source

# Token kinds
NL = "newline"
EOF = "end of file"
GLOBAL = "global"  # @name
LOCAL = "local"  # %name
BLOCK = "block"  # 'name
NOMINAL = "type name"  # $Name
FIELD = "field"  # #name
CASE = "case"  # ?name
ATTR = "attribute"  # !name
STRING = "string"
INT = "integer"
FLOAT = "float"
IDENT = "identifier"
PUNCT = "punctuation"
ERROR = "error"

MAX_DIGITS = 40  # beyond any integer type's range (i128 has 39 digits)

_NAME = r"(?:[A-Za-z_][A-Za-z0-9_.]*|[0-9]+(?:\.[0-9]+|\^[0-9]+)?)"
_PATTERN = re.compile(
    rf"""
    [ \t\r\f\v]*
    (?:
    (?P<comment>//[^\n]*)
  | (?P<nl>\n)
  | (?P<global>@{_NAME})
  | (?P<local>%{_NAME})
  | (?P<block>'{_NAME})
  | (?P<nominal>\${_NAME})
  | (?P<field>\#{_NAME})
  | (?P<case>\?{_NAME})
  | (?P<attr>!{_NAME})
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<float>-?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)
               |-?inf(?![A-Za-z0-9_])|nan(?![A-Za-z0-9_]))
  | (?P<int>-?[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>->|[()<>\[\]{{}},:=*^])
  | (?P<end>\Z)
    )
    """,
    re.VERBOSE,
)

_SPACE = re.compile(r"[ \t\r\f\v]*")
_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_DIGITS + 1},}}")

_KIND = {
    "global": GLOBAL,
    "local": LOCAL,
    "block": BLOCK,
    "nominal": NOMINAL,
    "field": FIELD,
    "case": CASE,
    "attr": ATTR,
    "string": STRING,
    "float": FLOAT,
    "int": INT,
    "ident": IDENT,
    "punct": PUNCT,
}
_OPEN = {"(": ")", "[": "]", "<": ">"}
_NUMBERED = {"int", "global", "local", "block"}
_CLOSE = {")", "]", ">"}


@dataclass(slots=True)
class Token:
    kind: str
    text: str
    offset: int

    @property
    def name(self) -> str:
        """The text without its sigil (for @ % ' $ # ? ! tokens)."""
        return self.text[1:]


class LineIndex:
    """Byte offset → (line, column), by binary search over line starts."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.starts = [0] + [m.end() for m in re.finditer("\n", source.text)]

    def location(self, offset: int) -> Location:
        line = bisect.bisect_right(self.starts, offset)
        return Location(self.source, line, offset - self.starts[line - 1] + 1)


def unescape(text: str) -> str:
    """The value of a string token (without quotes)."""
    out: list[str] = []
    it = iter(text[1:-1])
    for c in it:
        if c == "\\":
            n = next(it, "")
            out.append({"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}.get(n, n))
        else:
            out.append(c)
    return "".join(out)


def escape(text: str) -> str:
    body = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\t", "\\t")
        .replace("\r", "\\r")
    )
    return f'"{body}"'


def _newline_counts(depth: list[str]) -> bool:
    """Newlines end statements at top level and directly inside a `{ }` body."""
    return not depth or depth[-1] == "{"


def _close_brace(depth: list[str]) -> None:
    """Pop through the innermost `{`, dropping brackets left open before it."""
    while depth:
        if depth.pop() == "{":
            return


def tokenize(text: str) -> tuple[list[Token], list[tuple[int, str]]]:
    """All tokens, ending with EOF, and (offset, message) lexical errors."""
    tokens: list[Token] = []
    errors: list[tuple[int, str]] = []
    depth: list[str] = []  # open brackets
    pos, end = 0, len(text)
    match = _PATTERN.match
    append = tokens.append
    while pos < end:
        m = match(text, pos)
        if m is None:
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            ch = text[pos]
            if ch == '"':
                errors.append((pos, "unterminated string literal"))
                nl = text.find("\n", pos)
                pos = end if nl < 0 else nl
                continue
            shown = repr(ch)[1:-1] if ch.isprintable() else f"\\x{ord(ch):02x}"
            errors.append((pos, f"unexpected character '{shown}'"))
            pos += 1
            continue
        kind = m.lastgroup
        pos = m.end()
        if kind == "punct":
            tok_text = m.group(kind)
            if tok_text in _OPEN or tok_text == "{":
                depth.append(tok_text)
            elif tok_text in _CLOSE:
                if depth and depth[-1] != "{":
                    depth.pop()
            elif tok_text == "}":
                _close_brace(depth)
            append(Token(PUNCT, tok_text, m.start(kind)))
        elif kind == "nl":
            if _newline_counts(depth) and tokens and tokens[-1].kind != NL \
                    and tokens[-1].text != ",":
                append(Token(NL, "\n", m.start(kind)))
        elif kind == "comment" or kind == "end":
            pass
        else:
            tok_text = m.group(kind)  # type: ignore[arg-type]
            if kind in _NUMBERED and _LONG_NUMBER.search(tok_text):
                errors.append((m.start(kind), f"number has more than {MAX_DIGITS} digits"))
                tok_text = _LONG_NUMBER.sub("0", tok_text)
            append(Token(_KIND[kind], tok_text, m.start(kind)))  # type: ignore[index]
    tokens.append(Token(EOF, "", end))
    return tokens, errors
