"""A calculator tool: an AST allow-list evaluator run in a resource-limited worker process.

``evaluate`` never calls ``eval``/``exec``/``compile``: it parses with ``ast.parse(mode="eval")``
and walks the tree itself, accepting only numbers, arithmetic and a fixed set of math functions.
Everything it allows is bounded before it is computed (input length, nesting depth, the bit
length of powers, products and factorials), so a hostile expression fails with a ``ToolError``
instead of eating the CPU or the memory. ``CalculatorTool`` adds a second wall: it evaluates in
a separate process under ``RLIMIT_AS``/``RLIMIT_CPU`` and kills it when it does not answer in
time.

Exact in, exact out: integers stay integers, and ``/`` of exact numbers is a rational
(``fractions.Fraction``), so ``123456789*987654321 + 17*23 - 4/7`` keeps every digit. A result
that does not end in decimals is shown as ``4/7 = 0.571428571428…``. A decimal written with a
point (``2.5``), ``pi``, ``e`` and the functions that are not exact (``sqrt`` of a non-square,
``sin``, ``log``, ...) are floating point: the result says ``(rounded)``.

Notation models write: ``^`` means power (``2^10``), ``×`` and ``÷`` mean ``*`` and ``/``, and
``−`` (U+2212) is a minus. Thousands separators (``1,000``) are refused, not guessed: a comma
separates function arguments, so ``max(1,000)`` could not be told apart.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import pickle
import resource
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar

from core.errors import ToolError, ToolTimeout
from core.tools import ToolDisplay, ToolHints
from core.tools.numbers import Number, describe, exact_decimals, format_number
from core.tools.numbers import bits_of as _bits

if TYPE_CHECKING:
    import asyncio

# asyncio is imported in the functions of this process that use it, not here: the worker
# imports this module too, and asyncio would be most of the time it takes to start (and so
# of the first calculation of every `reactbot ask`; bench/startup.py).

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_CHARS",
    "MAX_RESULT_BITS",
    "CalculatorTool",
    "describe",
    "evaluate",
    "format_number",
    "parse_expression",
]


MAX_INPUT_CHARS: Final = 500
MAX_DEPTH: Final = 50
MAX_RESULT_BITS: Final = 100_000  # about 30,000 digits; one such operation takes ~2 ms
MAX_ROUND_DIGITS: Final = 100

_CONSTANTS: Final[dict[str, float]] = {"pi": math.pi, "e": math.e}
_REWRITES: Final = (("^", "**"), ("×", "*"), ("÷", "/"), ("−", "-"))


# --- parsing and the allow-list ---------------------------------------------------------------


def parse_expression(expression: str) -> ast.Expression:
    """Parse and check ``expression`` against the allow-list without computing anything."""
    source = _normalise(expression)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not a valid expression: {exc.msg}") from exc
    except (RecursionError, MemoryError) as exc:
        raise ToolError("the expression is too deeply nested") from exc
    except ValueError as exc:  # e.g. a NUL byte in the source
        raise ToolError(f"not a valid expression: {exc}") from exc
    _check(tree.body, depth=0)
    exact_decimals(tree, source)
    return tree


def _normalise(expression: str) -> str:
    source = expression.strip()
    if not source:
        raise ToolError("the expression is empty")
    if len(source) > MAX_INPUT_CHARS:
        raise ToolError(
            f"the expression is too long ({len(source)} characters, at most {MAX_INPUT_CHARS})"
        )
    for old, new in _REWRITES:
        # A plain text rewrite is safe: strings are refused, so "^" can only be an operator.
        source = source.replace(old, new)
    return source


_OPERATORS: Final[dict[type[ast.operator], str]] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}
_REFUSED_OPERATORS: Final[dict[type[ast.AST], str]] = {
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Not: "not",
}
_REFUSED_NODES: Final[dict[type[ast.AST], str]] = {
    ast.Attribute: "attribute access is not allowed (write sqrt(x), not math.sqrt(x))",
    ast.Subscript: "subscripts are not allowed",
    ast.List: "lists are not allowed",
    ast.Tuple: "only one expression at a time; write numbers without thousands separators",
    ast.Set: "sets are not allowed",
    ast.Dict: "dicts are not allowed",
    ast.Lambda: "lambdas are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.Compare: "comparisons are not allowed",
    ast.BoolOp: "and/or are not allowed",
    ast.IfExp: "conditional expressions are not allowed",
    ast.NamedExpr: "assignments are not allowed",
    ast.Starred: "* unpacking is not allowed",
}


def _check(node: ast.expr, *, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ToolError(f"the expression is nested too deeply (more than {MAX_DEPTH} levels)")
    match node:
        case ast.Constant(value=value):
            _check_constant(value)
        case ast.Name(id=name) if name in _FUNCTIONS:
            raise ToolError(f"{name} is a function: write {name}(...)")
        case ast.Name(id=name) if name not in _CONSTANTS:
            raise ToolError(f"names are not allowed: {name!r} (constants: pi, e)")
        case ast.Name():
            pass
        case ast.BinOp():
            first, rest = _left_spine(node)
            _check(first, depth=depth + 1)
            for op, right in rest:
                _check_operator(op)
                _check(right, depth=depth + 1)
        case ast.UnaryOp(op=op, operand=operand):
            _check_operator(op)
            _check(operand, depth=depth + 1)
        case ast.Call(func=func, args=args, keywords=keywords):
            _check_call(func, args, keywords)
            for arg in args:
                _check(arg, depth=depth + 1)
        case _:
            raise ToolError(_REFUSED_NODES.get(type(node), f"{type(node).__name__} is not allowed"))


def _check_constant(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, complex):
            raise ToolError("complex numbers are not supported")
        kind = "strings" if isinstance(value, str | bytes) else f"{type(value).__name__} values"
        raise ToolError(f"{kind} are not allowed, only numbers")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("a number in the expression is too large")


def _check_operator(op: ast.operator | ast.unaryop) -> None:
    if type(op) in _OPERATORS or isinstance(op, ast.UAdd | ast.USub):
        return
    symbol = _REFUSED_OPERATORS.get(type(op), type(op).__name__)
    raise ToolError(f"operator not allowed: {symbol!r} (allowed: + - * / // % ** ^)")


def _check_call(func: ast.expr, args: Sequence[ast.expr], keywords: Sequence[ast.keyword]) -> None:
    if not isinstance(func, ast.Name) or func.id not in _FUNCTIONS:
        if isinstance(func, ast.Attribute):
            raise ToolError(_REFUSED_NODES[ast.Attribute])
        raise ToolError(f"only these functions: {', '.join(_FUNCTIONS)}")
    if keywords:
        raise ToolError("keyword arguments are not allowed")
    spec = _FUNCTIONS[func.id]
    if not spec.min_args <= len(args) <= spec.max_args:
        raise ToolError(f"{func.id} takes {spec.arity_text}, got {len(args)}")


def _left_spine(node: ast.BinOp) -> tuple[ast.expr, list[tuple[ast.operator, ast.expr]]]:
    """``a + b + c`` nests to the left; walking it in a loop keeps long sums within the depth."""
    rest: list[tuple[ast.operator, ast.expr]] = []
    current: ast.expr = node
    while isinstance(current, ast.BinOp):
        rest.append((current.op, current.right))
        current = current.left
    rest.reverse()
    return current, rest


# --- evaluation -------------------------------------------------------------------------------


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression; anything outside the allow-list raises ``ToolError``.
    Exact inputs give an exact ``int`` or ``Fraction``; a ``float`` says something rounded."""
    tree = parse_expression(expression)
    return _eval(tree.body, depth=0)


