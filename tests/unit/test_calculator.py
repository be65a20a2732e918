"""The calculator: what it computes, what it refuses, what it survives, and its worker process."""

from __future__ import annotations

import ast
import asyncio
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.tools import Tool, ToolError, ToolTimeout, calculator
from core.tools.calculator import (
    CalculatorTool,
    describe,
    evaluate,
    format_number,
    parse_expression,
)

FAST_SECONDS = 2.0  # every hostile input must be refused well within this


@contextmanager
def finishes_within(seconds: float) -> Iterator[None]:
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    assert elapsed < seconds, f"took {elapsed:.2f} s"


def calc(expression: str) -> str:
    return format_number(evaluate(expression))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("17*23+4", "395"),
        ("2+3*4", "14"),
        ("(2+3)*4", "20"),
        ("10-4-3", "3"),
        ("2**3**2", "512"),
        ("2^10", "1024"),
        ("2^3^2", "512"),
        ("2^3*2", "16"),
        ("-2^2", "-4"),
        ("(-2)^2", "4"),
        ("1e3", "1000"),
        ("1_000 + 1", "1001"),
        ("7/2", "3.5"),
        ("7//2", "3"),
        ("-7 % 3", "2"),
        ("2**-1", "0.5"),
        ("--3", "3"),
        ("+4", "4"),
        ("0.1+0.2", "0.3"),
        ("1/3", "1/3 = 0.333333333333…"),
        (
            "123456789*987654321 + 17*23 - 4/7",
            "853528417788449616/7 = 121932631112635659.428571428571…",
        ),
        ("2**-100", "1/1267650600228229401496703205376 ≈ 7.88860905221e-31"),
        ("1/7000000", "1/7000000 = 0.000000142857142857…"),
        ("10**70 + 1/3", "≈ 1e+70 (the exact fraction is too long to show)"),
        ("2**-3", "0.125"),
        ("1/3*3", "1"),
        ("(2/3)**-3", "3.375"),
        ("sqrt(9/4)", "1.5"),
        ("round(1/3, 2)", "0.33"),
        ("round(-5/2)", "-3"),
        ("floor(-7/2)", "-4"),
        ("factorial(10/2)", "120"),
        ("7 × 6 ÷ 2", "21"),
        ("3 − 5", "-2"),
        ("  2 + 2  ", "4"),
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.41421356237"),
        ("sin(pi)", "0"),
        ("cos(0)", "1"),
        ("cos(pi/2)", "0"),
        ("tan(pi/4)", "1"),
        ("sin(1e-20)", "1e-20"),
        ("asin(1)*2", "3.14159265359"),
        ("acos(1)", "0"),
        ("atan(1)*4", "3.14159265359"),
        ("log(e)", "1"),
        ("log(8, 2)", "3"),
        ("log(1000, 10)", "3"),
        ("log10(1000)", "3"),
        ("log2(1024)", "10"),
        ("exp(0)", "1"),
        ("abs(-3)", "3"),
        ("round(2.5)", "3"),
        ("round(-2.5)", "-3"),
        ("round(2.675, 2)", "2.68"),
        ("round(1234.5, -2)", "1200"),
        ("round(1250, -2)", "1300"),
        ("floor(-2.5)", "-3"),
        ("ceil(2.1)", "3"),
        ("factorial(20)", "2432902008176640000"),
        ("factorial(5.0)", "120"),
        ("hypot(3, 4)", "5"),
        ("min(4)", "4"),
        ("min(3, 1, 2)", "1"),
        ("max(1, 5.5, 3)", "5.5"),
        ("pi", "3.14159265359"),
        ("e", "2.71828182846"),
        ("2**100", "1267650600228229401496703205376"),
        ("+".join(["1"] * 200), "200"),  # long flat sums are not "deep"
    ],
)
def test_valid_expressions(expression: str, expected: str) -> None:
    assert calc(expression) == expected


