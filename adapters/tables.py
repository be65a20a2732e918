"""A model's Markdown tables, laid out to line up in a monospace font, for surfaces whose
messages have no tables (Telegram; Slack's mrkdwn does the same in its own renderer).

::

    | Plan | Price |            Plan  | Price
    |------|------:|     ->     ------+------
    | Pro  | 20 €  |            Pro   | 20 €

``tables_as_code(markdown)`` finds each table outside code blocks (a row with ``|``, then a
rule row such as ``|---|:--:|``, then the rows up to a line without ``|``) and replaces it by
a fenced code block of its aligned rows, which the surface's Markdown renderer then shows as
preformatted text (escaped like any code block). Done on the Markdown, before the answer is
split into messages, so the split counts the padding too.

Cells are padded by their *display* width: an East Asian wide or fullwidth character takes
two columns, a combining mark or a zero-width character none. What a cell may not do, it
cannot: backticks, Markdown emphasis markers and ``~~~`` are dropped, so no row can open or
close a code fence. Nothing else of a cell is lost: a table with a cell wider than
``CELL_WIDTH`` columns or more than ``TABLE_COLUMNS`` columns would not line up on a phone
anyway, and stays as written. At most ``TABLE_ROWS`` rows are aligned; further rows follow
in the block as written (their backticks dropped). Every step is linear in the text; a
table's block is at most ``TABLE_CHARS`` characters longer than the table was.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

__all__ = [
    "CELL_WIDTH",
    "FENCE_LINE",
    "TABLE_CHARS",
    "TABLE_COLUMNS",
    "TABLE_ROWS",
    "aligned",
    "display_width",
    "tables_as_code",
]

TABLE_COLUMNS = 8
CELL_WIDTH = 40
"""Display columns of one cell (a wider one leaves its table as written)."""
TABLE_ROWS = 50
TABLE_CHARS = (TABLE_ROWS + 2) * TABLE_COLUMNS * (CELL_WIDTH + 3) + 8
"""The most a table's block may add to the table as written: its padding, separators and
rule, and the two fence lines."""
FENCE = "```"
FENCE_LINE = re.compile(r"^[ ]{0,3}(```|~~~)")
"""A line that opens or closes a code block, as the surfaces' renderers read it."""
_RULE = re.compile(r"^\|?:?-+:?(?:\|:?-+:?)*\|?$")
_SPLIT = re.compile(r"(?<!\\)\|")
_DROPPED = re.compile(r"\*\*|__|~{3,}")


def _drop_markers(text: str) -> str:
    """``text`` with no backtick, ``**``, ``__`` or ``~~~`` left: backticks go first, and the
    rest until none is left, since removing one can join two halves (``~~`~``, ``_`_``)."""
    text = text.replace("`", "")
    while True:
        dropped = _DROPPED.sub("", text)
        if dropped == text:
            return text
        text = dropped


_ZERO_WIDTH = frozenset({"Mn", "Me", "Cf"})


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font."""
    return sum(_char_width(c) for c in text)


def _char_width(char: str) -> int:
    if unicodedata.category(char) in _ZERO_WIDTH:
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def is_rule(line: str) -> bool:
    """A table's rule row (``|---|:--:|``), spaces aside."""
    squeezed = line.replace(" ", "").replace("\t", "")
    return "-" in squeezed and bool(_RULE.match(squeezed))


def cells(row: str) -> list[str]:
    """A row's cells (``\\|`` is a ``|`` inside one), each made safe for a code block."""
    row = row.strip().removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [_cell(c) for c in _SPLIT.split(row)]


def _cell(text: str) -> str:
    return " ".join(_drop_markers(text.replace("\\|", "|")).split())


def aligned(header: str, body: Sequence[str]) -> list[str] | None:
    """The table's lines with their columns lined up: the header, a rule, the rows (the
    first ``TABLE_ROWS``; the rest as written, their backticks dropped). None when it is
    too wide to line up (it is then left as written)."""
    rows = [cells(header)] + [cells(row) for row in body[:TABLE_ROWS]]
    columns = max(len(row) for row in rows)
    if columns > TABLE_COLUMNS:
        return None
    rows = [row + [""] * (columns - len(row)) for row in rows]
    widths = [max(display_width(row[c]) for row in rows) for c in range(columns)]
    if max(widths) > CELL_WIDTH:
        return None
    lines: list[str] = []
    for k, row in enumerate(rows):
        padded = (
            cell + " " * (w - display_width(cell)) for cell, w in zip(row, widths, strict=True)
        )
        lines.append(" | ".join(padded).rstrip())
        if k == 0:
            lines.append("-+-".join("-" * w for w in widths))
    lines += [_drop_markers(row) for row in body[TABLE_ROWS:]]
    return lines


def tables_as_code(markdown: str) -> str:
    """``markdown`` with each table outside code blocks as a code block of its aligned rows."""
    if "|" not in markdown:
        return markdown
    return "\n".join(_lines(markdown.split("\n")))


def _lines(lines: list[str]) -> Iterator[str]:
    in_code = False
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if FENCE_LINE.match(line):
            in_code = not in_code
        elif not in_code and "|" in line and i + 1 < n and is_rule(lines[i + 1]):
            end = i + 2
            while end < n and "|" in lines[end] and lines[end].strip():
                end += 1
            table = aligned(line, lines[i + 2 : end])
            yield from ([FENCE, *table, FENCE] if table is not None else lines[i:end])
            i = end
            continue
        yield line
        i += 1
