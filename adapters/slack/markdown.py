"""A model's Markdown answer as Slack mrkdwn that renders, with the rules of outside text kept.

Answers sent by ``chat.postMessage`` / ``chat.update`` are ``mrkdwn`` section text, which
knows ``*bold*``, ``_italic_``, ``~strike~``, `` `code` ``, fenced code blocks, ``>`` quotes
and ``<url>`` links, and nothing else. Models write CommonMark; shown as typed, ``**bold**``,
``## headings``, ``[text](url)`` and tables read as noise. ``to_mrkdwn`` converts line by line:

- headings become a bold line; ``**x**`` / ``__x__`` bold, ``*x*`` italic, ``~~x~~`` strike;
- ``-``/``*``/``+`` items become ``•`` items (nesting kept), numbered items stay numbered;
- fenced code blocks stay code blocks (the language tag dropped: mrkdwn has none), an open
  one is closed at the end; inline code stays inline code;
- a table (a header row, a ``|---|`` row, body rows) becomes a code block with its columns
  aligned, since mrkdwn has no tables;
- ``> quote`` stays a quote; a thematic break becomes a line.

And what outside text may never do, it still cannot: everything is escaped (``&``, ``<``,
``>``), so no ``<!here>``, ``<@U…>``, ``<#C…>`` or ``<url|label>`` can form; a link whose text
is not its URL shows the text and then the URL (never a masked link); only http(s) URLs of
reasonable length become links; ``@here`` / ``@channel`` / ``@everyone`` get a zero-width
space after the ``@``. Every pattern scans to the next delimiter at most, so the conversion is
linear in the text (tests/unit/test_slack_markdown.py holds it to that and to these rules).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from adapters.tables import display_width
from core.text import neutral_bidi

FENCE = "```"
ZWSP = "\u200b"
LINK_URL_LIMIT = 500
"""Longer URLs stay text: a link costs its whole URL, and Slack links bare URLs itself."""
TABLE_COLUMNS = 12
CELL_WIDTH = 40
TABLE_ROWS = 100
"""Rows aligned in one table; the rest of a longer one follows as its rows were written."""
RULE = "──────────"

_FENCE_LINE = re.compile(r"^[ ]{0,3}(```+|~~~+)")
_HEADING = re.compile(r"^[ ]{0,3}#{1,6}[ \t]+(.*)$")
_RULE_LINE = re.compile(r"^[ ]{0,3}([-*_])[ \t]*(?:\1[ \t]*){2,}$")
_QUOTE = re.compile(r"^[ ]{0,3}>[ \t]?(.*)$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+(.*)$")
_NUMBERED = re.compile(r"^([ \t]*)(\d{1,9})[.)][ \t]+(.*)$")
_TABLE_RULE = re.compile(r"^\|?:?-+:?(?:\|:?-+:?)*\|?$")
"""A table's rule row, once its spaces are taken out."""
_SAFE_URL = re.compile(r"^https?://[^\s<>|\[\]()`]+$", re.IGNORECASE)
_BROADCAST = re.compile(r"@(?=(?:here|channel|everyone)\b)", re.IGNORECASE)
_TICKS = re.compile(r"`(?=`)")

# One pass over a line, left to right; each alternative stops at its next delimiter.
_INLINE = re.compile(
    r"(?P<code>`{1,3})(?P<code_body>[^`\n]+?)(?P=code)"  # inline code
    r"|!?\[(?P<label>[^\[\]\n]*)\]\(<?(?P<url>[^\s()<>]*)>?(?: \"[^\"\n]*\")?\)"  # link
    r"|<(?P<auto>https?://[^\s<>]*)>"  # autolink
    r"|(?P<bold>\*\*|__)(?=[^\s*_])(?P<bold_body>[^*_\n]+?)(?<=\S)(?P=bold)"
    r"|(?<![\w*])\*(?=[^\s*])(?P<em_body>[^*\n]+?)(?<=\S)\*(?![\w*])"
    r"|~~(?=\S)(?P<strike_body>[^~\n]+?)(?<=\S)~~",
    re.IGNORECASE,
)


