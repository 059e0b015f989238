"""TEL's parser: every statement and expression form of the grammar, every precedence level,
and the syntax errors, each a `FILE:LINE:COL` diagnostic.

Expressions are compared through `paren`, which writes a syntax tree back fully
parenthesized, so each test states how the parser grouped the source.
"""

from __future__ import annotations

import pytest

from dlvm.ir import Diagnostic, DiagnosticError
from dlvm.tel import Program, parse
from dlvm.tel.syntax import (
    Binary,
    Call,
    Concat,
    Expr,
    Name,
    Number,
    Reshape,
    Shape,
    Transpose,
    Unary,
)

# ---------------------------------------------------------------- helpers


def show_shape(shape: Shape) -> str:
    return "[" + " x ".join("_" if d is None else str(d) for d in shape) + "]"


def paren(e: Expr) -> str:
    """`e` written back with every operation in parentheses."""
    if isinstance(e, Number):
        return e.text
    if isinstance(e, Name):
        if e.time is None:
            return e.name
        step = "" if e.time == 0 else f"{e.time:+d}"
        return f"{e.name}[{e.variable}{step}]"
    if isinstance(e, Unary):
        return f"({e.op}{paren(e.x)})"
    if isinstance(e, Binary):
        return f"({paren(e.lhs)} {e.op} {paren(e.rhs)})"
    if isinstance(e, Transpose):
        return f"({paren(e.x)}^T)"
    if isinstance(e, Reshape):
        return f"({paren(e.x)} as {show_shape(e.shape)})"
    if isinstance(e, Concat):
        return "[" + ", ".join(paren(x) for x in e.items) + f"]@{e.axis}"
    if isinstance(e, Call):
        return f"{e.function}(" + ", ".join(paren(x) for x in e.args) + ")"
    raise AssertionError(e)


def program(body: str) -> Program:
    return parse("module m\n" + body, "m.tel")


def expr(text: str) -> Expr:
    """The syntax tree of one expression (names need not be declared: nothing is checked)."""
    value = program(f"y: out = {text}\n").declarations[0].value
    assert value is not None
    return value


def grouped(text: str) -> str:
    return paren(expr(text))


def syntax_errors(text: str) -> list[Diagnostic]:
    with pytest.raises(DiagnosticError) as e:
        parse(text, "m.tel")
    return e.value.diagnostics


def syntax_error(text: str) -> Diagnostic:
    """The one syntax error of `text`."""
    found = syntax_errors(text)
    assert len(found) == 1, [str(d) for d in found]
    return found[0]


def at(d: Diagnostic) -> tuple[int, int]:
    assert d.location is not None
    return d.location.line, d.location.column


# ---------------------------------------------------------------- the module header


def test_a_module_has_a_name_and_the_location_of_its_keyword() -> None:
    p = parse("// a comment first\nmodule digits\n", "m.tel")
    assert p.name == "digits"
    assert (p.location.line, p.location.column) == (2, 1)


def test_the_data_type_defaults_to_float32() -> None:
    p = program("x: in[3]\n")
    assert p.dtype == "float32"
    assert p.dtype_location is None


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float16", "float32",
                                   "float64"])
def test_type_sets_the_data_type(dtype: str) -> None:
    p = program(f"type {dtype}\n")
    assert p.dtype == dtype
    assert p.dtype_location is not None
    assert (p.dtype_location.line, p.dtype_location.column) == (2, 1)


def test_comments_with_slashes_and_hashes_are_ignored() -> None:
    p = program("// one\n# two\nx: in[3]   // three\ny: out[3] = x  # four\n")
    assert [d.name for d in p.declarations] == ["x", "y"]


def test_statements_need_no_separator() -> None:
    p = program("x: in[3] y: out[3] = x loss l = sum(y)")
    assert [(d.name, d.role) for d in p.declarations] == [("x", "in"), ("y", "out")]
    assert [loss.name for loss in p.losses] == ["l"]


# ---------------------------------------------------------------- declarations


@pytest.mark.parametrize("role", ["in", "out", "hidden", "param"])
def test_a_declaration_has_a_name_a_role_and_a_shape(role: str) -> None:
    d = program(f"w: {role}[3 x 4]\n").declarations[0]
    assert (d.name, d.role, d.shape, d.value, d.recurrent) == ("w", role, (3, 4), None, False)


def test_a_declaration_locates_its_name_and_its_shape() -> None:
    d = program("  w: param[3 x 4] = 0.0\n").declarations[0]
    assert (d.location.line, d.location.column) == (2, 3)
    assert (d.shape_location.line, d.shape_location.column) == (2, 11)


