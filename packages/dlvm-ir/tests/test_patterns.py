"""`dlvm.ir.patterns`: what passes match on — literals by what they hold, producers by
opcode, and the users of a value."""

from __future__ import annotations

import dlvm.ir as ir
from dlvm.ir.patterns import defined_by, has_uses, literal_of, splat_value, users

MODULE = """\
type $V = <2 x f32>

func @f: (<2 x f32>, f32) -> <2 x f32> {
'entry(%x: <2 x f32>, %s: f32):
    %one = literal 1.0: f32
    %a = multiply %x: <2 x f32>, 1.0: f32
    %b = multiply %a: <2 x f32>, %one: f32
    %c = add %b: <2 x f32>, zero: <2 x f32>
    %d = add %c: <2 x f32>, <3.0: f32, 3.0: f32>: <2 x f32>
    %e = add %d: <2 x f32>, <1.0: f32, 2.0: f32>: <2 x f32>
    %g = add %e: <2 x f32>, zero: $V
    %n = negate %g: <2 x f32>
    %m = negate %n: <2 x f32>
    %unused = negate %x: <2 x f32>
    %t = multiply %m: <2 x f32>, %s: f32
    return %t: <2 x f32>
}
"""


def instructions() -> tuple[ir.Module, dict[str, ir.Instruction]]:
    module = ir.parse(MODULE)
    return module, {i.name: i for i in module["f"].instructions() if i.name}


def test_a_literal_operand_and_a_literal_instruction_are_literals() -> None:
    _, inst = instructions()
    assert literal_of(inst["a"].rhs) is inst["a"].rhs
    assert literal_of(inst["one"]) == inst["one"].value
    assert literal_of(inst["a"]) is None
    assert literal_of(inst["t"].rhs) is None  # an argument


def test_splat_value_reads_every_uniform_literal() -> None:
    module, inst = instructions()
    assert splat_value(inst["a"].rhs) == 1.0
    assert splat_value(inst["b"].rhs) == 1.0  # through `literal`
    assert splat_value(inst["c"].rhs) == 0.0
    assert splat_value(inst["d"].rhs) == 3.0
    assert splat_value(inst["e"].rhs) is None  # elements differ
    assert splat_value(inst["t"].rhs) is None  # computed
    assert splat_value(inst["g"].rhs) is None  # a named type, unresolved
    assert splat_value(inst["g"].rhs, module) == 0.0


def test_defined_by_looks_through_an_operand_at_its_producer() -> None:
    _, inst = instructions()
    assert defined_by(inst["m"].x, "negate") is inst["n"]
    assert defined_by(inst["m"].x, "add") is None
    assert defined_by(inst["a"].lhs, "negate") is None  # an argument


def test_users_and_has_uses_follow_edits() -> None:
    module, inst = instructions()
    fn = module["f"]
    assert users(fn, inst["n"]) == [inst["m"]]
    assert not has_uses(fn, inst["unused"])
    assert has_uses(fn, fn.entry.arguments[1])
    ir.replace_all_uses(fn, inst["m"], inst["g"])  # negate (negate g) → g
    assert not has_uses(fn, inst["m"])
    assert users(fn, inst["g"]) == [inst["n"], inst["t"]]


def test_a_splat_is_equal_elements_bit_for_bit() -> None:
    module = ir.parse("""\
func @g: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %signs = multiply %x: <2 x f32>, <0.0: f32, -0.0: f32>: <2 x f32>
    %nans = add %signs: <2 x f32>, <nan: f32, nan: f32>: <2 x f32>
    return %nans: <2 x f32>
}
""")
    signs, nans = list(module["g"].instructions())[:2]
    assert splat_value(signs.rhs) is None  # 0.0 and −0.0 are two values (1/x tells)
    value = splat_value(nans.rhs)
    assert value is not None and value != value  # NaN, though NaN == NaN is false
