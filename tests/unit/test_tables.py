"""Markdown tables laid out in a code block (``adapters.tables``), and on Telegram as a
``<pre>`` block the strict fake parses: examples, then properties on drawn hostile tables
(termination in bounded time and memory, bounded growth, columns that line up, every cell's
text kept, no fence a cell could open or close)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.live import RunView
from adapters.tables import (
    CELL_WIDTH,
    FENCE_LINE,
    TABLE_CHARS,
    TABLE_COLUMNS,
    TABLE_ROWS,
    aligned,
    display_width,
    tables_as_code,
)
from adapters.telegram.render import MESSAGE_UNITS, TelegramRenderer, markdown_html, units
from core.events import Finished, RunStarted
from core.trace import Trace
from tests.fakes.telegram_server import parse_html
from tests.hostile import hostile_text
from tests.unit.test_discord_render_props import PROPERTY, bounded

TABLE = "Plans:\n| Plan | Price |\n|------|------:|\n| Pro | 20 € |\n| 企业版 | 99 € |\ndone"


def test_a_table_becomes_a_code_block_with_its_columns_lined_up() -> None:
    assert tables_as_code(TABLE).split("\n") == [
        "Plans:",
        "```",
        "Plan   | Price",
        "-------+------",
        "Pro    | 20 €",
        "企业版 | 99 €",  # three wide characters: six columns
        "```",
        "done",
    ]


def test_on_telegram_the_table_is_a_pre_block() -> None:
    shown, left_open = markdown_html(tables_as_code(TABLE))
    text, entities = parse_html(shown)
    assert not left_open and "Pro    | 20 €" in text
    (pre,) = [e for e in entities if e["type"] == "pre"]
    assert text[pre["offset"] : pre["offset"] + pre["length"]].startswith("Plan   | Price")


def finished(answer: str) -> tuple[RunView, Trace]:
    view = RunView(question="q", verbosity="full")
    view.apply(RunStarted("r1", "q", "scripted", 8))
    trace = Trace(question="q", id="r1")
    trace.answer = answer
    view.apply(Finished(trace, answer, "answered"))
    return view, trace


def test_the_final_answer_shows_its_table_aligned() -> None:
    view, _ = finished(TABLE)
    payload = TelegramRenderer("r1", clock=lambda: 1.0).final(view)
    text, entities = parse_html(payload.html)
    assert "企业版 | 99 €" in text and any(e["type"] == "pre" for e in entities)


def test_tables_in_code_blocks_and_lines_without_a_rule_are_left_alone() -> None:
    text = "```\n| a | b |\n|---|---|\n```\n| not | a table |\nplain"
    assert tables_as_code(text) == text


def test_cells_cannot_open_a_fence_and_long_tables_are_bounded() -> None:
    rows = "\n".join(f"| ```x{i} | ~~~ | **b** |" for i in range(TABLE_ROWS + 10))
    out = tables_as_code(f"| h | i | j |\n|---|---|---|\n{rows}").split("\n")
    assert out[0] == "```" and out[-1] == "```"
    assert not any(FENCE_LINE.match(line) for line in out[1:-1])
    assert out[1] == "h   | i | j" and out[3] == "x0  |   | b"  # no backtick, ~~~ or ** left


cell_text = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="|\\\n\r"), max_size=60),
    st.sampled_from(
        ["企业版", "e\u0301", "\u200b\u200b", "👍🏽", "`", "~~~", "**x**", "", "~~`~", "_`_", "*`*"]
    ),
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[str, list[list[str]]]:
    columns = draw(st.integers(1, TABLE_COLUMNS + 3))
    count = draw(st.integers(0, TABLE_ROWS + 5))
    rows = [[draw(cell_text) for _ in range(columns)] for _ in range(count + 1)]
    rule = "|" + "|".join(draw(st.sampled_from(["---", ":--", "--:", ":-:"])) for _ in rows[0])
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join([lines[0], rule + "|", *lines[1:]]), rows


def _unmarked(cell: str) -> str:
    """What a cell keeps: no backtick, then no ``**``, ``__`` or ``~~~``, however nested."""
    cell = cell.replace("`", "")
    while (fewer := re.sub(r"\*\*|__|~{3,}", "", cell)) != cell:
        cell = fewer
    return cell


@PROPERTY
@given(tables(), hostile_text(max_pieces=4), hostile_text(max_pieces=4))
def test_a_drawn_table_lines_up_and_its_block_is_bounded(
    drawn: tuple[str, list[list[str]]], before: str, after: str
) -> None:
    table, rows = drawn
    text = f"{before}\n\n{table}\n\n{after}"
    out = bounded(lambda: tables_as_code(text))
    assert len(out) <= len(text) + TABLE_CHARS * max(1, text.count("\n"))
    block = tables_as_code(table).split("\n")
    assert len(block) <= len(table.split("\n")) + 3 and len(table) + TABLE_CHARS >= len(
        "\n".join(block)
    )
    clean = [[" ".join(_unmarked(c).split()) for c in row] for row in rows]
    wide = max(display_width(c) for row in clean[: TABLE_ROWS + 1] for c in row) > CELL_WIDTH
    if len(rows[0]) > TABLE_COLUMNS or wide:  # it would not line up: left as written
        assert block == table.split("\n")
        return
    assert block[0] == "```" and block[-1] == "```"
    assert not any(FENCE_LINE.match(line) for line in block[1:-1])
    lined = block[1 : 1 + 2 + min(len(rows) - 1, TABLE_ROWS)]
    if len(rows[0]) > 1:  # every separator at the same column in every row
        rule = lined[1]
        stops = [display_width(rule[: m.start()]) for m in re.finditer(r"-\+-", rule)]
        for line in lined[:1] + lined[2:]:
            cut = [display_width(line[: m.start()]) for m in re.finditer(r" \| ", line)]
            assert cut[: len(stops)] == stops[: len(cut)]
    for line, row in zip(lined[:1] + lined[2:], clean, strict=False):
        at = 0
        for cell in row:  # every cell whole (but for the markers taken out), in order
            found = line.find(cell, at)
            assert found >= 0, (cell, line)
            at = found + len(cell)


@PROPERTY
@given(tables(), hostile_text(max_pieces=3))
def test_a_final_answer_with_tables_is_accepted_by_telegram(
    drawn: tuple[str, list[list[str]]], prose: str
) -> None:
    view, trace = finished(f"{prose}\n{drawn[0]}\n{prose}\n{drawn[0]}")
    renderer = TelegramRenderer("r1", clock=lambda: 1.0)
    final = bounded(lambda: renderer.final(view))
    posts = renderer.trace_posts(trace, steps=False)
    for payload in [final, *posts]:
        text, _ = parse_html(payload.html)  # raises where Telegram would refuse it
        assert text.strip() and units(text) <= MESSAGE_UNITS


@pytest.mark.parametrize("rows", [10_000])
def test_a_huge_table_is_laid_out_in_bounded_time_and_memory(rows: int) -> None:
    body = "\n".join("| " + " | ".join(["x" * 30] * 8) + " |" for _ in range(rows))
    text = "| " + " | ".join(["h"] * 8) + " |\n|" + "---|" * 8 + "\n" + body
    out = bounded(lambda: tables_as_code(text), seconds=10, megabytes=200)
    assert out.startswith("```\nh ") and len(out) <= len(text) + TABLE_CHARS
    wide = "| " + " | ".join(["y" * 50] * 200) + " |"
    assert bounded(lambda: tables_as_code(f"{wide}\n|---|\n{wide}"), seconds=5).startswith("| y")
    assert aligned("| a |", []) == ["a", "-"]


def test_removing_one_marker_cannot_join_the_halves_of_another() -> None:
    table = "| a | b |\n|---|---|\n| ~~`~ | _`_ *`* |\n| [y](https://e.com) | *z* |"
    block = tables_as_code(table).split("\n")
    assert block[0] == "```" and block[-1] == "```"
    assert not any(FENCE_LINE.match(line) for line in block[1:-1]), block
    assert not any(m in line for line in block[1:-1] for m in ("`", "**", "__", "~~~"))
