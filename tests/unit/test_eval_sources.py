"""Eval cases that attach files and expect a source (issue 42, item 6): parsing, matching a
lookup's citations, and recall@3 / MRR in the summary."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.evals import (
    Case,
    CaseError,
    Combination,
    RunResult,
    check,
    parse_case,
    source_rank,
    summarise,
)
from tests.properties import property_settings

COMBO = Combination("m", "text")


def _case(expect: object, **extra: object) -> Case:
    return parse_case({"question": "q", "expect": expect, **extra}, line=3, number=1)


def test_a_source_alone_or_with_an_answer_check() -> None:
    alone = _case({"source": "notes.md"}, files=["a/notes.md"])
    assert alone.expect.kind == "source" and alone.expect.source == "notes.md"
    assert alone.files == ("a/notes.md",)
    assert check(alone.expect, None) is False
    assert check(alone.expect, "anything") is True
    both = _case({"contains": "42", "source": "notes.md › Setup"})
    assert both.expect.kind == "contains" and both.expect.source == "notes.md › Setup"
    assert "citing 'notes.md › Setup'" in both.expect.describe()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"question": "q", "expect": {"source": ""}}, "expect.source: must not be empty"),
        ({"question": "q", "expect": {"source": 3}}, "expect.source"),
        ({"question": "q", "expect": {"source": "a", "bogus": 1}}, "expect.'bogus': unknown"),
        ({"question": "q", "expect": {"source": "a"}, "files": "a.md"}, "files: must be a list"),
        ({"question": "q", "expect": {"source": "a"}, "files": [""]}, "files: each must be"),
        ({"question": "q", "expect": {"source": "a"}, "files": [7]}, "files: each must be"),
    ],
)
def test_bad_sources_and_files_are_refused_naming_the_field(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(CaseError, match="line 3: ") as caught:
        parse_case(entry, line=3, number=1)
    assert message in str(caught.value)


def test_a_source_matches_itself_a_section_under_it_or_a_page_of_it() -> None:
    cited = ["a.md › Intro", "notes.md › Setup › Redis", "report.pdf, page 3"]
    assert source_rank("notes.md", cited) == 2
    assert source_rank("notes.md › Setup", cited) == 2
    assert source_rank("notes.md › Set", cited) is None  # a heading is matched whole
    assert source_rank("report.pdf", cited) == 3
    assert source_rank("a.md › Intro", cited) == 1
    assert source_rank("b.md", cited) is None
    assert source_rank("a.md", []) is None


@given(st.lists(st.text(max_size=30), max_size=6), st.text(min_size=1, max_size=30))
@property_settings(300)
def test_the_rank_is_the_first_citation_that_is_the_source_or_under_it(
    cited: list[str], expected: str
) -> None:
    rank = source_rank(expected, cited)
    if rank is None:
        assert expected not in cited
    else:
        assert 1 <= rank <= len(cited)
        assert cited[rank - 1] == expected or cited[rank - 1].startswith(expected)


def _run(case: str, rank: int | None, *, wants: bool = True) -> RunResult:
    return RunResult(
        case=case,
        combination=COMBO,
        repeat=0,
        answer="a",
        status="answered",
        passed=rank is not None,
        steps=2,
        format_errors=0,
        tokens_in=0,
        tokens_out=0,
        cost_usd=None,
        seconds=0.1,
        trace_id="t",
        wants_source=wants,
        source_rank=rank,
    )


def test_recall_at_three_and_mrr_count_only_cases_with_a_source() -> None:
    runs = [_run("a", 1), _run("b", 2), _run("c", 4), _run("d", None), _run("e", None, wants=False)]
    summary = summarise(COMBO, runs)
    assert summary.sourced == 4
    assert summary.recall == pytest.approx(2 / 4)
    assert summary.mrr == pytest.approx((1 + 1 / 2 + 1 / 4) / 4)
    shown = summary.to_dict()
    assert shown["recall_at_3"] == pytest.approx(0.5) and "mrr" in shown
    assert "recall_at_3" not in summarise(COMBO, [_run("e", None, wants=False)]).to_dict()
    assert runs[2].to_dict()["source_rank"] == 4
    assert "source_rank" not in runs[4].to_dict()