def test_a_declaration_without_a_shape_is_a_scalar() -> None:
    d = program("s: in\n").declarations[0]
    assert d.shape == ()


@pytest.mark.parametrize(("text", "shape"), [
    ("[784 x 10]", (784, 10)),
    ("[784x10]", (784, 10)),
    ("[784×10]", (784, 10)),
    ("[_ x 784]", (None, 784)),
    ("[?x784]", (None, 784)),
    ("[? x _ x 2]", (None, None, 2)),
    ("[_x_]", (None, None)),
    ("[16]", (16,)),
    ("[]", ()),
    ("[3 x\n 4]", (3, 4)),
])
def test_shapes_are_sizes_or_dynamic_dimensions_separated_by_x(text: str, shape: Shape) -> None:
    assert program(f"x: in{text}\n").declarations[0].shape == shape


def test_initializers_of_parameters_are_parsed_as_expressions() -> None:
    p = program("a: param[2] = 0.0\nb: param[2] = -1\nc: param[2 x 2] = glorot\n"
                "d: param[2] = random(-1, 1)\ne: param[2] = normal(0.1)\n")
    assert [paren(d.value) for d in p.declarations if d.value is not None] == [
        "0.0", "(-1)", "glorot", "random((-1), 1)", "normal(0.1)"]


def test_hidden_and_output_values_are_expressions() -> None:
    p = program("x: in[3]\nh: hidden[3] = tanh(x)\ny: out[3] = h + 1\n")
    assert [paren(d.value) for d in p.declarations[1:] if d.value is not None] == [
        "tanh(x)", "(h + 1)"]


def test_numbers_keep_their_text_and_are_ints_or_floats() -> None:
    cases = {"7": (7, int), "0.5": (0.5, float), "2.": (2.0, float), "1e3": (1000.0, float),
             "2.5E-2": (0.025, float)}
    for text, (value, kind) in cases.items():
        n = expr(text)
        assert isinstance(n, Number)
        assert (n.text, n.value, type(n.value)) == (text, value, kind)


# ---------------------------------------------------------------- losses


def test_a_loss_has_a_name_a_value_and_the_location_of_its_name() -> None:
    p = program("x: in[3]\nloss xent = mean(x)\n")
    (loss,) = p.losses
    assert (loss.name, paren(loss.value)) == ("xent", "mean(x)")
    assert (loss.location.line, loss.location.column) == (3, 6)


def test_losses_are_not_declarations() -> None:
    p = program("x: in[3]\nloss l = sum(x)\n")
    assert [d.name for d in p.declarations] == ["x"]


# ---------------------------------------------------------------- recurrent blocks

RNN = """\
xs: in[_ x _ x 2]
h0: in[_ x 4]
recurrent t {
    h[0] = h0
    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1] . wh)
    g: hidden[_ x 4] = h[t] * 2
}
y: out[_ x 4] = h
"""


def test_a_recurrent_block_has_a_time_variable_and_a_location() -> None:
    (block,) = program(RNN).recurrent
    assert block.variable == "t"
    assert (block.location.line, block.location.column) == (4, 1)


def test_a_recurrent_blocks_declarations_are_marked_and_listed_in_file_order() -> None:
    p = program(RNN)
    assert [(d.name, d.recurrent) for d in p.declarations] == [
        ("xs", False), ("h0", False), ("h", True), ("g", True), ("y", False)]
    assert [d.name for d in p.recurrent[0].declarations] == ["h", "g"]


def test_an_initial_state_is_written_h_of_0() -> None:
    (init,) = program(RNN).recurrent[0].initial
    assert (init.name, paren(init.value)) == ("h", "h0")
    assert (init.location.line, init.location.column) == (5, 5)


def test_time_indices_are_the_current_and_the_previous_step() -> None:
    h = program(RNN).declaration("h")
    assert h is not None and h.value is not None
    assert paren(h.value) == "tanh(((xs[t] . wx) + (h[t-1] . wh)))"


def test_a_time_index_records_its_offset_and_its_variable() -> None:
    previous, current = expr("h[t-1]"), expr("xs[t]")
    assert isinstance(previous, Name) and isinstance(current, Name)
    assert (previous.name, previous.time, previous.variable) == ("h", -1, "t")
    assert (current.name, current.time, current.variable) == ("xs", 0, "t")


def test_any_offset_parses_and_the_checker_decides_which_are_allowed() -> None:
    assert grouped("h[t-2]") == "h[t-2]"
    assert grouped("h[t+1]") == "h[t+1]"
    assert grouped("h[s]") == "h[s]"


