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
# The most frequent tokens first: the alternatives are tried in order.
_PATTERN = re.compile(
    rf"""
    [ \t\r\f\v]*
    (?:
    (?P<punct>->|[()<>\[\]{{}},:=*^])
  | (?P<local>%{_NAME})
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*)
  | (?P<global>@{_NAME})
  | (?P<block>'{_NAME})
  | (?P<nominal>\${_NAME})
  | (?P<field>\#{_NAME})
  | (?P<case>\?{_NAME})
  | (?P<attr>!{_NAME})
  | (?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*")
  | (?P<float>-?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)
               |-?inf(?![A-Za-z0-9_])|nan(?![A-Za-z0-9_]))
  | (?P<int>-?[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<badstring>"[^\n]*)
  | (?P<bad>.)
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
# group number → token kind (None: a comment; ERROR: a character no token starts with)
_GROUP_KINDS: dict[int, str | None] = {
    index: {"comment": None, "nl": NL, "badstring": ERROR, "bad": ERROR}.get(name, _KIND.get(name))
    for name, index in _PATTERN.groupindex.items()
}
_OPEN = {"(": ")", "[": "]", "<": ">"}
_NUMBERED = {INT, GLOBAL, LOCAL, BLOCK}
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
    if "\\" not in text:  # most strings, and a dense literal's megabytes of hex digits
        return text[1:-1]
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
    append = tokens.append
    kinds = _GROUP_KINDS
    last = ""  # the previous token's text, NL included
    for m in _PATTERN.finditer(text):
        group = m.lastindex
        if group is None:  # trailing blanks
            continue
        kind = kinds[group]
        if kind is PUNCT:
            tok_text = m.group(group)
            if tok_text in _OPEN or tok_text == "{":
                depth.append(tok_text)
            elif tok_text in _CLOSE:
                if depth and depth[-1] != "{":
                    depth.pop()
            elif tok_text == "}":
                _close_brace(depth)
            append(Token(PUNCT, tok_text, m.start(group)))
        elif kind is NL:
            if _newline_counts(depth) and tokens and last != "\n" and last != ",":
                append(Token(NL, "\n", m.start(group)))
                last = "\n"
            continue
        elif kind is None:  # a comment
            continue
        elif kind is ERROR:
            at = m.start(group)
            ch = text[at]
            if ch == '"':
                errors.append((at, "unterminated string literal"))
            else:
                shown = repr(ch)[1:-1] if ch.isprintable() else f"\\x{ord(ch):02x}"
                errors.append((at, f"unexpected character '{shown}'"))
            continue
        else:
            tok_text = m.group(group)
            if len(tok_text) > MAX_DIGITS and kind in _NUMBERED \
                    and _LONG_NUMBER.search(tok_text):
                errors.append((m.start(group), f"number has more than {MAX_DIGITS} digits"))
                tok_text = _LONG_NUMBER.sub("0", tok_text)
            append(Token(kind, tok_text, m.start(group)))
        last = tok_text
    tokens.append(Token(EOF, "", len(text)))
    return tokens, errors