def _eval(node: ast.expr, *, depth: int) -> Number:
    if depth > MAX_DEPTH:  # parse_expression checked already; this guards direct callers
        raise ToolError(f"the expression is nested too deeply (more than {MAX_DEPTH} levels)")
    match node:
        case ast.Constant(value=int() | float() | Fraction() as value) if not isinstance(
            value, bool
        ):
            return value
        case ast.Name(id=name) if name in _CONSTANTS:
            return _CONSTANTS[name]
        case ast.BinOp():
            first, rest = _left_spine(node)
            total = _eval(first, depth=depth + 1)
            for op, right in rest:
                total = _binary(op, total, _eval(right, depth=depth + 1))
            return total
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand, depth=depth + 1)
        case ast.UnaryOp(op=ast.UAdd(), operand=operand):
            return +_eval(operand, depth=depth + 1)
        case ast.Call(func=ast.Name(id=name), args=args) if name in _FUNCTIONS:
            values = [_eval(arg, depth=depth + 1) for arg in args]
            return _call(name, values)
    raise ToolError(f"{type(node).__name__} is not allowed")


def _binary(op: ast.operator, left: Number, right: Number) -> Number:
    symbol = _OPERATORS.get(type(op))
    try:
        match symbol:
            case "+":
                result: Number = left + right
            case "-":
                result = left - right
            case "*":
                _check_product_size(left, right)
                result = left * right
            case "/":
                exact = not isinstance(left, float) and not isinstance(right, float)
                result = Fraction(left) / right if exact else left / right
            case "//":
                result = left // right
            case "%":
                result = left % right
            case "**":
                result = _power(left, right)
            case _:
                raise ToolError(f"operator not allowed: {type(op).__name__}")
    except ZeroDivisionError as exc:
        raise ToolError("division by zero") from exc
    except OverflowError as exc:
        raise ToolError("result too large") from exc
    except ValueError as exc:
        shown = f"{format_number(left)} {symbol} {format_number(right)}"
        raise ToolError(f"math domain error: {shown} is undefined") from exc
    return _checked(result)


