"""Syntax corners of the text format: each parses, verifies and prints canonically."""

import pytest

import dlvm.ir as ir
from dlvm.ir import ScalarLiteral


def canonical(text: str) -> str:
    module = ir.parse(text)
    ir.verify(module)
    printed = ir.print_module(module)
    assert ir.print_module(ir.parse(printed)) == printed
    return printed


def test_header_is_optional_and_defaults_to_main_raw() -> None:
    printed = canonical("func @f: () -> f32 {\n'entry():\n    return 1.0: f32\n}\n")
    assert printed.startswith('module "main"\nstage raw\n')


def test_positional_names_print_back_and_must_match_their_position() -> None:
    text = """
func @f: (f32) -> f32 {
'0(%0^0: f32):
    %0.0 = add %0^0: f32, 1.0: f32
    branch '1(%0.0: f32)
'1(%1^0: f32):
    return %1^0: f32
}
"""
    printed = canonical(text)
    assert "'1(%1^0: f32):" in printed
    assert "@0" not in printed
    with pytest.raises(ir.DiagnosticError, match=r"positional name '%0.3'"):
        ir.parse(text.replace("%0.0 = add", "%0.3 = add"))


def test_both_apply_syntaxes_parse_and_print_the_modern_one() -> None:
    text = """
func @id: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
func @g: (f32) -> f32 {
'entry(%x: f32):
    %a = apply @id(%x: f32) -> f32
    %b = apply @id(%a: f32): (f32) -> f32
    return %b: f32
}
"""
    printed = canonical(text)
    body = printed.split("func @g")[1].split("'entry(%x: f32):")[1]
    assert body.count("-> f32\n") == 2
    assert ": (f32) -> f32" not in body


def test_adjoint_is_a_synonym_printed_as_gradient() -> None:
    text = """
func @f: (f32, f32) -> f32 {
'entry(%x: f32, %y: f32):
    %0.0 = multiply %x: f32, %y: f32
    return %0.0: f32
}
[adjoint @f wrt 0 seedable]
func @df: (f32, f32, f32) -> (f32)
"""
    assert "[gradient @f wrt 0 seedable]" in canonical(text)


def test_forward_references_to_later_functions_and_blocks() -> None:
    text = """
func @a: (i32) -> i32 {
'entry(%x: i32):
    branch 'later(%x: i32)
'later(%y: i32):
    %r = apply @b(%y: i32) -> i32
    return %r: i32
}
func @b: (i32) -> i32 {
'entry(%x: i32):
    return %x: i32
}
"""
    canonical(text)


def test_use_of_a_value_defined_in_a_later_printed_block_that_dominates() -> None:
    text = """
func @f: (bool) -> f32 {
'entry(%c: bool):
    branch 'def()
'use():
    return %v: f32
'def():
    %v = literal 2.0: f32
    branch 'use()
}
"""
    canonical(text)


def test_nominal_types_literals_memory_and_boxes() -> None:
    text = """
type $Alias = <2 x f32>
type $Handle = opaque
struct $Pair {
    #w: <2 x f32>
    #n: i64
}
enum $Tree {
    ?leaf(f32)
    ?node($Tree, $Tree)
}
var @g: $Pair
func @f: ($Alias) -> f32 {
'entry(%x: $Alias):
    %p = literal {#w = %x: $Alias, #n = 3: i64}: $Pair
    store %p: $Pair to @g: *$Pair
    %q = elementPointer @g: *$Pair at #w
    %w = load %q: *<2 x f32>
    %b = allocateBox f32
    %bp = projectBox %b: box{f32}
    %n = literal null: *f32
    %t = literal ?leaf(1.5: f32): $Tree
    %e = extract 1 from %w: <2 x f32>
    %z = literal zero: (f32, <2 x f32>)
    %u = literal undefined: $Pair
    %s = createStack
    push %e: f32 to %s: stack
    %top = pop f32 from %s: stack
    return %top: f32
}
"""
    printed = canonical(text)
    assert "box{f32}" in printed
    assert "literal null: *f32" in printed


def test_struct_fields_may_be_comma_separated_paper_style() -> None:
    text = "struct $C { #w: <784 x 10 x f32>, #b: <1 x 10 x f32>, }\n"
    assert "    #b: <1 x 10 x f32>\n}" in canonical(text)


def test_function_type_may_wrap_over_lines() -> None:
    text = """
[extern]
func @h:
  (f32,
   f32)
  -> f32
"""
    assert "[extern]\nfunc @h: (f32, f32) -> f32" in canonical(text)


def test_every_instruction_with_optional_clauses_prints_canonically() -> None:
    text = """
func @f: (<1 x 4 x 5 x 5 x f32>, <8 x 4 x 3 x 3 x f32>, <4 x 6 x f32>) -> () {
'entry(%x: <1 x 4 x 5 x 5 x f32>, %k: <8 x 4 x 3 x 3 x f32>, %m: <4 x 6 x f32>):
    %c1 = convolve %x: <1 x 4 x 5 x 5 x f32> kernel %k: <8 x 4 x 3 x 3 x f32>
    %c2 = convolve %x: <1 x 4 x 5 x 5 x f32> kernel %k: <8 x 4 x 3 x 3 x f32> strides 2, 2 padding (1, 1), (0, 2) rightDilation 1, 2
    %r = reduceWindow %m: <4 x 6 x f32> by max init -inf: f32 dims 2, 3 strides 2, 3 padding half
    %s = reduce %m: <4 x 6 x f32> by add init 0.0: f32
    %b = builtin "softmax"(%m: <4 x 6 x f32>) -> <4 x 6 x f32>
    %mx = reduce %m: <4 x 6 x f32> by builtin "max" init 0.0: f32 along 1
    %rnd = random 2 x 3 from 0.0: f32 upto 1.0: f32
    %rs = random scalar from 0: i32 upto 10: i32
    %sh = shape of %m: <4 x 6 x f32>
    return
}
"""
    printed = canonical(text)
    assert "padding (1, 1), (0, 2) rightDilation 1, 2" in printed
    assert "by max init -inf: f32" in printed
    assert "random scalar from 0: i32 upto 10: i32" in printed


def test_float_literals_print_so_that_they_reparse_exactly() -> None:
    values = ["0.1", "1e-05", "-2.5", "3.0", "1e+300", "nan", "inf", "-inf"]
    for v in values:
        text = f"func @f: () -> f64 {{\n'entry():\n    return {v}: f64\n}}\n"
        canonical(text)


def test_module_name_with_escapes_round_trips() -> None:
    printed = canonical('module "a \\"b\\"\\n"\nstage optimizable\n')
    assert printed.startswith('module "a \\"b\\"\\n"\nstage optimizable')


def test_scalar_literals_are_equal_when_written_alike() -> None:
    """Literals compare as written: signs of zero, NaN and the kind of number count."""
    assert ScalarLiteral(0.0) != ScalarLiteral(-0.0)
    assert ScalarLiteral(float("nan")) == ScalarLiteral(float("nan"))
    assert len({ScalarLiteral(1), ScalarLiteral(1.0), ScalarLiteral(True)}) == 3
    assert ScalarLiteral(2.5) == ScalarLiteral(2.5)
    assert hash(ScalarLiteral(-0.0)) == hash(ScalarLiteral(-0.0))
