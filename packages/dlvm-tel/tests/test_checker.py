"""TEL's checker: every diagnostic it reports, each at its exact line and column, and the
shapes it infers for programs that check cleanly (`Checked.shapes`).

Sources are written line by line with `tel(...)`, whose first line is `module m`, so the
line numbers in the assertions can be read off the call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dlvm.tel
from dlvm.ir import Diagnostic, DiagnosticError
from dlvm.tel import Checked, check, parse
from dlvm.tel.syntax import Shape

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# ---------------------------------------------------------------- helpers


def tel(*lines: str, dtype: str = "float32") -> str:
    """A TEL file: `module m` on line 1, `type …` on line 2, then `lines` from line 3."""
    return "\n".join(["module m", f"type {dtype}", *lines]) + "\n"


def checked(text: str) -> Checked:
    return check(parse(text, "m.tel"))


def diagnostics(text: str) -> list[Diagnostic]:
    with pytest.raises(DiagnosticError) as e:
        dlvm.tel.compile(text, "m.tel")
    return e.value.diagnostics


def error(text: str) -> Diagnostic:
    """The one diagnostic of `text`."""
    found = diagnostics(text)
    assert len(found) == 1, [str(d) for d in found]
    return found[0]


def at(d: Diagnostic) -> tuple[int, int]:
    assert d.location is not None
    return d.location.line, d.location.column


def shapes(text: str) -> dict[str, Shape]:
    return checked(text).shapes


# a sequence model's common lines: lines 3 and 4
SEQ = ("xs: in[_ x _ x 2]", "wx: param[2 x 4] = glorot")


# ---------------------------------------------------------------- rendering


def test_a_diagnostic_renders_file_line_column_the_source_line_and_a_caret() -> None:
    d = error(tel("x: in[_ x 4]", "y: out[_ x 4] = xx"))
    assert d.render() == ("m.tel:4:17: error: undefined name 'xx' (did you mean 'x'?)\n"
                          "y: out[_ x 4] = xx\n"
                          "                ^")


def test_the_error_renders_every_diagnostic_and_its_str_has_no_source_lines() -> None:
    with pytest.raises(DiagnosticError) as e:
        dlvm.tel.compile(tel("x: in[3]", "y: out[3] = qq", "z: out[3] = x + rr"), "m.tel")
    assert str(e.value) == ("m.tel:4:13: error: undefined name 'qq'\n"
                            "m.tel:5:17: error: undefined name 'rr'")
    assert e.value.render().splitlines() == [
        "m.tel:4:13: error: undefined name 'qq'",
        "y: out[3] = qq",
        "            ^",
        "m.tel:5:17: error: undefined name 'rr'",
        "z: out[3] = x + rr",
        "                ^"]


# ---------------------------------------------------------------- names


def test_a_redeclaration_is_an_error_naming_the_first_line() -> None:
    d = error(tel("x: in[3]", "y: out[3] = x", "x: in[3]"))
    assert at(d) == (5, 1)
    assert d.message == "'x' is already declared (at line 3)"


def test_a_declaration_cannot_have_a_functions_name() -> None:
    d = error(tel("x: in[3]", "tanh: out[3] = x"))
    assert at(d) == (4, 1)
    assert "'tanh' is the name of a function; choose another name" in d.message


def test_a_declaration_cannot_have_an_initializers_name() -> None:
    d = error(tel("x: in[3]", "glorot: out[3] = x"))
    assert at(d) == (4, 1)
    assert "'glorot' is the name of a function" in d.message


def test_an_undefined_name_suggests_a_close_declaration() -> None:
    d = error(tel("input: in[3]", "y: out[3] = inptu * 2"))
    assert at(d) == (4, 13)
    assert d.message == "undefined name 'inptu' (did you mean 'input'?)"


def test_an_undefined_name_with_nothing_close_has_no_suggestion() -> None:
    d = error(tel("x: in[3]", "y: out[3] = x + zzz"))
    assert at(d) == (4, 17)
    assert d.message == "undefined name 'zzz'"


def test_an_initializer_is_not_a_value() -> None:
    d = error(tel("x: in[3]", "y: out[3] = x + glorot"))
    assert at(d) == (4, 17)
    assert "'glorot' is a parameter initializer, not a value" in d.message


def test_the_loss_cannot_have_a_declarations_name() -> None:
    d = error(tel("x: in[3]", "w: param[3] = 0.0", "y: out[3] = x * w", "loss y = sum(x)"))
    assert at(d) == (6, 6)
    assert "the loss 'y' has the name of a declaration" in d.message


# ---------------------------------------------------------------- calls


@pytest.mark.parametrize(("typo", "meant"), [("sigmod", "sigmoid"), ("sofmax", "softmax"),
                                             ("relu6", "relu"), ("maen", "mean")])
def test_an_unknown_function_suggests_a_close_one(typo: str, meant: str) -> None:
    d = error(tel("x: in[3]", f"y: out[3] = {typo}(x)"))
    assert at(d) == (4, 13)
    assert d.message == f"unknown function '{typo}'; did you mean '{meant}'?"


def test_a_misspelled_tanh_suggests_tanh() -> None:
    d = error(tel("x: in[3]", "y: out[3] = tahn(x)"))
    assert at(d) == (4, 13)
    assert d.message == "unknown function 'tahn'; did you mean 'tanh'?"


def test_an_unknown_function_with_nothing_close_has_no_suggestion() -> None:
    d = error(tel("x: in[3]", "y: out[3] = frobnicate(x)"))
    assert at(d) == (4, 13)
    assert d.message == "unknown function 'frobnicate'"


@pytest.mark.parametrize(("call", "message"), [
    ("max(x)", "'max' takes 2 arguments, found 1"),
    ("tanh(x, x)", "'tanh' takes 1 argument, found 2"),
    ("softmax()", "'softmax' takes 1 argument, found 0"),
    ("mse(x)", "'mse' takes 2 arguments, found 1"),
])
def test_a_call_with_the_wrong_number_of_arguments_is_an_error(call: str, message: str) -> None:
    d = error(tel("x: in[3]", f"y: out[3] = {call}"))
    assert at(d) == (4, 13)
    assert d.message == message


def test_an_initializer_cannot_be_called_in_an_expression() -> None:
    d = error(tel("x: in[3]", "y: out[3] = x + random(0, 1)"))
    assert at(d) == (4, 17)
    assert "'random' is a parameter initializer, not a function of values" in d.message


# ---------------------------------------------------------------- initializers


def test_a_parameter_without_an_initializer_is_an_error() -> None:
    d = error(tel("x: in[3]", "w: param[3]", "y: out[3] = x * w"))
    assert at(d) == (4, 1)
    assert d.message.startswith("missing initializer: the parameter 'w' needs one")


@pytest.mark.parametrize("role", ["hidden", "out"])
def test_a_computed_value_without_an_expression_is_an_error(role: str) -> None:
    lines = ["x: in[3]", f"h: {role}[3]"] + (["y: out[3] = x"] if role == "hidden" else [])
    d = error(tel(*lines))
    assert at(d) == (4, 1)
    assert d.message == (f"missing initializer: 'h' needs its defining expression "
                         f"('h: {role}[…] = …')")


def test_an_input_with_an_initializer_is_an_error_at_the_value() -> None:
    d = error(tel("x: in[3] = 1.0", "y: out[3] = x"))
    assert at(d) == (3, 12)
    assert "unexpected initializer: the input 'x' gets its value from the caller" in d.message


@pytest.mark.parametrize("value", ["0.0", "1", "-0.5", "glorot", "random(-1, 1)",
                                   "random(0.1, 0.2)", "normal(0.01)"])
def test_a_parameters_initializer_is_a_constant_random_normal_or_glorot(value: str) -> None:
    checked(tel("x: in[2]", f"w: param[2 x 2] = {value}", "y: out[2] = x . w"))


@pytest.mark.parametrize("value", ["x + 1", "w2", "2 * 3", "glorot(1)", "tanh(1)", "--1"])
def test_a_parameters_initializer_is_not_an_expression(value: str) -> None:
    d = error(tel("x: in[3]", "w2: param[3] = 0.0", f"w: param[3] = {value}",
                  "y: out[3] = x * w * w2"))
    assert at(d)[0] == 5
    assert d.message == ("a parameter's initializer is a constant, random(lo, hi), normal(σ) "
                         "or glorot, not an expression ('w')")


@pytest.mark.parametrize("bounds", ["1, 1", "2, 1", "-1, -2", "0.5, 0.5"])
def test_random_needs_lo_below_hi(bounds: str) -> None:
    d = error(tel("x: in[3]", f"w: param[3] = random({bounds})", "y: out[3] = x * w"))
    assert at(d) == (4, 15)
    assert d.message.startswith("random(lo, hi) needs lo < hi")


def test_random_reports_its_bounds_with_their_signs() -> None:
    d = error(tel("x: in[3]", "w: param[3] = random(-1, -2)", "y: out[3] = x * w"))
    assert d.message == "random(lo, hi) needs lo < hi, found random(-1, -2)"


@pytest.mark.parametrize(("sigma", "shown"), [("0", "0"), ("0.0", "0.0"), ("-0.1", "-0.1")])
def test_normal_needs_a_positive_sigma(sigma: str, shown: str) -> None:
    d = error(tel("x: in[3]", f"w: param[3] = normal({sigma})", "y: out[3] = x * w"))
    assert at(d) == (4, 15)
    assert d.message == f"normal(σ) needs σ > 0, found {shown}"


@pytest.mark.parametrize(("value", "message"), [
    ("random(1)", "random(lo, hi) takes 2 arguments, found 1"),
    ("normal(1, 2)", "normal(σ) takes 1 argument, found 2"),
])
def test_random_and_normal_take_a_fixed_number_of_arguments(value: str, message: str) -> None:
    d = error(tel("x: in[3]", f"w: param[3] = {value}", "y: out[3] = x * w"))
    assert at(d) == (4, 15)
    assert d.message == message


def test_the_arguments_of_random_are_constants() -> None:
    d = error(tel("x: in[3]", "w: param[3] = random(0, x)", "y: out[3] = x * w"))
    assert at(d) == (4, 25)
    assert d.message == "the arguments of random are constants"


def test_the_argument_of_normal_is_a_constant() -> None:
    d = error(tel("x: in[3]", "w: param[3] = normal(2 * 3)", "y: out[3] = x * w"))
    assert at(d) == (4, 24)
    assert d.message == "the arguments of normal are constants"


@pytest.mark.parametrize("shape", ["[4]", "[]"])
def test_glorot_needs_a_matrix(shape: str) -> None:
    d = error(tel("x: in[4]", f"b: param{shape} = glorot", "y: out[4] = x + b"))
    assert at(d)[0] == 4
    assert d.message.startswith(f"glorot needs a parameter of rank 2 or more ('b' is {shape})")


def test_a_parameter_needs_a_static_shape() -> None:
    d = error(tel("x: in[_ x 4]", "w: param[_ x 4] = 0.0", "y: out[_ x 4] = x * w"))
    assert at(d) == (4, 9)
    assert d.message == "the parameter 'w' needs a static shape, found [_ x 4]"


# ---------------------------------------------------------------- integer modules


@pytest.mark.parametrize("constant", ["0.5", "1.0", "1e3"])
def test_a_float_constant_in_an_integer_module_is_an_error(constant: str) -> None:
    d = error(tel("x: in[3]", f"y: out[3] = x * {constant}", dtype="int32"))
    assert at(d) == (4, 17)
    assert d.message == f"constant-type mismatch: {constant} is not an int32 constant"


def test_a_float_parameter_constant_in_an_integer_module_is_an_error() -> None:
    d = error(tel("x: in[3]", "w: param[3] = 0.5", "y: out[3] = x * w", dtype="int64"))
    assert at(d) == (4, 15)
    assert "constant-type mismatch: 0.5 is not an int64 constant" in d.message


def test_integer_constants_and_integer_functions_check_in_an_integer_module() -> None:
    c = checked(tel("x: in[3]", "w: param[3] = random(-2, 3)", "b: param[3] = -1",
                    "y: out[] = sum(relu(min(x * w + b, 2) - max(x, 0)))", dtype="int32"))
    assert c.shapes["y"] == ()


@pytest.mark.parametrize("function", ["tanh", "sigmoid", "exp", "log", "sqrt", "softmax",
                                      "log_softmax", "mean"])
def test_float_only_functions_are_errors_in_an_integer_module(function: str) -> None:
    d = error(tel("x: in[3]", f"y: out[3] = x + {function}(x)", dtype="int16"))
    assert at(d) == (4, 17)
    assert d.message == (f"'{function}' needs a floating-point type; the module's type is "
                         "int16")


def test_glorot_and_normal_are_errors_in_an_integer_module() -> None:
    found = diagnostics(tel("x: in[2]", "w: param[2 x 2] = glorot", "v: param[2] = normal(1)",
                            "y: out[2] = x . w + v", dtype="int8"))
    assert [(at(d), d.message) for d in found] == [
        ((4, 19), "glorot initializes floating-point parameters"),
        ((5, 15), "normal(σ) initializes floating-point parameters")]


def test_a_loss_in_an_integer_module_is_an_error_at_the_type() -> None:
    d = error(tel("x: in[3]", "w: param[3] = 0", "y: out[3] = x * w", "loss l = sum(y)",
                  dtype="int32"))
    assert at(d) == (2, 1)
    assert d.message == ("a loss is differentiated, so the module's type must be a "
                         "floating-point type, not int32")


# ---------------------------------------------------------------- shapes: the product


def test_the_product_of_matrices_with_mismatched_inner_dimensions_is_an_error() -> None:
    d = error(tel("a: in[3 x 4]", "b: in[3 x 4]", "y: out[3 x 4] = a . b"))
    assert at(d) == (5, 19)
    assert d.message == ("the tensor product of [3 x 4] and [3 x 4] is not defined (inner "
                         "dimensions must agree)")


@pytest.mark.parametrize(("lhs", "rhs"), [("[]", "[3]"), ("[3]", "[]"), ("[3]", "[4]"),
                                          ("[3]", "[4 x 3]"), ("[3 x 4]", "[3]"),
                                          ("[4]", "[2 x 4 x 3]"), ("[2 x 3 x 4]", "[4 x 5]")])
def test_undefined_products(lhs: str, rhs: str) -> None:
    d = error(tel(f"a: in{lhs}", f"b: in{rhs}", "y: out = a . b"))
    assert at(d) == (5, 12)
    assert d.message.startswith("the tensor product of")


def test_a_product_whose_shape_differs_from_the_declared_one_is_an_error_at_the_shape() -> None:
    d = error(tel("a: in[3 x 4]", "b: in[4 x 2]", "y: out[3 x 4] = a . b"))
    assert at(d) == (5, 7)
    assert d.message == "'y' is declared [3 x 4] but its value has shape [3 x 2]"


@pytest.mark.parametrize(("lhs", "rhs", "result"), [
    ("[4]", "[4]", ()),
    ("[4]", "[4 x 2]", (2,)),
    ("[3 x 4]", "[4]", (3,)),
    ("[3 x 4]", "[4 x 2]", (3, 2)),
    ("[5 x 3 x 4]", "[5 x 4 x 2]", (5, 3, 2)),
    ("[_ x 4]", "[4 x 2]", (None, 2)),
    ("[_ x 3 x 4]", "[5 x 4 x 2]", (5, 3, 2)),
    ("[4]", "[_ x 2]", (2,)),
])
def test_the_product_is_vector_matrix_or_batched_matrix_multiplication(
        lhs: str, rhs: str, result: Shape) -> None:
    c = checked(tel(f"a: in{lhs}", f"b: in{rhs}", "y: out[" + " x ".join(
        "_" for _ in result) + "] = a . b"))
    assert c.shapes["y"] == result


# ---------------------------------------------------------------- shapes: element-wise


@pytest.mark.parametrize(("lhs", "rhs", "result"), [
    ("[_ x 10]", "[10]", (None, 10)),
    ("[10]", "[_ x 10]", (None, 10)),
    ("[3 x 4]", "[]", (3, 4)),
    ("[3 x 1]", "[4]", (3, 4)),
    ("[3 x 1]", "[1 x 4]", (3, 4)),
    ("[2 x 3 x 4]", "[3 x 1]", (2, 3, 4)),
    ("[_]", "[5]", (5,)),
])
def test_element_wise_operations_broadcast_as_numpy_does(lhs: str, rhs: str,
                                                         result: Shape) -> None:
    for op in "+-*/":
        c = checked(tel(f"a: in{lhs}", f"b: in{rhs}", "y: out[" + " x ".join(
            "_" for _ in result) + f"] = a {op} b"))
        assert c.shapes["y"] == result


def test_shapes_that_do_not_broadcast_are_an_error_at_the_operator() -> None:
    d = error(tel("x: in[_ x 4]", "b: in[3]", "y: out[_ x 4] = x + b"))
    assert at(d) == (5, 19)
    assert d.message == "'+' of shapes [_ x 4] and [3]: they do not broadcast"


def test_min_and_max_broadcast_and_report_their_name() -> None:
    assert checked(tel("x: in[_ x 4]", "y: out[_ x 4] = max(x, 0)")).shapes["y"] == (None, 4)
    d = error(tel("x: in[2 x 4]", "b: in[3]", "y: out[2 x 4] = min(x, b)"))
    assert at(d) == (5, 17)
    assert d.message == "'min' of shapes [2 x 4] and [3]: they do not broadcast"


def test_a_broadcast_whose_shape_differs_from_the_declared_one_is_an_error() -> None:
    d = error(tel("a: in[3 x 1]", "b: in[4]", "y: out[3 x 1] = a + b"))
    assert at(d) == (5, 7)
    assert d.message == "'y' is declared [3 x 1] but its value has shape [3 x 4]"


def test_unary_minus_and_element_wise_functions_keep_the_shape() -> None:
    c = checked(tel("x: in[_ x 4]", "y: out[_ x 4] = -tanh(sigmoid(relu(-x)))"))
    assert c.shapes["y"] == (None, 4)


# ---------------------------------------------------------------- shapes: structure


def test_concatenation_adds_the_axis_sizes() -> None:
    c = checked(tel("a: in[3 x 4]", "b: in[2 x 4]", "c: in[3 x 1]",
                    "y: out[5 x 4] = [a, b]", "z: out[3 x 9] = [a, c, a] @1"))
    assert (c.shapes["y"], c.shapes["z"]) == ((5, 4), (3, 9))


def test_concatenation_with_a_dynamic_size_is_dynamic_along_the_axis() -> None:
    c = checked(tel("a: in[_ x 4]", "b: in[2 x 4]", "y: out[_ x 4] = [a, b]",
                    "z: out[2 x 8] = [b, a] @1"))
    assert (c.shapes["y"], c.shapes["z"]) == ((None, 4), (2, 8))


def test_a_concatenation_whose_shape_differs_from_the_declared_one_is_an_error() -> None:
    d = error(tel("x: in[_ x 4]", "y: out[_ x 4] = [x, x] @1"))
    assert at(d) == (4, 7)
    assert d.message == "'y' is declared [_ x 4] but its value has shape [_ x 8]"


def test_concatenated_shapes_must_agree_off_the_axis() -> None:
    d = error(tel("a: in[3 x 4]", "b: in[3 x 2]", "y: out[6 x 4] = [a, b]"))
    assert at(d) == (5, 21)
    assert d.message == "cannot concatenate [3 x 2] with [3 x 4] along axis 0"


def test_concatenated_shapes_must_have_one_rank() -> None:
    d = error(tel("a: in[3 x 4]", "b: in[4]", "y: out[4 x 4] = [a, b]"))
    assert at(d) == (5, 21)
    assert d.message == "cannot concatenate [4] with [3 x 4] along axis 0"


def test_a_concatenation_axis_must_be_in_range() -> None:
    d = error(tel("b: in[4]", "y: out[8] = [b, b] @1"))
    assert at(d) == (4, 13)
    assert d.message == "axis 1 is out of range for shape [4]"


def test_scalars_cannot_be_concatenated() -> None:
    d = error(tel("s: in", "y: out[2] = [s, s]"))
    assert at(d) == (4, 13)
    assert d.message == "scalars cannot be concatenated"


def test_reshape_gives_the_written_shape() -> None:
    c = checked(tel("a: in[3 x 4]", "x: in[_ x 4]", "y: out[2 x 6] = a as [2 x 6]",
                    "z: out[_ x 2] = x as [_ x 2]", "s: out[1] = (a as [12] as [1 x 12]) . "
                    "(a as [12])"))
    assert (c.shapes["y"], c.shapes["z"], c.shapes["s"]) == ((2, 6), (None, 2), (1,))


def test_reshape_keeps_the_element_count() -> None:
    d = error(tel("a: in[3 x 4]", "y: out[5] = a as [5]"))
    assert at(d) == (4, 15)
    assert d.message == "cannot reshape [3 x 4] (12 elements) as [5] (5 elements)"


def test_reshape_to_a_different_shape_than_declared_is_an_error() -> None:
    d = error(tel("x: in[_ x 4]", "y: out[_ x 4] = x as [3 x 5]"))
    assert at(d) == (4, 7)
    assert d.message == "'y' is declared [_ x 4] but its value has shape [3 x 5]"


def test_reshape_has_at_most_one_dynamic_dimension() -> None:
    d = error(tel("x: in[_ x 4]", "y: out[_ x _] = x as [_ x _]"))
    assert at(d) == (4, 19)
    assert d.message == "'as [_ x _]': at most one dimension can be dynamic"


def test_transpose_reverses_the_dimensions() -> None:
    c = checked(tel("a: in[2 x 3 x 4]", "b: in[4]", "y: out[4 x 3 x 2] = a^T",
                    "z: out[4] = b^T"))
    assert (c.shapes["y"], c.shapes["z"]) == ((4, 3, 2), (4,))


def test_a_transpose_declared_untransposed_is_an_error() -> None:
    d = error(tel("x: in[3 x 4]", "y: out[3 x 4] = x^T"))
    assert at(d) == (4, 7)
    assert d.message == "'y' is declared [3 x 4] but its value has shape [4 x 3]"


def test_softmax_keeps_the_shape() -> None:
    c = checked(tel("x: in[_ x 10]", "y: out[_ x 10] = softmax(x)",
                    "z: out[_ x 10] = log_softmax(x)"))
    assert (c.shapes["y"], c.shapes["z"]) == ((None, 10), (None, 10))


def test_softmax_of_a_scalar_is_an_error() -> None:
    d = error(tel("x: in", "y: out = softmax(x)"))
    assert at(d) == (4, 10)
    assert d.message == "'softmax' normalizes along the last dimension; a scalar has none"


def test_reductions_and_losses_are_scalars() -> None:
    c = checked(tel("x: in[_ x 10]", "t: in[_ x 10]", "a: out = sum(x)", "b: out = mean(x)",
                    "c: out = mse(x, t)", "d: out = cross_entropy(softmax(x), t)"))
    assert [c.shapes[n] for n in "abcd"] == [(), (), (), ()]


def test_a_scalar_declared_as_a_vector_is_an_error() -> None:
    d = error(tel("x: in[3]", "y: out[3] = sum(x)"))
    assert at(d) == (4, 7)
    assert d.message == "'y' is declared [3] but its value has shape []"


def test_a_loss_must_be_a_scalar() -> None:
    d = error(tel("x: in[_ x 4]", "w: param[4] = 0.0", "y: out[_ x 4] = x * w", "loss l = y"))
    assert at(d) == (6, 10)
    assert d.message == ("the loss must be a scalar, but 'l' has shape [_ x 4] (reduce it "
                         "with sum, mean, cross_entropy or mse)")


def test_cross_entropy_compares_two_values_of_one_shape() -> None:
    d = error(tel("x: in[_ x 4]", "t: in[_ x 3]", "w: param[4] = 0.0", "y: out[_ x 4] = x * w",
                  "loss l = cross_entropy(y, t)"))
    assert at(d) == (7, 10)
    assert d.message == ("'cross_entropy' compares a prediction and a target of one shape, "
                         "found [_ x 4] and [_ x 3]")


def test_mse_compares_two_values_of_one_shape() -> None:
    d = error(tel("x: in[4]", "t: in[3]", "w: param[4] = 0.0", "y: out[4] = x * w",
                  "loss l = mse(y, t)"))
    assert at(d) == (7, 10)
    assert "'mse' compares a prediction and a target of one shape" in d.message


@pytest.mark.parametrize("shape", ["[]", "[2 x 3 x 4]"])
def test_cross_entropy_takes_class_scores_or_a_batch_of_them(shape: str) -> None:
    d = error(tel(f"x: in{shape}", f"t: in{shape}", "w: param = 1.0", f"y: out{shape} = x * w",
                  "loss l = cross_entropy(y, t)"))
    assert at(d) == (7, 10)
    assert d.message.startswith("'cross_entropy' takes class scores [classes] or [batch x "
                                "classes]")


def test_an_inner_error_is_reported_once_at_its_place() -> None:
    d = error(tel("a: in[3 x 4]", "b: in[2]", "h: hidden[3 x 4] = tanh(a + b)",
                  "y: out[3 x 4] = h * 2"))
    assert at(d) == (5, 27)


# ---------------------------------------------------------------- dependencies and roles


def test_a_value_defined_by_itself_is_a_cycle() -> None:
    d = error(tel("x: in[3]", "h: hidden[3] = h + x", "y: out[3] = h"))
    assert at(d) == (4, 1)
    assert d.message == "'h' depends on itself (h → h)"


def test_a_dependency_cycle_is_reported_once_with_its_path() -> None:
    d = error(tel("x: in[3]", "a: hidden[3] = b + x", "b: hidden[3] = c", "c: hidden[3] = a",
                  "y: out[3] = a"))
    assert at(d) == (4, 1)
    assert d.message == "'a' depends on itself (a → b → c → a)"


def test_values_may_be_used_before_they_are_declared() -> None:
    c = checked(tel("y: out[_ x 2] = h . w", "h: hidden[_ x 3] = x * 2", "x: in[_ x 3]",
                    "w: param[3 x 2] = glorot"))
    assert c.shapes["y"] == (None, 2)


def test_a_module_needs_an_input() -> None:
    d = error(tel("y: out[] = 1.0"))
    assert at(d) == (1, 1)
    assert d.message == ("the module declares no 'in' value: a model needs at least an input "
                         "('name: in[shape]')")


def test_a_module_needs_an_output() -> None:
    d = error(tel("x: in[3]", "h: hidden[3] = x"))
    assert at(d) == (1, 1)
    assert d.message == ("the module declares no 'out' value: a model needs at least an output "
                         "('name: out[shape]')")


def test_a_loss_needs_parameters_to_minimize_over() -> None:
    d = error(tel("x: in[3]", "y: out[3] = x", "loss l = sum(y)"))
    assert at(d) == (5, 6)
    assert d.message == ("a loss is minimized over the parameters, but the module declares no "
                         "'param'")


def test_a_module_has_one_loss() -> None:
    d = error(tel("x: in[3]", "w: param[3] = 0.0", "y: out[3] = x * w", "loss l = sum(y)",
                  "loss k = mean(y)"))
    assert at(d) == (7, 6)
    assert d.message == "a module has one loss; 'l' is already declared"


# ---------------------------------------------------------------- recurrent blocks


def test_a_time_index_outside_a_block_is_an_error() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])",
                  "}", "y: out[_ x 4] = h", "loss l = sum(h[t])"))
    assert at(d) == (9, 14)
    assert d.message == "'h[t…]': a time index can be used only inside a recurrent block"


def test_a_time_index_in_a_module_without_a_block_is_an_error() -> None:
    d = error(tel("xs: in[_ x _ x 2]", "y: out[_ x 2] = xs[t]"))
    assert at(d) == (4, 17)
    assert "a time index can be used only inside a recurrent block" in d.message


def test_a_time_index_uses_the_blocks_variable() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[s-1])",
                  "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 42)
    assert d.message == "the time variable of this block is 't', not 's'"


@pytest.mark.parametrize("index", ["t-2", "t+1"])
def test_only_the_current_and_previous_steps_can_be_read(index: str) -> None:
    d = error(tel(*SEQ, "recurrent t {",
                  f"    h: hidden[_ x 4] = tanh(xs[t] . wx + h[{index}])", "}",
                  "y: out[_ x 4] = h"))
    assert at(d) == (6, 42)
    assert d.message == "only 'h[t]' and 'h[t-1]' can be read"


def test_only_the_current_element_of_a_sequence_can_be_read() -> None:
    d = error(tel(*SEQ, "recurrent t {",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + xs[t-1] . wx + h[t-1])", "}",
                  "y: out[_ x 4] = h"))
    assert at(d) == (6, 42)
    assert d.message == "only the current element 'xs[t]' of a sequence can be read"


def test_an_input_read_by_time_must_be_a_sequence() -> None:
    d = error(tel(*SEQ, "v: in[2]", "recurrent t {",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + v[t] . wx + h[t-1])", "}",
                  "y: out[_ x 4] = h"))
    assert at(d) == (7, 42)
    assert d.message == ("'v' is read by time, so it must be a sequence [batch x time x …], "
                         "found [2]")


def test_a_parameter_cannot_be_read_by_time() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x 4] = tanh(xs[t] . wx[t] + h[t-1])",
                  "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 37)
    assert d.message == ("'wx' is neither a recurrent value nor a sequence input: read it "
                         "without a time index")


def test_a_recurrent_block_must_read_a_sequence() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x 4] = tanh(h[t-1] + 1)", "}",
                  "y: out[_ x 4] = h"))
    assert at(d) == (5, 1)
    assert d.message == ("the recurrent block reads no sequence: index an input by time, as "
                         "in 'xs[t]'")


@pytest.mark.parametrize(("role", "what"), [
    ("out", "an output (declare it after the block; it reads the final state)"),
    ("param", "a parameter"),
    ("in", "an input"),
])
def test_only_hidden_values_are_declared_in_a_block(role: str, what: str) -> None:
    value = {"out": " = h", "param": " = 0.0", "in": ""}[role]
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])",
                  f"    v: {role}[_ x 4]{value}" if role != "param" else
                  f"    v: {role}[4]{value}", "}", "y: out[_ x 4] = h"))
    assert at(d) == (7, 5)
    assert d.message == f"'v': {what} cannot be declared inside a recurrent block"


def test_an_initial_state_of_an_undeclared_value_is_an_error() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    g[0] = 1.0",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 5)
    assert d.message == ("'g[0]' sets the initial state of a value the recurrent block does "
                         "not declare")


def test_an_initial_state_of_a_value_outside_the_block_is_an_error() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    y[0] = 1.0",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 5)
    assert "'y[0]' sets the initial state of a value the recurrent block does not" in d.message


def test_an_initial_state_given_twice_is_an_error_at_the_second() -> None:
    d = error(tel(*SEQ, "h0: in[_ x 4]", "recurrent t {", "    h[0] = h0", "    h[0] = h0 * 2",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert at(d) == (8, 5)
    assert d.message == "the initial state of 'h' is given twice"


def test_an_initial_state_cannot_depend_on_the_blocks_values() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h[0] = g * 2", "    g: hidden[_ x 4] = xs[t] . wx",
                  "    h: hidden[_ x 4] = tanh(g + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 5)
    assert d.message == ("the initial state 'h[0]' cannot depend on the recurrent block's "
                         "values ('g')")


def test_an_initial_state_cannot_depend_on_values_computed_after_the_block() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h[0] = y",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 5)
    assert "cannot depend on the recurrent block's values ('y')" in d.message


def test_an_initial_state_has_the_declared_shape() -> None:
    d = error(tel(*SEQ, "h0: in[_ x 5]", "recurrent t {", "    h[0] = h0",
                  "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert at(d) == (7, 12)
    assert d.message == "the initial state 'h[0]' has shape [_ x 5], but 'h' is declared [_ x 4]"


def test_a_zero_initial_state_needs_static_sizes_after_the_batch() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x _] = tanh(xs[t] . wx + h[t-1])",
                  "}", "y: out[_ x 4] = h"))
    assert at(d) == (6, 14)
    assert d.message.startswith("the zero initial state of 'h' needs a static shape after "
                                "the batch dimension, found [_ x _]")


def test_a_block_cannot_read_a_value_computed_after_it() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    g: hidden[_ x 4] = xs[t] . wx",
                  "    h: hidden[_ x 4] = tanh(g + h[t-1] + z)", "}", "z: hidden[_ x 4] = g * 2",
                  "y: out[_ x 4] = h"))
    assert at(d) == (7, 42)
    assert d.message == ("'z' is computed after the recurrent block (it reads its final "
                         "state), so the block cannot read it")


def test_a_module_has_at_most_one_recurrent_block() -> None:
    d = error(tel(*SEQ, "recurrent t {", "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])",
                  "}", "recurrent t {", "    g: hidden[_ x 4] = tanh(xs[t] . wx + g[t-1])", "}",
                  "y: out[_ x 4] = h + g"))
    assert at(d) == (8, 1)
    assert d.message == ("a module has at most one recurrent block (put every recurrent value "
                         "in one block)")


# ---------------------------------------------------------------- many errors


def test_every_error_of_a_file_is_reported_together_in_file_order() -> None:
    found = diagnostics(tel(
        "x: in[_ x 4]",                      # 3
        "w: param[4 x 3] = normal(0)",       # 4: σ ≤ 0
        "h: hidden[_ x 3] = tahn(x . w)",    # 5: unknown function
        "y: out[_ x 5] = h",                 # 6: declared [_ x 5], value [_ x 3]
        "b: param[3] = glorot",              # 7: glorot on a vector
        "loss l = y",                        # 8: not a scalar
        "loss k = sum(qq)",                  # 9: undefined; second loss
    ))
    assert [at(d) for d in found] == [(4, 19), (5, 20), (6, 7), (7, 15), (8, 10), (9, 6),
                                      (9, 14)]
    assert str(found[0]).startswith("m.tel:4:19: error: normal(σ) needs σ > 0")


def test_only_the_first_shape_error_of_an_expression_is_reported() -> None:
    found = diagnostics(tel("x: in[3]", "y: out[3] = aa + bb * cc"))
    assert [at(d) for d in found] == [(4, 13)]


def test_errors_on_one_line_are_ordered_by_column() -> None:
    found = diagnostics(tel("x: in[3]", "y: out[3] = aa  z: out[3] = bb"))
    assert [(at(d), d.message) for d in found] == [((4, 13), "undefined name 'aa'"),
                                                   ((4, 29), "undefined name 'bb'")]


# ---------------------------------------------------------------- programs that check


def test_the_digits_example_checks_with_its_shapes() -> None:
    path = EXAMPLES / "tel-digits" / "model.tel"
    c = checked(path.read_text(encoding="utf-8"))
    assert c.shapes == {"x": (None, 64), "target": (None, 10), "w1": (64, 32), "b1": (32,),
                        "w2": (32, 10), "b2": (10,), "h": (None, 32), "y": (None, 10)}
    assert (c.dtype, c.recurrent, c.sequences, c.carried) == ("float32", None, [], [])
    assert [d.name for d in c.role("param")] == ["w1", "b1", "w2", "b2"]


def test_the_rnn_example_checks_with_its_shapes_sequence_and_state() -> None:
    path = EXAMPLES / "tel-rnn" / "model.tel"
    c = checked(path.read_text(encoding="utf-8"))
    assert c.shapes == {"xs": (None, None, 2), "target": (None, 2), "wx": (2, 16),
                        "wh": (16, 16), "bh": (16,), "wy": (16, 2), "by": (2,),
                        "h": (None, 16), "y": (None, 2)}
    assert c.recurrent is not None and c.recurrent.variable == "t"
    assert (c.sequences, c.carried) == (["xs"], ["h"])


@pytest.mark.parametrize("example", ["tel-digits", "tel-rnn"])
def test_the_examples_compile(example: str) -> None:
    module = dlvm.tel.compile_file(EXAMPLES / example / "model.tel")
    assert {"inference", "loss", "loss_grad", "init_params"} <= {
        f.name for f in module.functions}


def test_inference_refines_dynamic_declared_dimensions() -> None:
    c = checked(tel("x: in[2 x 4]", "h: hidden[_ x 4] = x * 2", "y: out[_ x _] = h . h^T"))
    assert (c.shapes["h"], c.shapes["y"]) == ((2, 4), (2, 2))


def test_a_state_read_only_after_the_block_is_carried() -> None:
    c = checked(tel(*SEQ, "recurrent t {", "    g: hidden[_ x 4] = xs[t] . wx", "}",
                    "y: out[_ x 4] = g"))
    assert (c.sequences, c.carried) == (["xs"], ["g"])


def test_a_state_read_neither_later_nor_after_the_block_is_not_carried() -> None:
    c = checked(tel(*SEQ, "recurrent t {", "    g: hidden[_ x 4] = xs[t] . wx",
                    "    h: hidden[_ x 4] = tanh(g + h[t-1])", "}", "y: out[_ x 4] = h"))
    assert c.carried == ["h"]


def test_a_given_initial_state_checks() -> None:
    c = checked(tel(*SEQ, "h0: in[_ x 4]", "recurrent t {", "    h[0] = h0 * 2",
                    "    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1])", "}",
                    "y: out[_ x 4] = h"))
    assert c.shapes["h"] == (None, 4)