def test_exact_integer_arithmetic_stays_int() -> None:
    assert evaluate("2^64") == 2**64
    assert isinstance(evaluate("2^64"), int)
    assert evaluate("1/2") == 0.5


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("", "empty"),
        ("x + 1", "names are not allowed: 'x'"),
        ("sqrt", "sqrt is a function"),
        ("foo(1)", "only these functions: sqrt, sin"),
        ("math.sqrt(2)", "attribute access is not allowed"),
        ("max(1, key=2)", "keyword arguments are not allowed"),
        ("max(*[1, 2])", "not allowed"),
        ("sqrt(1, 2)", "sqrt takes 1 argument, got 2"),
        ("log()", "log takes 1 to 2 arguments, got 0"),
        ("max()", "max takes at least 1 argument, got 0"),
        ("'abc'", "strings are not allowed"),
        ("b'abc'", "strings are not allowed"),
        ("True + 1", "bool values are not allowed"),
        ("1j", "complex numbers are not supported"),
        ("1e400", "too large"),
        ("[1, 2]", "lists are not allowed"),
        ("(1, 2)", "only one expression at a time"),
        ("1,000", "thousands separators"),
        ("{1: 2}", "dicts are not allowed"),
        ("(1)[0]", "subscripts are not allowed"),
        ("1 < 2", "comparisons are not allowed"),
        ("1 and 2", "and/or are not allowed"),
        ("1 if 1 else 2", "conditional expressions are not allowed"),
        ("(x := 1)", "assignments are not allowed"),
        ("1 << 3", "operator not allowed: '<<'"),
        ("1 & 3", "operator not allowed: '&'"),
        ("1 | 3", "operator not allowed: '|'"),
        ("~1", "operator not allowed: '~'"),
        ("not 1", "operator not allowed: 'not'"),
        ("2 +", "not a valid expression"),
        ("1 = 1", "not a valid expression"),
        ("1\x00", "not a valid expression"),
        ("1/0", "division by zero"),
        ("5 // 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("0.0 ** -1.5", "division by zero"),
        ("sqrt(-1)", "math domain error: sqrt(-1)"),
        ("log(0)", "math domain error"),
        ("log(5, 1)", "math domain error"),
        ("acos(2)", "math domain error"),
        ("(-8) ** (1/3)", "not a real number"),
        ("factorial(-1)", "non-negative"),
        ("factorial(2.5)", "whole number"),
        ("round(1.5, 0.5)", "whole number"),
        ("round(1, 1000)", "ndigits must be between"),
        ("exp(1000)", "result too large"),
        ("1e308 * 10", "result too large"),
        ("1e308 + 1e308", "result too large"),
        ("sqrt(10**401)", "result too large"),  # sqrt(10**400) is exactly 10**200
        ("10**400 * 1.1", "result too large"),  # 1.1 is a float: 1.5 would be exact
        ("10**30000 / 3 * 1.1", "result too large"),  # exact until a float joins
    ],
)
def test_invalid_expressions(expression: str, fragment: str) -> None:
    with pytest.raises(ToolError) as caught:
        evaluate(expression)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("(" * 10_000 + "1" + ")" * 10_000, "too long"),
        ("(" * 249 + "1" + ")" * 249, "not a valid expression"),  # the parser's own limit
        ("-" * 400 + "1", "nested too deeply"),
        ("sqrt(" * 60 + "1" + ")" * 60, "nested too deeply"),
        ("1+" * 300 + "1", "too long"),
        ("9**9**9**9", "result too large"),
        ("2**10**10", "result too large"),
        ("2**100001", "result too large"),
        ("(2**60000) * (2**60000)", "result too large"),
        ("factorial(10**6)", "result too large"),
        ("factorial(10**100)", "result too large"),
        ("round(5, -10**9)", "ndigits must be between"),
        ("().__class__", "attribute access is not allowed"),
        ("().__class__.__bases__[0].__subclasses__()", "not allowed"),
        ("__import__('os').system('true')", "not allowed"),
        ("__import__('os')", "only these functions"),
        ("'{0.__class__}'.format(1)", "attribute access is not allowed"),
        ("f'{1+1}'", "f-strings are not allowed"),
        ("'a' * 10**9", "strings are not allowed"),
        ("[1] * 10**9", "lists are not allowed"),
        ("lambda: 1", "lambdas are not allowed"),
        ("[x for x in (1, 2)]", "comprehensions are not allowed"),
        ("sum(x for x in (1, 2))", "only these functions"),
        ("(lambda: 1)()", "only these functions"),
        ("eval('1')", "only these functions"),
        ("max.__globals__", "attribute access is not allowed"),
        ("1" * 600, "too long"),
    ],
)
def test_hostile_input_is_refused_quickly(expression: str, fragment: str) -> None:
    with finishes_within(FAST_SECONDS), pytest.raises(ToolError) as caught:
        evaluate(expression)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    "expression",
    [
        "3**63000%7**17750+" * 26 + "0",  # near the bit limit, repeated to the length limit
        "factorial(8000)+" * 30 + "0",
        "(2**99999-1)//(2**49999+1)+" * 17 + "0",
    ],
)
def test_the_costliest_allowed_input_is_still_cheap(expression: str) -> None:
    with finishes_within(FAST_SECONDS):
        calc(expression)


