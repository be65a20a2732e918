"""The calculator's numbers: which are exact, and how each is shown.

``exact_decimals`` makes the decimals a float holds as written (``12.5``) exact numbers.

``describe`` is the tool's result (``(rounded)`` after floating point); ``format_number`` the
number alone: short ints in full, huge ints in scientific notation, floats to 12 digits, and
fractions as decimals: exactly when they end within 30 places, else the fraction first and its
decimal cut to 12 places last (``4/7 = 0.571428571428…``), since the last number of an answer
is what people and ``reactbot eval`` read.
"""

from __future__ import annotations

import ast
import math
from fractions import Fraction
from typing import Final

__all__ = ["Number", "bits_of", "describe", "exact_decimals", "format_number"]

Number = int | Fraction | float
"""A value: exact (``int``, ``Fraction`` with a denominator above 1) or rounded (``float``)."""

_MAX_EXACT_INT_BITS: Final = 200  # ints up to about 60 digits are shown in full
_SCIENTIFIC_DIGITS: Final = 5
_FRACTION_DIGITS: Final = 12
"""Digits of a fraction shown after the point (significant ones below 1), then ``…``."""
_EXACT_DECIMAL_PLACES: Final = 30
"""A fraction that ends within this many decimal places is shown exactly, as a decimal."""

_EXACT_LITERAL_BITS: Final = 53
"""A decimal literal is taken exactly when it is a float exactly (``12.5``, ``0.25``, ``1e3``)
with a numerator and a denominator of at most this many bits; others stay floats."""


def exact_decimals(tree: ast.Expression, source: str) -> None:
    """Decimals written with a point or an exponent that a float holds exactly, as written,
    become exact numbers (``12.5`` -> 25/2, ``1e3`` -> 1000); ``0.1``, which a float only
    approaches, stays a float, and so says "(rounded)" in the end."""
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Constant) and isinstance(node.value, float):
            written = ast.get_source_segment(source, node)
            if written is None:
                continue
            exact = Fraction(node.value)
            if (
                max(abs(exact.numerator), exact.denominator).bit_length() <= _EXACT_LITERAL_BITS
                and Fraction(written) == exact
            ):
                # ast types a constant as what Python source can spell; the tree is ours
                node.value = exact.numerator if exact.denominator == 1 else exact  # type: ignore[assignment]


def bits_of(value: int | Fraction) -> int:
    """The size of an exact value: its numerator's or denominator's bits, the larger."""
    if isinstance(value, Fraction):
        return max(value.numerator.bit_length(), value.denominator.bit_length())
    return value.bit_length()


def describe(value: Number) -> str:
    """A result as the model and people read it: ``format_number``, and ``(rounded)`` when
    floating point made it (a decimal with a point, pi, sqrt of a non-square, sin, ...)."""
    shown = format_number(value)
    return f"{shown} (rounded)" if isinstance(value, float) else shown


def format_number(value: Number) -> str:
    """Show a number: short ints in full, huge ints in scientific notation, floats to 12
    digits, fractions as decimals: exactly when they end within 30 places, else the fraction
    and its first 12 digits (``4/7 = 0.571428571428…``)."""
    if isinstance(value, Fraction):
        return _fraction_text(value)
    if isinstance(value, int):
        if value.bit_length() <= _MAX_EXACT_INT_BITS:
            return str(value)
        return _scientific(value)
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"


def _fraction_text(value: Fraction) -> str:
    """``7/2`` -> ``3.5``; ``4/7`` -> ``4/7 = 0.571428571428…`` (the fraction first, so the
    last number is the decimal, as graders and people read the end of an answer)."""
    if value.denominator == 1:
        return format_number(value.numerator)
    sign = "-" if value < 0 else ""
    top, bottom = abs(value.numerator), value.denominator
    places = _decimal_places(bottom)
    if places is not None and places <= _EXACT_DECIMAL_PLACES and top // bottom < 10**60:
        digits = str(top * 10**places // bottom).rjust(places + 1, "0")
        return f"{sign}{digits[:-places]}.{digits[-places:]}".rstrip("0").rstrip(".")
    if top // bottom >= 10**60:
        decimal = f"≈ {sign}{_scientific(top // bottom)}"
    else:
        decimal = _leading_digits(top, bottom, sign)
    if bits_of(value) > _MAX_EXACT_INT_BITS:
        return f"{decimal} (the exact fraction is too long to show)"
    return f"{value.numerator}/{bottom} {decimal if decimal[0] == '≈' else '= ' + decimal}"


def _decimal_places(denominator: int) -> int | None:
    """Places after the point the decimal of ``n/denominator`` (in lowest terms) ends in; None
    when it never ends (a prime other than 2 and 5 divides the denominator)."""
    twos = (denominator & -denominator).bit_length() - 1
    rest, fives = denominator >> twos, 0
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    return max(twos, fives) if rest == 1 else None


def _leading_digits(top: int, bottom: int, sign: str) -> str:
    """``top/bottom`` (positive, its whole part under 60 digits) cut, not rounded, to 12
    digits: ``0.571428571428…`` (12 places after the point from 1 up, 12 significant digits
    below 1), or ``≈ 7.30505658114e-144`` below 1e-9."""
    whole, rest = divmod(top, bottom)
    if whole:
        places = str(rest * 10**_FRACTION_DIGITS // bottom).rjust(_FRACTION_DIGITS, "0")
        return f"{sign}{whole}.{places}…"
    zeros = len(str(bottom // top)) - 1  # zeros after the point, or one more
    if top * 10 ** (zeros + 1) < bottom:
        zeros += 1
    digits = str(top * 10 ** (zeros + _FRACTION_DIGITS) // bottom)[:_FRACTION_DIGITS]
    if zeros < 9:
        return f"{sign}0.{'0' * zeros}{digits}…"
    return f"≈ {sign}{digits[0]}.{digits[1:]}e-{zeros + 1:02d}"


def _scientific(value: int) -> str:
    """``1.2346e+4000`` for a huge int, without ``str()`` (limited to 4300 digits)."""
    magnitude = abs(value)
    exponent = int(math.log10(magnitude))  # may be off by one near a power of ten: fix below
    if magnitude >= 10 ** (exponent + 1):
        exponent += 1
    elif magnitude < 10**exponent:
        exponent -= 1
    leading = magnitude // 10 ** (exponent - _SCIENTIFIC_DIGITS)  # digits + 1 leading digits
    mantissa = (leading + 5) // 10  # round half up to _SCIENTIFIC_DIGITS digits
    if mantissa == 10**_SCIENTIFIC_DIGITS:
        mantissa //= 10
        exponent += 1
    digits = str(mantissa)
    fraction = digits[1:].rstrip("0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}{'.' + fraction if fraction else ''}e+{exponent}"