def _is_exact(*values: Number) -> bool:
    return all(isinstance(value, int | Fraction) for value in values)


def _check_product_size(left: Number, right: Number) -> None:
    if isinstance(left, float) or isinstance(right, float):
        return  # float products overflow to inf, which _checked refuses
    if _bits(left) + _bits(right) > MAX_RESULT_BITS + 1:
        raise ToolError(f"result too large (more than {MAX_RESULT_BITS} bits)")


def _power(base: Number, exponent: Number) -> Number:
    if _is_exact(base) and isinstance(exponent, int):
        assert not isinstance(base, float)
        size = math.log2(max(abs(base.numerator), base.denominator, 1))
        if abs(exponent) * size > MAX_RESULT_BITS:
            raise ToolError(f"result too large (more than {MAX_RESULT_BITS} bits)")
        if exponent < 0:
            if base == 0:
                raise ToolError("division by zero")
            return 1 / Fraction(base) ** -exponent  # exact: a Fraction
        result: Number = base**exponent
        return result
    if base < 0 and not float(exponent).is_integer():
        raise ToolError("a negative number to a fractional power is not a real number")
    if base == 0 and exponent < 0:
        raise ToolError("division by zero")
    return math.pow(base, exponent)


def _checked(value: Number) -> Number:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolError("result too large")
        return value
    if _bits(value) > MAX_RESULT_BITS:
        raise ToolError(f"result too large (more than {MAX_RESULT_BITS} bits)")
    if isinstance(value, Fraction) and value.denominator == 1:
        return value.numerator  # a whole number is an int, whatever made it
    return value


# --- functions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Function:
    impl: Callable[..., Number]
    min_args: int
    max_args: int

    @property
    def arity_text(self) -> str:
        if self.max_args == _VARIADIC:
            return f"at least {self.min_args} argument{'s' if self.min_args != 1 else ''}"
        if self.min_args == self.max_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        return f"{self.min_args} to {self.max_args} arguments"