def escape(text: str) -> str:
    """Slack's three control characters, and no broadcast word after an ``@``: after this,
    text cannot form a mention, a broadcast or a link."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return neutral_bidi(_BROADCAST.sub("@" + ZWSP, text))


def broadcasts(text: str) -> int:
    """How many characters ``escape`` adds for broadcast words (one each)."""
    return len(_BROADCAST.findall(text))


def defuse(mrkdwn: str) -> str:
    """No two backticks side by side, so no code fence (Slack has no escape for one)."""
    return _TICKS.sub("`" + ZWSP, mrkdwn)


def plain(text: str) -> str:
    """Outside text as mrkdwn that shows it as typed: escaped, no code fence."""
    return defuse(escape(text))


def plain_len(text: str) -> int:
    """``len(plain(text))``, without building it."""
    size = len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))
    return size + broadcasts(text) + len(_TICKS.findall(text))


def safe_url(url: str) -> bool:
    return len(url) <= LINK_URL_LIMIT and bool(_SAFE_URL.match(url))


def link(url: str) -> str:
    """``<url>``, shown as itself, for a plain http(s) URL; anything else stays text."""
    return f"<{escape(url)}>" if safe_url(url) else plain(url)


def _link(label: str, url: str) -> str:
    shown = inline(label).strip()
    if not url:
        return shown or "[]()"
    if not shown or label.strip().rstrip("/") == url.rstrip("/"):
        return link(url)
    return f"{shown} ({link(url)})"


def inline(line: str) -> str:
    """One line of Markdown's inline forms as mrkdwn, everything else escaped."""
    out: list[str] = []
    at = 0
    for match in _INLINE.finditer(line):
        out.append(plain(line[at : match.start()]))
        out.append(_inline_one(match))
        at = match.end()
    out.append(plain(line[at:]))
    # Two spans side by side ("`a``b`") would make a fence of their backticks: keep them apart.
    return defuse("".join(out))


def _inline_one(match: re.Match[str]) -> str:
    groups = match.groupdict()
    if groups["code"] is not None:
        body = groups["code_body"].replace("`", "'")
        return "`" + (escape(body) if body.strip() else " ") + "`"
    if groups["url"] is not None:
        return _link(groups["label"] or "", groups["url"])
    if groups["auto"] is not None:
        return link(groups["auto"])
    if groups["bold_body"] is not None:
        return f"*{plain(groups['bold_body'])}*"
    if groups["em_body"] is not None:
        return f"_{plain(groups['em_body'])}_"
    return f"~{plain(groups['strike_body'])}~"


def to_mrkdwn(text: str) -> str:
    """The whole of ``text`` (Markdown) as mrkdwn; code blocks balanced."""
    return "\n".join(_lines(text.split("\n")))


def _lines(lines: list[str]) -> Iterator[str]:
    fence: str | None = None
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        opened = _FENCE_LINE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
                yield FENCE
            else:
                yield plain(line)
            i += 1
            continue
        if opened:
            fence = opened.group(1)
            yield FENCE
            i += 1
            continue
        if "|" in line and i + 1 < n and _is_table_rule(lines[i + 1]):
            end = i + 2
            while end < n and "|" in lines[end] and lines[end].strip():
                end += 1
            yield from _table(lines[i], lines[i + 2 : end])
            i = end
            continue
        yield _block_line(line)
        i += 1
    if fence is not None:
        yield FENCE


def _is_table_rule(line: str) -> bool:
    return "-" in line and bool(_TABLE_RULE.match(line.replace(" ", "").replace("\t", "")))


def _block_line(line: str) -> str:
    if heading := _HEADING.match(line):
        body = _heading_text(heading.group(1))
        return f"*{inline(body)}*" if body else ""
    if _RULE_LINE.match(line):
        return RULE
    if quoted := _QUOTE.match(line):
        return "&gt; " + inline(quoted.group(1))
    if bullet := _BULLET.match(line):
        return _indent(bullet.group(1)) + "• " + inline(bullet.group(2))
    if numbered := _NUMBERED.match(line):
        return _indent(numbered.group(1)) + f"{numbered.group(2)}. " + inline(numbered.group(3))
    return inline(line)


def _heading_text(text: str) -> str:
    """A heading's text without its closing ``#``s (only when a space comes before them: "C#"
    keeps its ``#``) and without bold markers (the whole line is bold)."""
    text = text.strip()
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip()
    return text.replace("**", "").replace("__", "")


def _indent(whitespace: str) -> str:
    depth = min(len(whitespace.expandtabs(4)) // 2, 6)
    return "    " * depth


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row.removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    cells = [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", row)]
    return [_cell(c) for c in cells[:TABLE_COLUMNS]]


def _cell(text: str) -> str:
    text = text.replace("**", "").replace("__", "").replace("`", "")
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def _table(header: str, body: list[str]) -> Iterator[str]:
    """A Markdown table as a code block, columns padded to line up in a monospace font."""
    rows = [_cells(header)] + [_cells(row) for row in body[:TABLE_ROWS]]
    columns = max(len(row) for row in rows)
    rows = [row + [""] * (columns - len(row)) for row in rows]
    # Padded by the columns a character takes in a monospace font (a CJK character two, a
    # combining mark none), as adapters.tables pads Telegram's tables.
    widths = [max(display_width(row[c]) for row in rows) for c in range(columns)]
    yield FENCE
    for k, row in enumerate(rows):
        line = " | ".join(
            cell + " " * (w - display_width(cell)) for cell, w in zip(row, widths, strict=True)
        )
        yield plain(line.rstrip())
        if k == 0:
            yield plain("-+-".join("-" * w for w in widths))
    for row_text in body[TABLE_ROWS:]:
        yield plain(row_text)
    yield FENCE
