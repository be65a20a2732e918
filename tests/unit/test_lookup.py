"""LookupTool: passages, the mixed-language tokenizer, BM25 ranking, skipping and refreshing."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bot
from core.errors import ToolError
from core.knowledge import LookupTool
from core.tools import Tool, ToolResult
from core.tools.lookup import (
    MAX_PASSAGE_CHARS,
    MAX_SECTION_CHARS,
    BM25Index,
    Passage,
    section_of,
    split_passages,
    tokenize,
)
from tests.properties import property_settings

SHIPPED_KNOWLEDGE = Path(bot.__file__).parent / "knowledge"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def first_label(result: ToolResult) -> str:
    return result.text.splitlines()[0].split(". ", 1)[1]


# --- tokenizer -----------------------------------------------------------------------------------


def test_english_words_are_lowercased_stopwords_dropped_plurals_stripped() -> None:
    assert tokenize("How do I connect you to Slack?") == ["connect", "slack"]
    assert tokenize("Tokens, Queries, classes, class, status, bus") == [
        "token",
        "query",
        "class",
        "class",
        "status",
        "bus",
    ]


def test_chinese_runs_give_characters_and_bigrams() -> None:
    assert tokenize("连接机器人") == ["连", "连接", "接", "接机", "机", "机器", "器", "器人", "人"]
    # Function characters alone carry no topic, but stay inside bigrams.
    assert tokenize("我的") == ["我的"]


def test_a_chinese_query_uses_bigrams_only_unless_a_run_is_one_character() -> None:
    assert tokenize("连接机器人", query=True) == ["连接", "接机", "机器", "器人"]
    assert tokenize("钉 Slack", query=True) == ["钉", "slack"]


def test_mixed_text_splits_at_script_changes() -> None:
    assert tokenize("把reactbot连接到Slack工作区，用SLACK_BOT_TOKEN。") == [
        "reactbot",
        "连",
        "连接",
        "接",
        "接到",
        "到",
        "slack",
        "工",
        "工作",
        "作",
        "作区",
        "区",
        "用",
        "slack",
        "bot",
        "token",
    ]


def test_full_width_forms_are_normalised() -> None:
    assert tokenize("ＳＬＡＣＫ　ｔｏｋｅｎ") == ["slack", "token"]


# --- passages ------------------------------------------------------------------------------------


def test_markdown_is_split_by_headings_with_the_heading_path_kept() -> None:
    text = (
        "# Guide\nIntro.\n\n## Setup\nStep one.\n\nStep two.\n\n"
        "```\n# not a heading\n\nstill code\n```\n\n### Deeper\nDetail.\n# Other\nEnd."
    )
    passages = split_passages("guide.md", text)
    assert [(p.label, p.text) for p in passages] == [
        ("guide.md › Guide", "Intro."),
        (
            "guide.md › Guide › Setup",
            "Step one.\n\nStep two.\n\n```\n# not a heading\n\nstill code\n```",
        ),
        ("guide.md › Guide › Setup › Deeper", "Detail."),
        ("guide.md › Other", "End."),
    ]


def test_text_files_have_no_headings() -> None:
    [passage] = split_passages("notes.txt", "# just a line\nmore", markdown=False)
    assert passage == Passage("notes.txt", (), "# just a line\nmore")


def test_passages_are_bounded() -> None:
    paragraphs = "\n\n".join(f"paragraph {i} " + "word " * 60 for i in range(30))
    one_huge_line = "x" * (3 * MAX_PASSAGE_CHARS)
    passages = split_passages("big.md", f"# Big\n{paragraphs}\n\n{one_huge_line}")
    assert len(passages) > 5
    assert all(len(p.text) <= MAX_PASSAGE_CHARS for p in passages)
    assert "".join(p.text for p in passages).count("x") == 3 * MAX_PASSAGE_CHARS


# --- ranking -------------------------------------------------------------------------------------


def test_bm25_prefers_rare_terms_and_shorter_passages() -> None:
    index = BM25Index(
        [
            Passage("a.md", (), "the cat sat on the mat"),
            Passage("b.md", (), "a dog and a cat " + "filler " * 40),
            Passage("c.md", (), "a dog"),
        ]
    )
    assert [hit.passage.file for hit in index.search("dog")] == ["c.md", "b.md"]
    assert index.search("cat mat")[0].passage.file == "a.md"
    assert index.search("unicorn") == []


@pytest.fixture
def english_kb(tmp_path: Path) -> Path:
    write(tmp_path, "redis.md", "# Redis\n\nSet REDIS_URL to keep history across restarts.")
    write(
        tmp_path,
        "discord.md",
        "# Discord\n\n## Tokens\n\nCreate a bot token in the developer portal.\n\n"
        "## Intents\n\nTurn on the message content intent.",
    )
    write(
        tmp_path,
        "slack.md",
        "# Slack\n\n## Socket Mode\n\nAn app-level token with connections:write.\n\n"
        "## Scopes\n\nAdd app_mentions:read and chat:write to the bot.",
    )
    write(tmp_path, "notes/faq.txt", "Traces are kept for thirty days.\n\nAsk in the thread.")
    return tmp_path


async def test_english_ranking(english_kb: Path) -> None:
    tool = LookupTool(english_kb)
    await tool.load()
    assert first_label(await tool.run("slack scopes")) == "slack.md › Slack › Scopes"
    assert first_label(await tool.run("message content intents")) == (
        "discord.md › Discord › Intents"
    )
    assert first_label(await tool.run("how long are traces kept")) == "notes/faq.txt"
    result = await tool.run("token")
    assert {line.split(". ", 1)[1] for line in result.text.splitlines() if ". " in line[:3]} == {
        "discord.md › Discord › Tokens",
        "slack.md › Slack › Socket Mode",
    }
    assert set(result.sources) == {"discord.md", "slack.md"}


async def test_chinese_ranking(tmp_path: Path) -> None:
    write(tmp_path, "部署.md", "# 部署\n\n## 环境变量\n\n设置 REDIS_URL 以保存对话历史。")
    write(
        tmp_path,
        "接入.md",
        "# 接入平台\n\n## 连接 Slack\n\n创建 Slack 应用，添加斜杠命令，邀请机器人进入频道。\n\n"
        "## 连接 Discord\n\n在开发者门户创建机器人，开启消息内容意图。",
    )
    write(tmp_path, "轨迹.md", "# 推理轨迹\n\n每一步的思考、行动和观察都会被记录下来。")
    tool = LookupTool(tmp_path)

    assert first_label(await tool.run("怎么连接Slack")) == "接入.md › 接入平台 › 连接 Slack"
    assert first_label(await tool.run("消息内容意图")) == "接入.md › 接入平台 › 连接 Discord"
    assert first_label(await tool.run("推理过程会记录吗")) == "轨迹.md › 推理轨迹"
    assert first_label(await tool.run("对话历史保存在哪里")) == "部署.md › 部署 › 环境变量"


async def test_no_match_is_an_observation_not_an_error(english_kb: Path) -> None:
    result = await LookupTool(english_kb).run("quantum chromodynamics")
    assert result == ToolResult("no passage in the knowledge base matches 'quantum chromodynamics'")


async def test_results_are_capped_and_trimmed(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path, f"f{i}.md", f"# Topic {i}\n\n" + "widget " * 150)
    result = await LookupTool(tmp_path, top_k=3).run("widget")
    blocks = re.split(r"\n\n(?=\d\. f\d\.md)", result.text)
    assert len(blocks) == 3
    # The best hit's whole section (paragraphs of it past one passage too), the others cut.
    assert blocks[0].count("widget") == 150 and not blocks[0].endswith("…")
    assert all(len(block) < 700 and block.endswith("…") for block in blocks[1:])


async def test_the_best_hit_is_its_whole_section_under_the_heading_the_question_names(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        "guide.md",
        "# Connect the widget\n\nIntro line.\n\n## 1. Make it\n\n1. First.\n2. Second.\n\n"
        "## 2. Plug it in\n\n- Red wire.\n- Blue wire.\n\n### Details\n\nUse the socket.\n\n"
        "# Other topic\n\nUnrelated text about widgets.",
    )
    result = await LookupTool(tmp_path).run("how do I connect the widget")
    first = result.text.split("\n\n2. ", 1)[0]
    assert first.startswith("1. guide.md › Connect the widget\n")
    for part in ("Intro line.", "## 1. Make it", "2. Second.", "## 2. Plug it in", "- Blue wire."):
        assert part in first
    assert "### Details\n\nUse the socket." in first and "Unrelated" not in first
    # A question that names no heading above the hit gets the hit's own section.
    wires = await LookupTool(tmp_path).run("blue wire")
    assert first_label(wires) == "guide.md › Connect the widget › 2. Plug it in"
    assert "Red wire" in wires.text and "Make it" not in wires.text.split("\n\n2. ")[0]


@given(st.text(max_size=200), st.lists(st.text(max_size=30), max_size=4))
@property_settings(300)
def test_the_section_chosen_is_the_hit_or_a_heading_above_that_says_most_of_the_question(
    query: str, headings: list[str]
) -> None:
    passage = Passage("f.md", tuple(headings), "text")
    file, path = section_of(passage, query)
    assert file == "f.md" and passage.headings[: len(path)] == path
    if len(path) < len(headings):
        terms = set(tokenize(query, query=True))
        assert 3 * len(terms & set(tokenize(path[-1]))) >= 2 * len(terms) > 0


MARKDOWN = st.lists(
    st.sampled_from(
        ["# A b\n", "## C d\n", "### E\n", "word ", "widget ", "\n\n", "```\n", "- x\n"]
    ),
    max_size=600,
).map("".join)


@given(MARKDOWN, st.sampled_from(["a b widget", "c d", "widget", "e x", "word"]))
@property_settings(200)
async def test_a_section_is_bounded_whatever_the_file(text: str, query: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder), "doc.md", text)
        try:
            result = await LookupTool(folder).run(query)
        except ToolError:
            return  # nothing indexed
    first = (
        result.text.split("\n", 1)[1].split("\n\n2. doc.md", 1)[0] if "\n" in result.text else ""
    )
    assert len(first) <= MAX_SECTION_CHARS


async def test_empty_query_is_refused(english_kb: Path) -> None:
    with pytest.raises(ToolError, match="lookup needs keywords"):
        await LookupTool(english_kb).run("  ")


async def test_an_empty_or_missing_folder_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="knowledge base is empty"):
        await LookupTool(tmp_path / "missing").run("anything")


def test_lookup_tool_satisfies_the_tool_protocol(tmp_path: Path) -> None:
    tool = LookupTool(tmp_path / "not-read-at-construction")
    assert isinstance(tool, Tool)
    assert (tool.name, tool.example) == ("lookup", "lookup[connect to Slack]")
    assert tool.description.startswith("searches the local knowledge base")


# --- skipping and refreshing ---------------------------------------------------------------------


async def test_binary_and_undecodable_files_are_skipped_with_a_warning(
    english_kb: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (english_kb / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00slack")
    (english_kb / "latin1.txt").write_bytes("Caf\xe9 slack".encode("latin-1"))
    with caplog.at_level(logging.WARNING, logger="core.tools.lookup"):
        await LookupTool(english_kb).load()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("image.md" in w and "binary" in w for w in warnings)
    assert any("latin1.txt" in w and "UTF-8" in w for w in warnings)
    assert len(warnings) == 2


async def test_hidden_and_other_files_are_ignored(english_kb: Path) -> None:
    write(english_kb, ".git/notes.md", "# Zebra\n\nzebra")
    write(english_kb, "data.bin", "zebra")
    write(english_kb, "zebra.png", "zebra")
    result = await LookupTool(english_kb).run("zebra")
    assert result.text.startswith("no passage")


async def test_the_index_is_refreshed_when_files_change(english_kb: Path) -> None:
    now = [0.0]
    tool = LookupTool(english_kb, refresh_interval=5, clock=lambda: now[0])
    await tool.load()
    assert (await tool.run("webhook")).text.startswith("no passage")

    write(english_kb, "slack.md", "# Slack\n\n## Webhooks\n\nIncoming webhooks are not used.")
    now[0] = 2.0  # within the interval: the folder is not looked at yet
    assert (await tool.run("webhook")).text.startswith("no passage")
    now[0] = 6.0
    assert first_label(await tool.run("webhook")) == "slack.md › Slack › Webhooks"

    (english_kb / "slack.md").unlink()
    now[0] = 12.0
    assert (await tool.run("webhook")).text.startswith("no passage")


async def test_a_same_size_edit_is_seen_through_the_mtime(english_kb: Path) -> None:
    path = write(english_kb, "extra.md", "# Extra\n\nalpha")
    tool = LookupTool(english_kb, refresh_interval=0)
    await tool.load()
    write(english_kb, "extra.md", "# Extra\n\nomega")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert first_label(await tool.run("omega")) == "extra.md › Extra"


# --- the shipped knowledge base ------------------------------------------------------------------


async def test_shipped_knowledge_base_answers_how_to_connect_slack() -> None:
    tool = LookupTool(SHIPPED_KNOWLEDGE)
    hits = await tool.search("How do I connect you to Slack?")
    assert hits[0].passage.file == "slack.md"
    result = await tool.run("How do I connect you to Slack?")
    assert result.sources[0] == "slack.md"


@pytest.mark.parametrize(
    ("question", "expected_file"),
    [
        ("How do I connect you to Discord?", "discord.md"),
        ("Message Content intent", "discord.md"),
        ("which environment variables are there", "configuration.md"),
        ("how do I run the tests", "quickstart.md"),
        ("export a trace to markdown", "commands-and-traces.md"),
        ("如何接入 Slack？", "zh-cn.md"),
        ("怎么查看推理轨迹", "zh-cn.md"),
    ],
)
async def test_shipped_knowledge_base_routes_common_questions(
    question: str, expected_file: str
) -> None:
    hits = await LookupTool(SHIPPED_KNOWLEDGE).search(question)
    assert hits[0].passage.file == expected_file


def test_shipped_knowledge_base_is_small_markdown_with_a_chinese_page() -> None:
    files = sorted(SHIPPED_KNOWLEDGE.iterdir())
    assert 4 <= len(files) <= 8  # one page per surface, the basics, Chinese
    assert all(f.suffix == ".md" for f in files)
    assert any("\u4e00" <= ch <= "\u9fff" for f in files for ch in f.read_text("utf-8"))


async def test_a_long_section_comes_whole_up_to_the_stated_bound(tmp_path: Path) -> None:
    """Issue 42: the tool cut the best section at 4,000 characters, so the trace never had
    the rest; now it returns it whole up to MAX_SECTION_CHARS, and past that says how much
    is left and where, after a paragraph."""
    steps = "\n\n".join(f"Step {i}: turn the widget dial {i} times." for i in range(300))
    write(tmp_path, "guide.md", f"# Widget setup\n\n{steps}\n")
    result = await LookupTool(tmp_path).run("widget setup")
    assert len(steps) > 10_000 and result.text == f"1. guide.md › Widget setup\n{steps}"

    huge = "\n\n".join(f"Paragraph {i} about the widget dial." for i in range(3000))
    write(tmp_path, "guide.md", f"# Widget setup\n\n{huge}\n")
    cut = await LookupTool(tmp_path).run("widget setup")
    body, _, note = cut.text.split("\n", 1)[1].rpartition("\n\n")
    assert len(body) <= MAX_SECTION_CHARS and huge.startswith(body) and body.endswith(".")
    assert (
        note
        == f"[… {len(huge) - len(body):,} more characters of this section in guide.md › Widget setup]"
    )