_VARIADIC: Final = MAX_INPUT_CHARS


def _call(name: str, args: list[Number]) -> Number:
    try:
        return _checked(_FUNCTIONS[name].impl(*args))
    except (ValueError, ZeroDivisionError) as exc:
        shown = ", ".join(format_number(arg) for arg in args)
        raise ToolError(f"math domain error: {name}({shown}) is undefined") from exc
    except OverflowError as exc:
        raise ToolError(f"result too large in {name}") from exc


def _rounded(func: Callable[..., float]) -> Callable[..., float]:
    """``func`` of floats: a fraction is turned into one first (a float result is rounded in
    any case); an int goes as it is, as ``math`` reads huge ones exactly (``log``)."""

    def apply(*args: Number) -> float:
        return func(*(float(a) if isinstance(a, Fraction) else a for a in args))

    return apply


def _trig(func: Callable[[float], float]) -> Callable[[Number], float]:
    def apply(x: Number) -> float:
        angle = float(x)
        result = func(angle)
        # sin(pi) is 1.2e-16 only because pi is rounded; show the 0 people expect.
        if abs(angle) >= 1 and abs(result) < min(1e-15 * abs(angle), 1e-9):
            return 0.0
        return result

    return apply


def _log(x: Number, base: Number | None = None) -> float:
    x = float(x) if isinstance(x, Fraction) else x
    if base is None:
        return math.log(x)
    return math.log(x, float(base) if isinstance(base, Fraction) else base)


def _sqrt(x: Number) -> Number:
    """Exact for the square of an exact number (``sqrt(16)``, ``sqrt(9/4)``), else rounded."""
    if _is_exact(x) and x >= 0:
        assert not isinstance(x, float)
        top, bottom = math.isqrt(x.numerator), math.isqrt(x.denominator)
        if top * top == x.numerator and bottom * bottom == x.denominator:
            return Fraction(top, bottom)
    return math.sqrt(float(x) if isinstance(x, Fraction) else x)


def _as_int(value: Number, what: str) -> int:
    if isinstance(value, float | Fraction):
        if isinstance(value, Fraction) or not value.is_integer():
            raise ToolError(f"{what} must be a whole number, got {format_number(value)}")
        return int(value)
    return value


def _factorial(x: Number) -> int:
    n = _as_int(x, "the factorial argument")
    if n < 0:
        raise ToolError("factorial is only defined for non-negative whole numbers")
    if n > 100_000 or math.lgamma(n + 1) / math.log(2) > MAX_RESULT_BITS:
        raise ToolError(f"result too large: factorial({n}) has more than {MAX_RESULT_BITS} bits")
    return math.factorial(n)