def test_a_bracket_after_a_space_is_not_a_time_index() -> None:
    errors = syntax_errors("module m\ny: out = h [t]\n")
    assert at(errors[0]) == (2, 12)


# ---------------------------------------------------------------- expressions: primaries


def test_names_and_numbers_are_primaries() -> None:
    assert isinstance(expr("x"), Name)
    assert isinstance(expr("2"), Number)


def test_parentheses_group() -> None:
    assert grouped("(a + b) * c") == "((a + b) * c)"
    assert grouped("((a))") == "a"


def test_a_call_takes_zero_or_more_arguments() -> None:
    assert grouped("f()") == "f()"
    assert grouped("tanh(x)") == "tanh(x)"
    assert grouped("max(a, b + c)") == "max(a, (b + c))"


def test_a_concatenation_defaults_to_axis_0() -> None:
    assert grouped("[a, b]") == "[a, b]@0"


def test_a_concatenation_names_its_axis_after_an_at_sign() -> None:
    assert grouped("[a, b, c] @1") == "[a, b, c]@1"
    assert grouped("[a, b]@2") == "[a, b]@2"


def test_a_concatenations_items_are_whole_expressions() -> None:
    assert grouped("[a + b, -c^T]") == "[(a + b), (-(c^T))]@0"


# ---------------------------------------------------------------- expressions: postfix


def test_transpose_is_postfix() -> None:
    assert grouped("x^T") == "(x^T)"
    assert grouped("x ^T") == "(x^T)"


def test_reshape_is_postfix_with_a_shape() -> None:
    e = expr("x as [_ x 2]")
    assert isinstance(e, Reshape)
    assert e.shape == (None, 2)
    assert grouped("x as [3x4]") == "(x as [3 x 4])"


def test_reshape_to_a_scalar() -> None:
    assert grouped("x as []") == "(x as [])"


def test_postfix_operators_chain_left_to_right() -> None:
    assert grouped("x^T^T") == "((x^T)^T)"
    assert grouped("x as [12] as [3 x 4]") == "((x as [12]) as [3 x 4])"
    assert grouped("x as [12]^T") == "((x as [12])^T)"
    assert grouped("x^T as [12]") == "((x^T) as [12])"


def test_postfix_applies_to_calls_parentheses_and_concatenations() -> None:
    assert grouped("f(x)^T") == "(f(x)^T)"
    assert grouped("(a + b)^T") == "((a + b)^T)"
    assert grouped("[a, b]^T") == "([a, b]@0^T)"


# ---------------------------------------------------------------- expressions: precedence


def test_postfix_binds_tighter_than_unary_minus() -> None:
    assert grouped("-x^T") == "(-(x^T))"
    assert grouped("-x as [4]") == "(-(x as [4]))"


def test_unary_minus_nests() -> None:
    assert grouped("--x") == "(-(-x))"
    assert grouped("a - -b") == "(a - (-b))"


def test_unary_minus_binds_tighter_than_the_product() -> None:
    assert grouped("-a . b") == "((-a) . b)"
    assert grouped("a . -b") == "(a . (-b))"


@pytest.mark.parametrize("spelling", [".", "•", "⊗"])
def test_the_product_has_three_spellings(spelling: str) -> None:
    e = expr(f"a {spelling} b")
    assert isinstance(e, Binary)
    assert e.op == "."


def test_the_product_binds_tighter_than_times_and_divide() -> None:
    assert grouped("a * b . c") == "(a * (b . c))"
    assert grouped("a . b * c") == "((a . b) * c)"
    assert grouped("a / b • c") == "(a / (b . c))"


def test_times_and_divide_bind_tighter_than_plus_and_minus() -> None:
    assert grouped("a + b * c") == "(a + (b * c))"
    assert grouped("a * b - c") == "((a * b) - c)"
    assert grouped("a - b / c") == "(a - (b / c))"


def test_the_whole_ladder_of_precedence() -> None:
    assert grouped("a + -b^T . c * d") == "(a + (((-(b^T)) . c) * d))"
    assert grouped("x . w1 + b1") == "((x . w1) + b1)"


@pytest.mark.parametrize(("text", "expected"), [
    ("a - b - c", "((a - b) - c)"),
    ("a + b - c + d", "(((a + b) - c) + d)"),
    ("a / b / c", "((a / b) / c)"),
    ("a * b / c * d", "(((a * b) / c) * d)"),
    ("a . b . c", "((a . b) . c)"),
    ("a • b ⊗ c", "((a . b) . c)"),
])
def test_binary_operators_associate_to_the_left(text: str, expected: str) -> None:
    assert grouped(text) == expected