def test_parser_exhaustion_becomes_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(source: str, mode: str) -> ast.Expression:
        raise RecursionError

    monkeypatch.setattr(ast, "parse", exhausted)
    with pytest.raises(ToolError, match="too deeply nested"):
        evaluate("1")


def test_the_module_never_evaluates_source_text() -> None:
    source = Path(calculator.__file__).read_text(encoding="utf-8")
    assert not re.search(r"\b(eval|exec|compile)\(", source)


# --- formatting -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-17, "-17"),
        (10**60, "1" + "0" * 60),  # up to about 60 digits in full
        (2**20000, "3.9803e+6020"),
        (-(2**20000), "-3.9803e+6020"),
        (10**5000, "1e+5000"),
        (10**5000 - 1, "1e+5000"),  # rounds up across the power of ten
        (10**5000 + 10**4996 * 2345, "1.2345e+5000"),
        (3**63000, "4.3556e+30058"),
        (4.0, "4"),
        (-0.0, "0"),
        (1.0000000000000002, "1"),
        (0.1 + 0.2, "0.3"),
        (1 / 3, "0.333333333333"),
        (1e20, "1e+20"),
        (1.5e-7, "1.5e-07"),
        (123456.789, "123456.789"),
    ],
    ids=lambda value: f"{value.bit_length()}-bit" if isinstance(value, int) else None,
)
def test_format_number(value: int | float, expected: str) -> None:
    assert format_number(value) == expected


def test_format_huge_int_is_fast_and_avoids_str_limit() -> None:
    with finishes_within(FAST_SECONDS):
        assert format_number(2**99_999).startswith("4.995e+30102")


def test_parse_expression_checks_without_computing() -> None:
    with finishes_within(0.5):
        parse_expression("2**99999 * 3**60000")  # too large, but only evaluation knows
    with pytest.raises(ToolError):
        parse_expression("x")


# --- the tool and its worker ------------------------------------------------------------------


@pytest.fixture
async def tool() -> AsyncIterator[CalculatorTool]:
    # Room for a loaded machine (a shared 2-core CI runner); the timeout test has its own.
    tool = CalculatorTool(timeout=10.0)
    yield tool
    await tool.aclose()


def worker_pid(tool: CalculatorTool) -> int:
    worker = tool._worker
    assert worker is not None
    return worker.process.pid


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_tool_fits_the_protocol() -> None:
    tool = CalculatorTool()
    assert isinstance(tool, Tool)
    assert tool.name == "calculate"
    assert tool.example == "calculate[17*23+4]"
    assert tool._worker is None  # nothing starts in the constructor


async def test_run_evaluates_in_the_worker(tool: CalculatorTool) -> None:
    assert await tool.run("2^10") == "1024"
    pid = worker_pid(tool)
    assert pid != os.getpid()
    assert await tool.run("2^20000") == "3.9803e+6020"
    assert worker_pid(tool) == pid  # one persistent worker, not one per call


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("17*23+4", "395"),
        ("7/2", "3.5"),
        ("-7 % 3", "2"),
        ("2*pi", "6.28318530718 (rounded)"),
        ("4/7", "4/7 = 0.571428571428…"),
    ],
)
async def test_plain_arithmetic_needs_no_worker(
    tool: CalculatorTool, expression: str, expected: str
) -> None:
    assert await tool.run(expression) == expected == describe(evaluate(expression))
    assert tool._worker is None


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("1/0", "division by zero"),
        ("1e308*10", "result too large"),
        ("1" + "0" * 330 + "/3*1.1", "result too large"),  # a fraction too large for a float
        ("1" + "0" * 330 + "+0.1", "result too large"),  # 0.5 would be exact
    ],
)
async def test_plain_arithmetic_fails_as_in_the_worker(
    tool: CalculatorTool, expression: str, fragment: str
) -> None:
    """Computed in this process or in the worker, the same expression fails alike."""
    with pytest.raises(ToolError, match=fragment) as here:
        await tool.run(expression)
    assert tool._worker is None
    with pytest.raises(ToolError) as there:
        await tool._submit(calculator._calculate, expression)
    assert str(there.value) == str(here.value)


