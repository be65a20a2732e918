"""core.knowledge: every source on one scale, the conversation's files first, the manual only
when asked about reactbot (or when no folder is set), folders of every kind we read."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import bot
from core.files import passages_of
from core.knowledge import LookupTool, names_reactbot, registry_with_files
from core.tools import ToolRegistry
from core.tools.lookup import BM25Index, Passage, search_together
from tests.properties import property_settings

MANUAL = Path(bot.__file__).parent / "knowledge"
NOTE = "The launch code for project Bluebird is AMBER-7734."


def notes() -> list[Passage]:
    return passages_of("notes.txt", [(None, NOTE)])


async def test_a_one_file_question_finds_its_file_beside_the_shipped_manual() -> None:
    """Issue 42: the file's raw BM25 score (an index of one passage: every idf tiny) lost to
    the manual's; ranked on one scale, with the files first, the file is the first result."""
    lookup = LookupTool(manual=MANUAL).with_files(notes())
    result = await lookup.run("launch code for project Bluebird")
    assert result.text.startswith(f"1. notes.txt\n{NOTE}")
    assert result.sources[0] == "notes.txt"


async def test_the_files_come_first_even_when_the_manual_matches_better() -> None:
    lookup = LookupTool(manual=MANUAL).with_files(passages_of("x.txt", [(None, "Slack is loud.")]))
    result = await lookup.run("connect reactbot to Slack socket mode")
    assert result.text.startswith("1. x.txt\nSlack is loud.")
    assert "slack.md" in result.text  # the manual still answers after it


async def test_a_file_that_does_not_match_does_not_push_the_manual_away() -> None:
    lookup = LookupTool(manual=MANUAL).with_files(notes())
    result = await lookup.run("connect Slack socket mode")
    assert result.text.startswith("1. slack.md")
    assert "notes.txt" not in result.text


def test_search_together_scores_the_union_as_one_index() -> None:
    """Split a collection in two anyhow: ranked together they score as the whole did."""
    texts = ["alpha beta", "beta gamma", "gamma delta alpha", "delta", "alpha alpha beta"]
    passages = [Passage(f"{i}.md", (), t) for i, t in enumerate(texts)]
    whole = BM25Index(passages).search("alpha delta", limit=5)
    for split in range(len(passages) + 1):
        parts = [BM25Index(passages[:split]), BM25Index(passages[split:])]
        together = search_together(parts, "alpha delta", limit=5)
        assert [(h.passage, round(h.score, 9)) for _, h in together] == [
            (h.passage, round(h.score, 9)) for h in whole
        ]


@property_settings(100)
@given(
    texts=st.lists(st.text(alphabet="abc de拉取", min_size=1, max_size=30), min_size=1, max_size=8),
    query=st.text(alphabet="abc de拉取", max_size=12),
    split=st.integers(0, 8),
)
def test_search_together_equals_one_index_for_any_split(
    texts: list[str], query: str, split: int
) -> None:
    passages = [Passage(f"{i}.md", (), t) for i, t in enumerate(texts)]
    whole = {h.passage: h.score for h in BM25Index(passages).search(query, limit=10)}
    parts = [BM25Index(passages[:split]), BM25Index(passages[split:])]
    together = {h.passage: h.score for _, h in search_together(parts, query, limit=10)}
    assert together.keys() == whole.keys()
    assert all(abs(together[p] - whole[p]) < 1e-9 for p in whole)


def test_the_rule_for_questions_about_reactbot() -> None:
    assert names_reactbot("connect reactbot to Slack")
    assert names_reactbot("ReactBot's config")
    assert names_reactbot("如何配置reactbot")
    assert not names_reactbot("connect to Slack")
    assert names_reactbot("reactbots")  # the plural is stripped back to the word
    assert not names_reactbot("react bot")


async def test_the_manual_is_searched_only_when_asked_about_reactbot_once_folders_are_set(
    tmp_path: Path,
) -> None:
    (tmp_path / "handbook.md").write_text("# Slack\n\nOur Slack workspace is acme.slack.com.\n")
    lookup = LookupTool([tmp_path], manual=MANUAL)
    plain = await lookup.run("connect Slack")
    assert plain.sources == ("handbook.md",)
    named = await lookup.run("connect reactbot to Slack")
    assert "slack.md" in named.sources
    alone = await LookupTool(manual=MANUAL).run("connect Slack")  # no folder: the demo
    assert "slack.md" in alone.sources
    assert "put the word reactbot" in lookup.description
    assert "put the word reactbot" not in LookupTool(manual=MANUAL).description


async def test_folders_of_every_kind_are_read_and_counted(tmp_path: Path) -> None:
    from tests.unit.test_files import make_pdf

    first, second = tmp_path / "a", tmp_path / "b"
    (first / "deep").mkdir(parents=True)
    second.mkdir()
    (first / "deep" / "guide.html").write_text("<h1>Pumps</h1><p>The pump hums at 40 Hz.</p>")
    (first / "setup.py").write_text("PUMP_SPEED = 1200  # revolutions a minute\n")
    (second / "manual.pdf").write_bytes(make_pdf(["cover", "The pump warranty is 5 years."]))
    lookup = LookupTool([first, second], manual=MANUAL)
    assert (await lookup.run("pump hums")).text.startswith("1. deep/guide.html › Pumps")
    assert "PUMP_SPEED" in (await lookup.run("PUMP_SPEED revolutions")).text
    warranty = await lookup.run("pump warranty years")
    assert warranty.text.startswith("1. manual.pdf › page 2")
    counts = await lookup.sources()
    assert [(c.name, c.kind, c.passages) for c in counts[:2]] == [
        (str(first), "folder", 2),
        (str(second), "folder", 2),
    ]
    assert counts[2].kind == "manual" and counts[2].passages > 20
    assert counts[2].when == "when the keywords name reactbot"


async def test_a_run_with_files_shares_the_folders_indexes(tmp_path: Path) -> None:
    (tmp_path / "kb.md").write_text("# Slack\n\nConnect Slack with a bot token.\n")
    base = ToolRegistry()
    base.add(LookupTool([tmp_path]))
    lookup = registry_with_files(base, notes()).get("lookup")
    assert isinstance(lookup, LookupTool)
    assert lookup.folders == base.get("lookup").folders  # type: ignore[union-attr]
    both = await lookup.run("slack bot token launch code")
    assert both.text.startswith("1. notes.txt") and "kb.md › Slack" in both.text