def _round(x: Number, ndigits: Number | None = None) -> Number:
    """Rounds half away from zero (2.5 -> 3, 2.675 -> 2.68), as people do by hand."""
    digits = 0 if ndigits is None else _as_int(ndigits, "round's ndigits")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise ToolError(
            f"round's ndigits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}"
        )
    if isinstance(x, int):
        return x if digits >= 0 else _round_int(x, 10**-digits)
    if isinstance(x, Fraction):
        unit = Fraction(10) ** -digits
        units = _round_int_fraction(x / unit)
        return units if ndigits is None else _checked(units * unit)
    with localcontext() as ctx:
        ctx.prec = 400 + MAX_ROUND_DIGITS  # enough for any finite float at any allowed ndigits
        rounded = Decimal(repr(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return int(rounded) if ndigits is None or digits <= 0 else float(rounded)


def _round_int_fraction(x: Fraction) -> int:
    """``x`` to the nearest whole number, half away from zero."""
    whole, rest = divmod(abs(x.numerator), x.denominator)
    if 2 * rest >= x.denominator:
        whole += 1
    return whole if x >= 0 else -whole


def _round_int(x: int, unit: int) -> int:
    quotient, remainder = divmod(abs(x), unit)
    if 2 * remainder >= unit:
        quotient += 1
    return quotient * unit if x >= 0 else -quotient * unit


def _floor(x: Number) -> int:
    return math.floor(x)


def _ceil(x: Number) -> int:
    return math.ceil(x)


def _min(*args: Number) -> Number:
    return min(args)


def _max(*args: Number) -> Number:
    return max(args)


_FUNCTIONS: Final[dict[str, _Function]] = {
    "sqrt": _Function(_sqrt, 1, 1),
    "sin": _Function(_trig(math.sin), 1, 1),
    "cos": _Function(_trig(math.cos), 1, 1),
    "tan": _Function(_trig(math.tan), 1, 1),
    "asin": _Function(_rounded(math.asin), 1, 1),
    "acos": _Function(_rounded(math.acos), 1, 1),
    "atan": _Function(_rounded(math.atan), 1, 1),
    "log": _Function(_log, 1, 2),
    "log10": _Function(_rounded(math.log10), 1, 1),
    "log2": _Function(_rounded(math.log2), 1, 1),
    "exp": _Function(_rounded(math.exp), 1, 1),
    "abs": _Function(abs, 1, 1),
    "round": _Function(_round, 1, 2),
    "floor": _Function(_floor, 1, 1),
    "ceil": _Function(_ceil, 1, 1),
    "factorial": _Function(_factorial, 1, 1),
    "hypot": _Function(_rounded(math.hypot), 1, _VARIADIC),
    "min": _Function(_min, 1, _VARIADIC),
    "max": _Function(_max, 1, _VARIADIC),
}


# --- the tool and its worker process ----------------------------------------------------------

_T = TypeVar("_T")
_R = TypeVar("_R")
_Reply = tuple[str, Any]  # ("ok", result) or ("error", message for the model)

# The worker is a bare interpreter that imports only this module: multiprocessing's "spawn"
# would re-run the parent's __main__ (the whole bot) in it, and "fork" is unsafe under threads.
# It starts without ``site`` (-S: no .pth files or editable-install finders to run, a good part
# of its start-up) on the parent's path, with the directory holding ``core`` put first.
_BOOT: Final = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from core.tools.calculator import _serve; _serve(int(sys.argv[2]), int(sys.argv[3]))"
)


def _calculate(expression: str) -> str:
    return describe(evaluate(expression))


MAX_INLINE_BITS: Final = 4096
"""Expressions whose integer literals hold at most this many bits in all are computed in the
calling process when they use nothing but ``+ - * / // %``, signs, ``pi`` and ``e``."""
_INLINE_OPERATORS: Final = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def is_trivial(tree: ast.Expression) -> bool:
    """Whether ``tree`` (already checked by ``parse_expression``) is cheap by construction, so
    that computing it in this process needs neither the worker's memory nor its CPU limit.

    Why it is bounded: with no power, factorial or other function, the numerator and the
    denominator of an exact result are each at most the product of ``2**bits(c)`` over the
    exact literals ``c`` it is computed from (their numerators' or denominators' bits, the
    larger), times 2 for each ``+``, ``-`` or ``%`` (``a/b + c/d`` is ``(ad + bc)/bd``; ``*``
    and ``/`` multiply, ``//`` shrinks, the signs keep the size). There are fewer operations
    than literals, and each literal is counted with one bit more, so no integer in it ever
    has more than ``MAX_INLINE_BITS`` bits (the input is at most
    ``MAX_INPUT_CHARS`` characters, hence at most 250 operations on numbers of a few thousand
    bits: microseconds). Anything with a float is a float: finite, or refused by
    ``_checked``; a fraction too large for a float raises ``OverflowError`` when one joins,
    refused the same way. The depth was bounded by ``parse_expression``, and ``_eval`` walks
    sums in a loop.
    """
    bits = 0
    for node in ast.walk(tree.body):
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _INLINE_OPERATORS):
                return False
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, int | Fraction):
                bits += _bits(node.value) + 1
        elif not isinstance(node, ast.UnaryOp | ast.Name | ast.operator | ast.unaryop | ast.Load):
            return False  # a call, or anything else: the worker computes it
    return bits <= MAX_INLINE_BITS


