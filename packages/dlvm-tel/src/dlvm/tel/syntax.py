"""TEL's syntax tree: every node carries the location its diagnostics point at."""

from __future__ import annotations

from dataclasses import dataclass, field

from dlvm.ir import Location

Dim = int | None  # None: a dynamic dimension, written `_` or `?`
Shape = tuple[Dim, ...]

ROLES = ("in", "out", "hidden", "param")


@dataclass
class Expr:
    location: Location


@dataclass
class Number(Expr):
    value: float | int
    text: str


@dataclass
class Name(Expr):
    name: str
    time: int | None = None  # a time index: 0 for `h[t]`, -1 for `h[t-1]`
    variable: str | None = None  # the time variable written in the index


@dataclass
class Unary(Expr):
    op: str  # "-"
    x: Expr


@dataclass
class Binary(Expr):
    op: str  # "+", "-", "*", "/", "." (the tensor product; `•` and `⊗` are spelled ".")
    lhs: Expr
    rhs: Expr


@dataclass
class Transpose(Expr):
    x: Expr


@dataclass
class Reshape(Expr):
    x: Expr
    shape: Shape


@dataclass
class Concat(Expr):
    items: list[Expr]
    axis: int


@dataclass
class Call(Expr):
    function: str
    args: list[Expr]


@dataclass
class Declaration:
    name: str
    role: str
    shape: Shape
    value: Expr | None
    location: Location
    shape_location: Location
    recurrent: bool = False  # declared inside the recurrent block


@dataclass
class InitialState:
    """`h[0] = expr` in a recurrent block."""

    name: str
    value: Expr
    location: Location


@dataclass
class Recurrent:
    variable: str
    declarations: list[Declaration]
    initial: list[InitialState]
    location: Location


@dataclass
class Loss:
    name: str
    value: Expr
    location: Location


@dataclass
class Option:
    """`name = value` in an optimizer declaration: a number, or a list of names."""

    name: str
    value: float | int | list[str]
    location: Location


@dataclass
class OptimizerDecl:
    """`optimizer adamw(option = value, …)`: how `@train_step` updates the parameters."""

    kind: str
    options: list[Option]
    location: Location


@dataclass
class Program:
    name: str
    location: Location
    dtype: str = "float32"
    dtype_location: Location | None = None
    declarations: list[Declaration] = field(default_factory=list)  # in file order, all
    losses: list[Loss] = field(default_factory=list)
    recurrent: list[Recurrent] = field(default_factory=list)
    optimizers: list[OptimizerDecl] = field(default_factory=list)

    _index: dict[str, Declaration] = field(default_factory=dict, repr=False)
    _indexed: int = field(default=0, repr=False)

    def declaration(self, name: str) -> Declaration | None:
        """The first declaration of `name` (an index kept up to date as the list grows)."""
        for d in self.declarations[self._indexed:]:
            self._index.setdefault(d.name, d)
        self._indexed = len(self.declarations)
        return self._index.get(name)
