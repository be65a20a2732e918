"""The calculator's in-process path: what ``is_trivial`` lets through is bounded.

Apart from tests/unit/test_calculator.py on purpose: the worker tests there send functions of
their own module to the worker, which imports that module to run them (hypothesis would make
that import slow enough to trip a one-second job timeout on a busy machine).
"""

from __future__ import annotations

from fractions import Fraction
from unittest.mock import patch

from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.tools import ToolError, calculator
from core.tools.calculator import evaluate, parse_expression


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["+", "-", "*", "/", "//", "%", "×", "÷", "−"]),
            st.one_of(
                st.integers(min_value=0, max_value=10**60).map(str),
                st.text("9", min_size=1, max_size=80),
                st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(repr),
                st.sampled_from(["pi", "e", "(-9999999999)", "-(99**1)"]),
            ),
        ),
        max_size=60,
    ),
    st.text("9", min_size=1, max_size=80),
)
@example(rest=[("*", "9" * 80)] * 5, first="9" * 80)  # the largest product 500 characters hold
@example(rest=[("/", "9" * 40), ("+", "7" * 39)] * 6, first="1")  # sums of fractions
@settings(max_examples=300, deadline=None)
def test_what_is_computed_in_the_caller_is_bounded(rest: list[tuple[str, str]], first: str) -> None:
    """Whatever passes ``is_trivial`` finishes at once with a small number (or is refused),
    from the longest literals and products that fit in the input."""
    expression = first + "".join(op + operand for op, operand in rest)
    try:
        tree = parse_expression(expression)
    except ToolError:
        return
    if not calculator.is_trivial(tree):
        assert "**" in expression
        return
    # The work is bounded by what each step handles, counted rather than timed (a clock, even
    # a CPU one, fails on a busy machine): every operand and result of every operation stays
    # within MAX_INLINE_BITS, and there are fewer operations than characters.
    sizes: list[int] = []
    binary = calculator._binary

    def counted(op: object, left: object, right: object) -> object:
        sizes.extend(_exact_bits(number) for number in (left, right))
        result = binary(op, left, right)  # type: ignore[arg-type]
        sizes.append(_exact_bits(result))
        return result

    with patch.object(calculator, "_binary", counted):
        try:
            value: int | Fraction | float | None = evaluate(expression)
        except ToolError:
            value = None
    assert len(sizes) <= 3 * len(expression)
    assert max(sizes, default=0) <= calculator.MAX_INLINE_BITS
    if isinstance(value, Fraction):
        assert value.numerator.bit_length() <= calculator.MAX_INLINE_BITS
        assert value.denominator.bit_length() <= calculator.MAX_INLINE_BITS
    assert not isinstance(value, int) or value.bit_length() <= calculator.MAX_INLINE_BITS


def _exact_bits(number: object) -> int:
    """The larger of an exact number's numerator and denominator bits; 0 for a float."""
    if isinstance(number, Fraction):
        return max(number.numerator.bit_length(), number.denominator.bit_length())
    if isinstance(number, int):
        return number.bit_length()
    return 0