def _outcome(func: Callable[[_T], Any], arg: _T) -> _Reply:
    """``func(arg)`` as a reply: what the worker sends back, and what a trivial expression
    computed in this process gives, so that both fail with the same messages."""
    try:
        return ("ok", func(arg))
    except ToolError as exc:
        return ("error", str(exc))
    except MemoryError:
        return ("error", "the calculation ran out of memory")
    except RecursionError:
        return ("error", "the expression is too deeply nested")
    except Exception as exc:  # a bug in the evaluator: report it rather than kill the worker
        return ("error", f"the calculator failed: {type(exc).__name__}: {exc}")


class CalculatorTool:
    """The ``calculate`` tool. Evaluates in one persistent worker process, started on first use.

    The worker runs under an address-space limit and a per-job CPU limit; a job that does not
    answer within ``timeout`` seconds gets the worker killed and replaced. Call ``aclose()`` when
    done.
    """

    name = "calculate"
    display = ToolDisplay("🧮", "Calculating")
    description = (
        "Evaluates an arithmetic expression exactly (fractions stay exact; a result from "
        "decimals with a point, pi, e or sqrt, sin, log... says '(rounded)'): "
        "+ - * / // % and ^ or ** for powers, "
        "parentheses, pi, e, and sqrt, sin, cos, tan, asin, acos, atan, log(x[, base]), log10, "
        "log2, exp, abs, round(x[, ndigits]), floor, ceil, factorial, hypot, min, max. "
        "Angles are in radians. No variables, units or thousands separators."
    )
    example = "calculate[17*23+4]"
    input_name = "expression"
    hints = ToolHints(read_only=True, destructive=False, open_world=False)

    def __init__(
        self,
        *,
        timeout: float = 2.0,
        memory_limit_bytes: int = 256 * 2**20,  # the idle worker maps about 30 MB
        cpu_limit_seconds: int = 2,
        start_timeout: float = 20.0,
    ) -> None:
        import asyncio

        self._timeout = timeout
        self._memory_limit_bytes = memory_limit_bytes
        self._cpu_limit_seconds = cpu_limit_seconds
        self._start_timeout = start_timeout
        self._worker: _Worker | None = None
        self._lock = asyncio.Lock()

    async def run(self, arg: str) -> str:
        tree = parse_expression(arg)  # fail fast in this process; the worker checks again
        if is_trivial(tree):  # bounded by construction: no worker to start or wait for
            status, payload = _outcome(_calculate, arg)
            if status != "ok":
                raise ToolError(str(payload))
            result: str = payload
            return result
        return await self._submit(_calculate, arg)

    async def aclose(self) -> None:
        async with self._lock:
            worker, self._worker = self._worker, None
            if worker is not None:
                await worker.stop()

    async def _submit(self, func: Callable[[_T], _R], arg: _T) -> _R:
        """Run ``func(arg)`` in the worker; ``func`` must be importable by module and name."""
        import asyncio

        async with self._lock:
            worker = await self._ensure_worker()
            try:
                async with asyncio.timeout(self._timeout):
                    status, payload = await worker.request((func, arg))
            except TimeoutError as exc:
                await self._discard_worker()
                raise ToolTimeout(
                    f"the calculation took longer than {self._timeout:g} s and was stopped"
                ) from exc
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                returncode = await self._discard_worker()
                if returncode == -signal.SIGXCPU:
                    raise ToolTimeout(
                        "the calculation used too much CPU time and was stopped"
                    ) from exc
                raise ToolError("the calculator crashed on this input and was restarted") from exc
            except BaseException:  # cancelled mid-job: the worker's state is unknown
                self._kill_worker_now()
                raise
        if status != "ok":
            raise ToolError(str(payload))
        result: _R = payload
        return result

    async def _ensure_worker(self) -> _Worker:
        import asyncio

        if self._worker is not None and self._worker.process.returncode is None:
            return self._worker
        await self._discard_worker()
        worker = await _Worker.start(
            memory_limit_bytes=self._memory_limit_bytes, cpu_limit_seconds=self._cpu_limit_seconds
        )
        try:
            async with asyncio.timeout(self._start_timeout):
                greeting = await worker.receive()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            await worker.kill()
            raise ToolError("the calculator could not start") from exc
        except BaseException:
            worker.kill_now()
            raise
        if greeting != ("ready", None):
            await worker.kill()
            raise ToolError("the calculator could not start")
        self._worker = worker
        return worker

    async def _discard_worker(self) -> int | None:
        """Kill the worker, if any, and return its exit status."""
        worker, self._worker = self._worker, None
        return None if worker is None else await worker.kill()

    def _kill_worker_now(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill_now()


@dataclass(slots=True)
class _Worker:
    process: asyncio.subprocess.Process
    requests: asyncio.StreamWriter
    replies: asyncio.StreamReader

    @classmethod
    async def start(cls, *, memory_limit_bytes: int, cpu_limit_seconds: int) -> _Worker:
        import asyncio

        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            "-c",
            _BOOT,
            json.dumps([_package_root(), *sys.path]),
            str(memory_limit_bytes),
            str(cpu_limit_seconds),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={},  # nothing inherited: the bot's tokens and keys never reach the evaluator
        )
        if process.stdin is None or process.stdout is None:  # pragma: no cover - PIPE was asked
            raise RuntimeError("the calculator worker has no pipes")
        return cls(process, process.stdin, process.stdout)

    async def request(self, job: tuple[Callable[[Any], Any], Any]) -> _Reply:
        self.requests.write(_frame(job))
        await self.requests.drain()
        return await self.receive()

    async def receive(self) -> _Reply:
        size = int.from_bytes(await self.replies.readexactly(4), "big")
        reply: _Reply = pickle.loads(await self.replies.readexactly(size))
        return reply

    def kill_now(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def kill(self) -> int:
        self.kill_now()
        return await self.process.wait()

    async def stop(self) -> None:
        """Close the worker's stdin so it exits on its own; kill it if it does not."""
        import asyncio

        self.requests.close()
        try:
            async with asyncio.timeout(2):
                await self.process.wait()
        except TimeoutError:
            await self.kill()


def _package_root() -> str:
    """The directory ``core`` is imported from (a checkout, or an installed package's)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _frame(message: object) -> bytes:
    data = pickle.dumps(message)
    return len(data).to_bytes(4, "big") + data


def _serve(memory_limit_bytes: int, cpu_limit_seconds: int) -> None:
    """The worker's loop: read a job from stdin, answer on stdout, until stdin closes."""
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the replies
    requests = sys.stdin.buffer
    _limit_memory(memory_limit_bytes)
    _send(replies, ("ready", None))
    while (job := _read_frame(requests)) is not None:
        _limit_cpu(cpu_limit_seconds)
        _send(replies, _run_job(job))


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    size = int.from_bytes(header, "big")
    data = stream.read(size)
    return data if len(data) == size else None


def _send(stream: IO[bytes], reply: _Reply) -> None:
    stream.write(_frame(reply))
    stream.flush()


def _run_job(job: bytes) -> _Reply:
    return _outcome(_unpickled_call, job)


def _unpickled_call(job: bytes) -> Any:
    func, arg = pickle.loads(job)
    return func(arg)


def _limit_memory(limit_bytes: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit_bytes = min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, hard))


def _limit_cpu(seconds: int) -> None:
    """RLIMIT_CPU counts the process's whole life, so move the soft limit before each job."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
