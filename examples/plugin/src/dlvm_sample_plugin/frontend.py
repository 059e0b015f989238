"""The front end `sample-chain`: a `.chain` file is a chain of element-wise steps.

    # twice-softsign.chain: y = 2·softsign(−x) for three numbers
    input 3 x f32
    negate
    softsign
    multiply 2

The first line gives the input's type (dimensions, then the data type; `f32` alone is a
scalar); every other line is an element-wise instruction applied to the previous result,
with a number when the instruction takes a second operand. The module has one function,
`@f`, built with `dlvm.ir.Builder` rather than written as text. A front end reports bad
input as `dlvm.ir.FrontendError`, one line that starts with `FILE:LINE:COL: error:`.
"""

from __future__ import annotations

from pathlib import Path

import dlvm.ir as ir
from dlvm.ir.types import parse_data_type

COMMENT = "#"


def load_file(path: str) -> ir.Module:
    """The module of a `.chain` file (registered as the front end for `.chain`)."""
    return Chain(path, read(path)).build()


def read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ir.FrontendError(f"cannot read '{path}': it is not UTF-8 text") from None
    except OSError as e:
        raise ir.FrontendError(f"cannot read '{path}': {e.strerror or e}") from None


class Chain:
    """One file being built: its statements, as (line, column, words)."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.statements: list[tuple[int, int, list[str]]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            code = line.split(COMMENT, 1)[0]
            if code.strip():
                column = len(code) - len(code.lstrip()) + 1
                self.statements.append((number, column, code.split()))

    def error(self, line: int, column: int, message: str) -> ir.FrontendError:
        return ir.FrontendError(f"{self.path}:{line}:{column}: error: {message}")

    def build(self) -> ir.Module:
        if not self.statements or self.statements[0][2][0] != "input":
            line, column = self.statements[0][:2] if self.statements else (1, 1)
            raise self.error(line, column, "a chain starts with 'input TYPE', e.g. "
                             "'input 3 x f32'")
        line, column, words = self.statements[0]
        input_type = self.tensor_type(line, column, words[1:])
        module = ir.Module(Path(self.path).stem)
        b = ir.Builder(module)
        fn = b.function("f", [input_type], input_type, ["x"])
        value: ir.Value = fn.entry.arguments[0]
        for line, column, words in self.statements[1:]:
            value = self.step(b, value, line, column, words)
        b.ret(value)
        fn.type = ir.FunctionType((input_type,), value.type)  # known once the chain is built
        return module

    def tensor_type(self, line: int, column: int, words: list[str]) -> ir.TensorType:
        """`3 x 4 x f32`, `_ x f32` (a dynamic dimension) or `f32`."""
        *dims, dtype_word = " ".join(words).split(" x ") if words else [""]
        dtype = parse_data_type(dtype_word.strip())
        if dtype is None:
            raise self.error(line, column, f"expected a data type such as f32 after the "
                             f"dimensions, found '{dtype_word.strip()}'")
        shape: list[int | None] = []
        for d in dims:
            if d.strip() == "_":
                shape.append(None)
            elif d.strip().isdigit() and int(d) > 0:
                shape.append(int(d))
            else:
                raise self.error(line, column, f"a dimension is a positive integer or '_', "
                                 f"found '{d.strip()}'")
        return ir.tensor(shape, dtype)

    def step(self, b: ir.Builder, value: ir.Value, line: int, column: int,
             words: list[str]) -> ir.Value:
        """`value` through one element-wise instruction, with a number when it takes two
        operands."""
        opcode, numbers = words[0], words[1:]
        op = ir.lookup(opcode)
        if op is None:
            raise self.error(line, column, f"unknown instruction '{opcode}'")
        operands = [name for name, kind in op.fields if kind == "use"]
        if "elementwise" not in op.traits or len(operands) != len(op.fields) or not (
                1 <= len(operands) <= 2):
            raise self.error(line, column, f"'{opcode}' is not an element-wise instruction "
                             "of one or two operands")
        if len(numbers) != len(operands) - 1:
            wanted = "a number" if len(operands) == 2 else "no number"
            raise self.error(line, column, f"'{opcode}' takes {wanted}")
        args: list[ir.Value | int | float] = [value]
        if numbers:
            args.append(self.number(line, column, numbers[0], value.type))
        try:
            return b.create(opcode, *args)
        except ir.TypeRuleError as e:
            raise self.error(line, column, str(e)) from None

    def number(self, line: int, column: int, word: str, like: ir.Type) -> int | float:
        """`word` as a number of `like`'s data type (the Builder makes it a literal)."""
        is_float = isinstance(like, ir.TensorType) and like.dtype.is_float
        try:
            return float(word) if is_float else int(word)
        except ValueError:
            kind = "a number" if is_float else "an integer"
            raise self.error(line, column, f"expected {kind}, found '{word}'") from None