@pytest.mark.parametrize(
    "expression", ["2**3", "2^3", "factorial(3)", "sqrt(4)", "abs(-1)", "1+max(1, 2)"]
)
def test_powers_and_functions_are_never_computed_in_the_caller(expression: str) -> None:
    assert not calculator.is_trivial(parse_expression(expression))


def test_the_in_process_bound_on_literal_bits() -> None:
    """``MAX_INLINE_BITS`` caps the literals' bits even if the input limit grew."""
    under = ast.Expression(ast.BinOp(ast.Constant(2**4000), ast.Mult(), ast.Constant(3)))
    over = ast.Expression(ast.BinOp(ast.Constant(2**4000), ast.Mult(), ast.Constant(2**200)))
    assert calculator.is_trivial(under)
    assert not calculator.is_trivial(over)


async def test_bad_input_fails_in_the_parent_without_a_worker(tool: CalculatorTool) -> None:
    with pytest.raises(ToolError, match="only these functions"):
        await tool.run("__import__('os')")
    assert tool._worker is None


async def test_evaluation_errors_come_back_as_tool_errors(tool: CalculatorTool) -> None:
    with pytest.raises(ToolError, match="division by zero"):
        await tool.run("1/0")
    with pytest.raises(ToolError, match="result too large"):
        await tool.run("9**9**9**9")
    assert await tool.run("1+1") == "2"


async def test_a_slow_job_times_out_and_the_worker_is_replaced() -> None:
    tool = CalculatorTool(timeout=1.0)
    try:
        await _a_slow_job_times_out_and_the_worker_is_replaced(tool)
    finally:
        await tool.aclose()


async def _a_slow_job_times_out_and_the_worker_is_replaced(tool: CalculatorTool) -> None:
    await tool.run("1^1")
    old_pid = worker_pid(tool)
    with finishes_within(3.0), pytest.raises(ToolTimeout, match="took longer than 1 s"):
        await tool._submit(time.sleep, 30)
    assert tool._worker is None
    assert not is_running(old_pid)
    assert await tool.run("6^2") == "36"
    assert worker_pid(tool) != old_pid


async def test_a_crashed_worker_becomes_a_tool_error_and_is_replaced(tool: CalculatorTool) -> None:
    await tool.run("1^1")
    old_pid = worker_pid(tool)
    with pytest.raises(ToolError, match="crashed"):
        await tool._submit(os._exit, 1)
    assert await tool.run("6^2") == "36"
    assert worker_pid(tool) != old_pid


async def test_the_worker_memory_limit_turns_into_a_tool_error(tool: CalculatorTool) -> None:
    with pytest.raises(ToolError, match="ran out of memory"):
        await tool._submit(bytearray, 2**30)  # 1 GiB, over the 256 MiB address-space limit
    assert await tool.run("6^2") == "36"
    assert tool._worker is not None


async def test_concurrent_calls_share_the_worker(tool: CalculatorTool) -> None:
    results = await asyncio.gather(*(tool.run(f"{n}^2") for n in range(8)))
    assert results == [str(n * n) for n in range(8)]


async def test_aclose_stops_the_worker() -> None:
    tool = CalculatorTool()
    await tool.run("sqrt(1)")
    pid = worker_pid(tool)
    await tool.aclose()
    assert tool._worker is None
    assert not is_running(pid)
    await tool.aclose()  # idempotent


def _environment(_: object) -> dict[str, str]:
    import os

    return dict(os.environ)


async def test_the_worker_inherits_no_environment(
    tool: CalculatorTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-worker")
    monkeypatch.setenv("DISCORD_TOKEN", "discord-token-never-in-the-worker")
    environment = await tool._submit(_environment, None)
    assert "OPENAI_API_KEY" not in environment and "DISCORD_TOKEN" not in environment
    assert not any("never-in-the-worker" in value for value in environment.values())
    assert await tool.run("2^2") == "4"  # and it still computes
    assert tool._worker is not None
