"""The eval case file: every expectation kind, the one-line errors naming line and field, and
properties (any entry or file either parses or says why; checks never raise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.evals import EvalError, read_cases
from core.evals import CaseError, Expect, check, last_number, parse_case
from tests.properties import property_settings


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("expect", "answer", "passed"),
    [
        ({"exact": "Paris"}, " paris. ", True),
        ({"exact": "Paris"}, "It is Paris", False),
        ({"contains": "redis_url"}, "Set REDIS_URL first", True),
        ({"contains": "redis"}, "Set it up", False),
        ({"regex": r"\b1,?024\b"}, "2^10 = 1024", True),
        ({"regex": r"^ok$"}, "not ok", False),
        ({"number": 42}, "6*7 = 42", True),
        ({"number": 42}, "42, or maybe 46", False),
        ({"number": 464029123}, "That is 464,029,123.", True),
        ({"number": 3.1428, "tolerance": 0.001}, "about 3.142857", True),
        ({"number": 3.1428, "tolerance": 0.001}, "about 3.14", False),
        ({"any_of": ["7 days", "a week"]}, "Valid for a week.", True),
        ({"any_of": ["7 days", "a week"]}, "Valid for a day.", False),
    ],
)
def test_every_expectation_kind(expect: dict[str, object], answer: str, passed: bool) -> None:
    case = parse_case({"question": "q", "expect": expect}, line=1, number=1)
    assert check(case.expect, answer) is passed
    assert check(case.expect, None) is False


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"question": "q"}'], "line 1: expect: missing"),
        (
            ["", '{"question": "q", "expect": {"number": "forty"}}'],
            "line 2: expect.number: must be a number, not a string",
        ),
        (
            ['{"question": "q", "expect": {"number": 1, "contains": "x"}}'],
            "line 1: expect: needs exactly one of",
        ),
        (
            ['{"question": "q", "expect": {"regex": "("}}'],
            "line 1: expect.regex: not a valid regular expression",
        ),
        (
            ['{"question": "q", "expect": {"contains": "x", "tolerance": 1}}'],
            "line 1: expect.tolerance: only goes with number",
        ),
        (
            ['{"question": "q", "expect": {"any_of": []}}'],
            "line 1: expect.any_of: must be a non-empty list",
        ),
        (['{"question": "", "expect": {"number": 1}}'], "line 1: question: must not be empty"),
        (
            ['{"question": 5, "expect": {"number": 1}}'],
            "line 1: question: must be a string, not a number",
        ),
        (
            ['{"question": "q", "expect": {"number": 1}, "tols": []}'],
            "line 1: unknown field 'tols'",
        ),
        (
            ['{"question": "q", "expect": {"number": 1}, "tools": "calculate"}'],
            "line 1: tools: must be a list",
        ),
        (
            [
                '{"id": "a", "question": "q", "expect": {"number": 1}}',
                '{"id": "a", "question": "q", "expect": {"number": 2}}',
            ],
            "line 2: id: 'a' is used already (line 1)",
        ),
        (
            [
                '{"question": "q", "expect": {"number": 1}',
            ],
            "line 1: not a JSON object",
        ),
        (["[1, 2]"], "line 1: a case must be an object"),
        (["# only a comment"], "no cases in the file"),
    ],
)
def test_a_bad_case_file_names_the_line_and_the_field(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    path = write(tmp_path, "cases.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(CaseError) as caught:
        read_cases(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_yaml_cases_carry_their_lines_and_aliases_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cases.yaml",
        "- id: mul\n  question: What is 6*7?\n  expect: {number: 42}\n"
        "- question: Where?\n  expect:\n    numbr: 1\n",
    )
    with pytest.raises(CaseError, match=r"line 4: expect\.'numbr': unknown"):
        read_cases(path)
    good = write(tmp_path, "good.yml", "- question: What is 6*7?\n  expect: {number: 42}\n")
    (case,) = read_cases(good)
    assert (case.id, case.line, case.expect) == ("case-1", 1, Expect("number", 42.0))
    bomb = write(tmp_path, "bomb.yaml", "- &a {question: q, expect: {number: 1}}\n- *a\n")
    with pytest.raises(CaseError, match="line 2: YAML aliases"):
        read_cases(bomb)


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="cannot read the case file"):
        read_cases(tmp_path / "missing.jsonl")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
_entries = st.fixed_dictionaries(
    {},
    optional={
        "id": _json,
        "question": st.text(max_size=50) | _json,
        "expect": st.dictionaries(
            st.sampled_from(["exact", "contains", "regex", "number", "any_of", "tolerance", "x"]),
            _json,
            max_size=3,
        ),
        "tags": _json,
        "tools": _json,
    },
)


@property_settings(500)
@given(entry=_entries | _json)
def test_any_entry_parses_or_says_why_in_one_line(entry: object) -> None:
    try:
        case = parse_case(entry, line=7, number=3)
    except CaseError as exc:
        assert str(exc).startswith("line 7: ") and "\n" not in str(exc)[:200]
    else:
        assert case.question.strip() and case.line == 7


@property_settings(300)
@given(text=st.text(max_size=400), suffix=st.sampled_from([".jsonl", ".yaml"]))
def test_any_file_text_ends_in_cases_or_a_case_error(
    tmp_path_factory: pytest.TempPathFactory, text: str, suffix: str
) -> None:
    path = tmp_path_factory.mktemp("cases") / f"c{suffix}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        cases = read_cases(path)
    except (CaseError, EvalError):
        return
    assert cases and all(c.question.strip() for c in cases)


@property_settings(500)
@given(
    answer=st.text(max_size=3000),
    kind=st.sampled_from(["exact", "contains", "regex", "number", "any_of"]),
)
def test_checks_never_raise_on_any_answer(answer: str, kind: str) -> None:
    value: object = {
        "exact": "x",
        "contains": "x",
        "regex": r"(a|b)+c",
        "number": 1,
        "any_of": ["x"],
    }[kind]
    case = parse_case({"question": "q", "expect": {kind: value}}, line=1, number=1)
    assert check(case.expect, answer) in (True, False)


@property_settings(300)
@given(
    number=st.integers(min_value=-(10**12), max_value=10**12),
    grouped=st.booleans(),
    prefix=st.text(alphabet="abc =:", max_size=20),
)
def test_the_last_number_is_read_as_written(number: int, grouped: bool, prefix: str) -> None:
    written = f"{number:,}" if grouped else str(number)
    assert last_number(f"{prefix} {written}.") == number
    assert json.dumps(number)  # a plain int: nothing else to say