def test_parentheses_override_precedence_and_associativity() -> None:
    assert grouped("a - (b - c)") == "(a - (b - c))"
    assert grouped("(a + b) . c") == "((a + b) . c)"
    assert grouped("-(a . b)") == "(-(a . b))"


def test_operations_are_located_at_their_operator() -> None:
    e = expr("a  +  b")  # `y: out = ` is 9 characters: `a` is in column 10
    assert isinstance(e, Binary)
    assert (e.location.column, e.lhs.location.column, e.rhs.location.column) == (13, 10, 16)
    t = expr("a^T")
    assert isinstance(t, Transpose)
    assert t.location.column == 11


# ---------------------------------------------------------------- syntax errors


def test_a_syntax_error_is_a_diagnostic_with_file_line_and_column() -> None:
    with pytest.raises(DiagnosticError) as e:
        parse("module m\nx: inn[3]\n", "m.tel")
    assert str(e.value).startswith("m.tel:2:4: error: ")
    assert e.value.render() == (
        "m.tel:2:4: error: expected a role (in, out, hidden, param), found 'inn'\n"
        "x: inn[3]\n"
        "   ^")


def test_a_file_must_start_with_module() -> None:
    d = syntax_error("x: in[3]\n")
    assert at(d) == (1, 1)
    assert "a TEL file starts with 'module NAME', found 'x'" in d.message


def test_an_empty_file_lacks_module() -> None:
    d = syntax_error("")
    assert at(d) == (1, 1)
    assert "found the end of the file" in d.message


def test_module_needs_a_name() -> None:
    d = syntax_error("module\n")
    assert at(d) == (2, 1)
    assert "expected the module's name" in d.message


def test_module_may_appear_only_once() -> None:
    d = syntax_error("module m\nmodule n\n")
    assert at(d) == (2, 1)
    assert "'module' may appear only once" in d.message


def test_an_unknown_data_type_is_an_error_listing_the_known_ones() -> None:
    d = syntax_error("module m\ntype float31\n")
    assert at(d) == (2, 6)
    assert "unknown data type 'float31'" in d.message
    assert "float64" in d.message


def test_type_may_be_given_only_once() -> None:
    d = syntax_error("module m\ntype float32\ntype float64\n")
    assert at(d) == (3, 1)
    assert "the data type is set twice" in d.message


def test_a_declaration_needs_a_colon_after_its_name() -> None:
    d = syntax_error("module m\nx in[3]\n")
    assert at(d) == (2, 3)
    assert "expected ':' after 'x'" in d.message


@pytest.mark.parametrize("role", ["inn", "input", "output", "var"])
def test_a_bad_role_is_an_error_listing_the_roles(role: str) -> None:
    d = syntax_error(f"module m\nx: {role}[3]\n")
    assert at(d) == (2, 4)
    assert f"expected a role (in, out, hidden, param), found '{role}'" in d.message


def test_a_keyword_is_not_a_declarations_name() -> None:
    d = syntax_error("module m\nas: in[3]\n")
    assert at(d) == (2, 1)
    assert "expected a declaration" in d.message


@pytest.mark.parametrize("shape", ["[0]", "[3 x 0]", "[3 x 4 x]", "[x 4]", "[3 x x 4]",
                                   "[1.5 x 2]", "[3, 4]", "[3 x foo]", "[-3]"])
def test_a_bad_shape_is_an_error_at_its_bracket(shape: str) -> None:
    d = syntax_error(f"module m\nx: in{shape}\n")
    assert at(d) == (2, 6)
    assert d.message.startswith("bad shape '[")


@pytest.mark.parametrize("shape", ["[6 4]", "[3 x 4 5]", "[_ 4]"])
def test_sizes_without_an_x_between_them_are_a_bad_shape(shape: str) -> None:
    d = syntax_error(f"module m\nx: in{shape}\n")
    assert at(d) == (2, 6)
    assert d.message.startswith("bad shape '[")


def test_an_unclosed_shape_is_an_error() -> None:
    d = syntax_error("module m\nx: in[3 x 4 = 1\n")
    assert at(d) == (2, 13)
    assert "expected ']' to close the shape, found '='" in d.message


def test_an_unclosed_recurrent_block_is_an_error_at_the_block() -> None:
    d = syntax_error("module m\nxs: in[_ x _ x 3]\nrecurrent t {\n"
                     "    h: hidden[_ x 3] = xs[t] + h[t-1]\n")
    assert at(d) == (3, 1)
    assert "the recurrent block is not closed with '}'" in d.message


