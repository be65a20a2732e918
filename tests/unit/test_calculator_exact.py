"""The calculator stays exact with exact inputs (issue 42): integers and ``/`` give the very
rational, shown exactly or as true leading digits with the fraction; only floating point
(a decimal with a point, pi, sqrt of a non-square, ...) says it rounded.

Apart from test_calculator.py for the reason test_calculator_inline.py gives."""

from __future__ import annotations

import re
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from core.evals import last_number
from core.tools import ToolError
from core.tools.calculator import describe, evaluate, format_number
from tests.properties import property_settings

SMALL = st.integers(min_value=-(10**30), max_value=10**30)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> tuple[str, Fraction | None]:
    """An expression of integers with + - * / and its exact value (None: it divides by 0)."""
    if depth > 4 or draw(st.booleans()):
        n = draw(SMALL)
        return (f"({n})" if n < 0 else str(n)), Fraction(n)
    left, a = draw(expressions(depth + 1))
    right, b = draw(expressions(depth + 1))
    op = draw(st.sampled_from("+-*/"))
    text = f"({left}{op}{right})"
    if a is None or b is None:
        return text, None
    if op == "/":
        return text, None if b == 0 else a / b
    return text, {"+": a + b, "-": a - b, "*": a * b}[op]


@property_settings(300)
@given(expressions())
def test_integers_and_division_give_the_exact_rational(case: tuple[str, Fraction | None]) -> None:
    text, expected = case
    try:
        value = evaluate(text)
    except ToolError as error:
        assert expected is None and "division by zero" in str(error)
        return
    assert expected is not None
    assert not isinstance(value, float)
    assert value == expected
    assert isinstance(value, int) == (expected.denominator == 1)
    assert "(rounded)" not in describe(value)


def _shown_value(shown: str) -> tuple[Fraction, Fraction | None]:
    """The decimal a shown text ends with, and for ``digits…``/``≈ digits`` the size of one
    last digit (None: the decimal is the whole value)."""
    decimal = shown.split(" (", 1)[0].rsplit(" ", 1)[-1]
    if "…" not in decimal and "≈" not in shown:
        return Fraction(decimal), None
    digits = decimal.rstrip("…")
    mantissa, _, exponent = digits.partition("e")
    scale = Fraction(10) ** int(exponent) if exponent else Fraction(1)
    places = len(mantissa.partition(".")[2])
    return Fraction(mantissa) * scale, Fraction(10) ** -places * scale


@property_settings(400)
@given(
    st.integers(min_value=-(10**70), max_value=10**70),
    st.integers(min_value=2, max_value=10**70),
)
def test_a_fraction_is_shown_exactly_or_by_its_true_leading_digits(top: int, bottom: int) -> None:
    value = Fraction(top, bottom)
    shown = format_number(value)
    if value.denominator == 1:
        assert shown == format_number(value.numerator)
        return
    if abs(value) >= 10**60:
        assert shown.startswith("≈") and "too long to show" in shown
        return
    number, last_digit = _shown_value(shown)
    if last_digit is None:
        assert number == value  # a decimal that ends: every digit of it
        return
    assert abs(number) <= abs(value) < abs(number) + last_digit  # cut, never rounded up
    exact = re.match(r"(-?\d+)/(\d+) [=≈] ", shown)
    if exact is not None:
        assert Fraction(int(exact.group(1)), int(exact.group(2))) == value
    else:
        assert shown.endswith("(the exact fraction is too long to show)")
    assert last_number(shown) == float(number)  # what an eval grades: the decimal


@property_settings(300)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=1e12))
def test_a_decimal_is_exact_when_a_float_holds_it_as_written_else_says_rounded(
    number: float,
) -> None:
    written = repr(number)
    value = evaluate(f"{written} * 3")
    exact = Fraction(written)
    fits = max(exact.numerator, exact.denominator).bit_length() <= 53
    if Fraction(number) == exact and fits:
        assert value == exact * 3 and not isinstance(value, float)
    else:
        assert isinstance(value, float) and describe(value).endswith("(rounded)")


@property_settings(200)
@given(st.integers(0, 10**6), st.integers(0, 7))
def test_a_percentage_of_halves_and_eighths_is_exact(whole: int, eighths: int) -> None:
    """What the demo writes for "12.5% of 80": exact, so no "(rounded)" on 10."""
    rate = Fraction(whole) + Fraction(eighths, 8)
    value = evaluate(f"{whole + eighths / 8!r}/100*80")
    assert value == rate * 4 / 5 and not isinstance(value, float)


def test_the_issue_s_sum_keeps_every_digit() -> None:
    value = evaluate("123456789*987654321 + 17*23 - 4/7")
    assert value == Fraction(123456789 * 987654321 + 17 * 23) - Fraction(4, 7)
    assert describe(value) == "853528417788449616/7 = 121932631112635659.428571428571…"
    assert describe(evaluate("sqrt(2)")) == "1.41421356237 (rounded)"
    assert describe(evaluate("sqrt(16/9)")) == "4/3 = 1.333333333333…"
    assert describe(evaluate("12.5/100*80")) == "10"  # 12.5 is a float exactly
    assert describe(evaluate("0.1+0.2")) == "0.3 (rounded)"  # 0.1 is not


async def test_the_demo_says_an_exact_division_once() -> None:
    from core.agent import Agent
    from core.demo import DemoModel
    from core.events import Finished
    from core.tools import ToolRegistry
    from core.tools.calculator import CalculatorTool

    tools = ToolRegistry()
    calculator = CalculatorTool()
    tools.add(calculator)
    try:
        answers = []
        for question in ("What is 22/7?", "What is 123456789*987654321 + 17*23 - 4/7?"):
            final = [e async for e in Agent(DemoModel(), tools).run(question)][-1]
            assert isinstance(final, Finished)
            answers.append(final.answer)
    finally:
        await calculator.aclose()
    assert answers == [
        "22/7 = 3.142857142857…",
        "123456789*987654321 + 17*23 - 4/7 = 853528417788449616/7 = 121932631112635659.428571428571…",
    ]
