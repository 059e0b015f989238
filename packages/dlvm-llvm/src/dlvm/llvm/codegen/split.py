"""Splitting one module's LLVM IR into parts that LLVM optimizes and compiles on its own.

llvmlite holds one lock around all of LLVM, so a module compiles on one core however many
threads ask; processes compile in parallel. A lowered DLVM module is host functions
(`dlvm.fn.*`: allocation, BLAS calls, reference counts; a gradient's is the largest) and
their kernels (`dlvm.kernel.N` and their `.task` wrappers), called only from host code
(directly or through `dlvm_parallel_for`). So these functions are spread over the parts,
balanced by their estimated LLVM time (`cost`), and the rest (entry points, exported
helpers) stays in part 0; each part is complete IR:

- a function or global another part defines is declared (an `internal` one is renamed to
  `<module>.x.<name>` and made external, so that names of several builds in one engine
  never collide);
- other internal functions (runtime helpers, math functions: small, and mostly inlined)
  and internal `constant` globals are copied into each part that uses them;
- everything a part does not reach is left out of it.

The objects are linked by the JIT engine, which resolves one object's references to
another's symbols when they are finalized together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NAME = re.compile(r'@"((?:[^"\\]|\\.)*)"|@([-a-zA-Z$._][-a-zA-Z$._0-9]*)')
QUOTED = re.compile(r'@"((?:[^"\\]|\\.)*)"')
MOVABLE = re.compile(r"dlvm\.kernel\.\d+(?:\.task)?$|dlvm\.fn\.")
KERNEL = re.compile(r"dlvm\.kernel\.")
# LLVM's time per character of IR, a kernel's against host code's (3 to 4, measured on the
# MLP training step: a kernel's loops are vectorized, with math functions inlined)
KERNEL_COST = 4
MODULE_ID = re.compile(r'^; ModuleID = "([^"]*)"', re.M)


class SplitError(ValueError):
    """IR text this splitter does not understand (it is then compiled whole)."""


@dataclass
class Entity:
    """One top-level definition or declaration of the IR text."""

    kind: str  # "define", "declare" or "global"
    name: str
    text: str
    refs: set[str] = field(default_factory=set)

    @property
    def internal(self) -> bool:
        return self.linkage in ("internal", "private")

    @property
    def linkage(self) -> str:
        head = self.text.split("\n", 1)[0]
        words = head.split("=", 1)[1].split() if self.kind == "global" else head.split()[1:]
        return words[0] if words else ""

    @property
    def copyable(self) -> bool:
        """Whether each part that uses it may hold its own copy: an internal function
        other than a kernel or a DLVM function (a runtime helper, a math function), or a
        read-only internal global."""
        head = self.text.split("\n", 1)[0]
        if self.kind == "define":
            return self.internal and not MOVABLE.match(self.name)
        return self.kind == "global" and self.internal and " constant " in head


def symbol(match: re.Match[str]) -> str:
    return match.group(1) if match.group(1) is not None else match.group(2)


def parse(text: str) -> tuple[list[str], dict[str, Entity], list[str]]:
    """The header lines, the named entities in order, and other top-level lines (types,
    attribute groups, metadata) that every part keeps."""
    header: list[str] = []
    entities: dict[str, Entity] = {}
    other: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("define "):
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            if j == len(lines):
                raise SplitError("a function body does not end")
            add(entities, "define", line, "\n".join(lines[i:j + 1]))
            i = j + 1
            continue
        if line.startswith("declare "):
            add(entities, "declare", line, line)
        elif line.startswith("@"):
            add(entities, "global", line, line)
        elif line.startswith(("; ModuleID", "target ", "source_filename")):
            header.append(line)
        elif line.strip():
            other.append(line)
        i += 1
    return header, entities, other


def add(entities: dict[str, Entity], kind: str, head: str, text: str) -> None:
    match = NAME.search(head)
    if match is None:
        raise SplitError(f"no name in '{head[:80]}'")
    name = symbol(match)
    if kind == "global" and match.start() != 0:
        raise SplitError(f"a global line that does not start with its name: '{head[:80]}'")
    refs = {symbol(m) for m in NAME.finditer(text)} - {name}
    entities[name] = Entity(kind, name, text, refs)


def split(text: str, parts: int, min_chars: int = 0) -> list[str]:
    """`text` as at most `parts` modules (one when nothing is worth moving)."""
    header, entities, other = parse(text)
    match = MODULE_ID.search(text)
    module_id = match.group(1) if match else "dlvm"
    movable = [e for e in entities.values() if e.kind == "define" and MOVABLE.match(e.name)]
    total = sum(len(e.text) for e in entities.values() if e.kind == "define")
    if parts < 2 or not movable or total < min_chars:
        return [text]
    # kernel N and its task go together; what cannot move counts toward part 0
    groups: dict[str, list[Entity]] = {}
    for e in movable:
        groups.setdefault(e.name.removesuffix(".task"), []).append(e)
    host = sum(cost(e) for e in entities.values()
               if e.kind == "define" and not MOVABLE.match(e.name) and not e.copyable)
    load = [host] + [0] * (parts - 1)
    owner: dict[str, int] = {}
    for group in sorted(groups.values(), key=lambda g: -sum(map(cost, g))):
        k = min(range(parts), key=lambda p: load[p])
        load[k] += sum(map(cost, group))
        for e in group:
            owner[e.name] = k
    for e in entities.values():
        if e.name not in owner and e.kind != "declare" and not e.copyable:
            owner[e.name] = 0
    used = sorted(set(owner.values()))
    if len(used) < 2:
        return [text]
    members = [reach(entities, owner, p) for p in used]
    shared = {name for p, names in zip(used, members, strict=True) for name in names
              if name in owner and owner[name] != p}
    renamed = {name: f"{module_id}.x.{name}" for name in shared if entities[name].internal}
    out = []
    for p, names in zip(used, members, strict=True):
        body = []
        for name, e in entities.items():
            if name not in names:
                continue
            if e.kind == "declare" or e.copyable or owner.get(name) == p:
                body.append(promote(e) if name in renamed else e.text)
            else:
                body.append(declaration(e))
        out.append(rename("\n".join([*header, *other, "", *body, ""]), renamed))
    return out


def cost(e: Entity) -> int:
    """About how long LLVM takes over `e`, in characters of host code."""
    return len(e.text) * (KERNEL_COST if KERNEL.match(e.name) else 1)


def reach(entities: dict[str, Entity], owner: dict[str, int], part: int) -> set[str]:
    """The names part `part` holds: what it owns, and what that uses (through copies)."""
    todo = [name for name, p in owner.items() if p == part]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in entities:
            continue
        seen.add(name)
        e = entities[name]
        if owner.get(name, part) == part or e.copyable:
            todo.extend(e.refs)
    return seen


def promote(e: Entity) -> str:
    """The definition of an internal entity another part uses, made external."""
    head, _, rest = e.text.partition("\n")
    if e.kind == "global":
        name, _, tail = head.partition("=")
        tail = re.sub(r"^\s*(internal|private)\s", " ", tail)
        head = f"{name}={tail}"
    else:
        head = re.sub(r"^define (internal|private) ", "define ", head)
    return head + ("\n" + rest if rest else "")


def declaration(e: Entity) -> str:
    """A declaration of an entity defined in another part."""
    head = e.text.split("\n", 1)[0]
    if e.kind == "global":
        _, _, tail = head.partition("=")
        words = tail.split()
        while words and words[0] in LINKAGE_WORDS:
            words.pop(0)
        if not words or words[0] not in ("global", "constant"):
            raise SplitError(f"a global this splitter cannot declare: '{head[:80]}'")
        kind, type_text = words[0], first_type(" ".join(words[1:]))
        return f'@"{e.name}" = external {kind} {type_text}'
    head = head.removesuffix("{").rstrip()
    if not head.endswith(")") and "{" in head:
        raise SplitError(f"a definition this splitter cannot declare: '{head[:80]}'")
    return re.sub(r"^define ((internal|private) )?", "declare ", head)


LINKAGE_WORDS = {"internal", "private", "external", "dso_local", "hidden", "protected",
                 "unnamed_addr", "local_unnamed_addr", "common", "weak", "linkonce_odr",
                 "weak_odr", "thread_local", "addrspace(0)"}


def first_type(text: str) -> str:
    """The type at the start of `text` (brackets matched)."""
    text = text.lstrip()
    if not text:
        raise SplitError("a global without a type")
    if text[0] in "[{<":
        depth = 0
        for i, ch in enumerate(text):
            if ch in "[{<":
                depth += 1
            elif ch in "]}>":
                depth -= 1
                if depth == 0:
                    return text[:i + 1]
        raise SplitError("unbalanced brackets in a global's type")
    return text.split()[0]


def rename(text: str, renamed: dict[str, str]) -> str:
    if not renamed:
        return text

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        return f'@"{renamed[name]}"' if name in renamed else m.group(0)

    return QUOTED.sub(sub, text)