def test_a_recurrent_block_needs_a_time_variable_and_a_brace() -> None:
    first = syntax_errors("module m\nrecurrent {\n}\n")[0]
    assert at(first) == (2, 11)
    assert "expected the time variable (as in 'recurrent t {'), found '{'" in first.message
    d = syntax_error("module m\nrecurrent t\n    h: hidden[3] = x\n")
    assert at(d) == (3, 5)
    assert "expected '{' to open the recurrent block, found 'h'" in d.message


@pytest.mark.parametrize("char", ["$", "^", "!", "%", "&"])
def test_an_unexpected_character_is_an_error_at_that_character(char: str) -> None:
    d = syntax_error(f"module m\ny: out[3] = x {char} 2\n")
    assert at(d) == (2, 15)
    assert d.message == f"unexpected character {char!r}"


def test_only_the_initial_state_can_be_given_in_a_block() -> None:
    d = syntax_error("module m\nrecurrent t {\n    h[1] = 0\n}\n")
    assert at(d) == (3, 5)
    assert "only the initial state 'h[0]' can be given, not 'h[1]'" in d.message


def test_an_initial_state_needs_an_integer_step() -> None:
    d = syntax_error("module m\nrecurrent t {\n    h[t] = 0\n}\n")
    assert at(d) == (3, 7)
    assert "expected the initial step (an integer), found 't'" in d.message


def test_a_missing_operand_is_an_error() -> None:
    d = syntax_error("module m\ny: out = a *\n")
    assert at(d) == (3, 1)
    assert "expected an expression, found the end of the file" in d.message


def test_an_unclosed_parenthesis_is_an_error() -> None:
    d = syntax_error("module m\ny: out = (a + b\n")
    assert "expected ')' to close the parenthesis" in d.message


def test_an_unclosed_call_is_an_error_naming_the_function() -> None:
    d = syntax_error("module m\ny: out = tanh(a, b\n")
    assert "expected ')' to close the call of 'tanh'" in d.message


def test_a_trailing_comma_in_a_call_is_an_error() -> None:
    d = syntax_error("module m\ny: out = f(x,)\n")
    assert at(d) == (2, 14)
    assert "expected an expression, found ')'" in d.message


def test_an_unclosed_concatenation_is_an_error() -> None:
    d = syntax_error("module m\ny: out = [a, b\nz: out = a\n")
    assert "expected ']' to close the concatenation" in d.message


def test_a_concatenation_axis_is_an_integer() -> None:
    d = syntax_error("module m\ny: out = [a, b] @ a\n")
    assert at(d) == (2, 19)
    assert "expected the concatenation's axis (an integer), found 'a'" in d.message


def test_a_time_offset_is_an_integer() -> None:
    d = syntax_error("module m\ny: out = h[t-u]\n")
    assert at(d) == (2, 14)
    assert "expected a step offset (an integer), found 'u'" in d.message


def test_a_loss_needs_a_name_and_an_equals_sign() -> None:
    assert "expected the loss's name" in syntax_error("module m\nloss = x\n").message
    assert "expected '=' after the loss's name" in syntax_error("module m\nloss l x\n").message


def test_several_syntax_errors_are_reported_together_in_file_order() -> None:
    errors = syntax_errors("module m\n"
                           "x: inn[3]\n"
                           "type float31\n"
                           "w: param[3 x 0] = 0.0\n"
                           "y: out[3] = x\n"
                           "z: bogus\n")
    assert [at(d) for d in errors] == [(2, 4), (3, 6), (4, 9), (6, 4)]
    assert ["expected a role" in errors[0].message, "unknown data type" in errors[1].message,
            "bad shape" in errors[2].message, "expected a role" in errors[3].message] == [True] * 4


def test_several_errors_inside_a_recurrent_block_are_reported_together() -> None:
    errors = syntax_errors("module m\n"
                           "recurrent t {\n"
                           "    h[2] = 0\n"
                           "    h: hiden[3] = xs[t]\n"
                           "}\n"
                           "y: out[3] = h\n")
    assert [at(d) for d in errors] == [(3, 5), (4, 8)]


def test_the_rendered_errors_each_carry_a_source_line_and_a_caret() -> None:
    with pytest.raises(DiagnosticError) as e:
        parse("module m\nx: inn[3]\nz: bogus\n", "m.tel")
    lines = e.value.render().splitlines()
    assert lines == ["m.tel:2:4: error: expected a role (in, out, hidden, param), found 'inn'",
                     "x: inn[3]",
                     "   ^",
                     "m.tel:3:4: error: expected a role (in, out, hidden, param), found 'bogus'",
                     "z: bogus",
                     "   ^"]
