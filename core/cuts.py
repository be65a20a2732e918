"""Text shortened for a message, where it reads well, saying so truthfully.

``shorten(text, limit)`` keeps ``text`` whole when it fits (or is at most a tenth over), or
when the line that says what was cut would be longer than the cut itself; otherwise it cuts before the last Markdown
heading in the second half of the room (a how-to loses whole steps, not half a sentence),
else after a paragraph, a line or a word, and ends with ``CUT_NOTE``. Whoever shortens says
where the whole is: the agent's observations are kept whole in the trace (``Trace``
serialises every step's observation; only a stored trace over ``redis.max_trace_bytes``,
1 MiB compressed by default, has its longest results cut, each saying so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CUT_NOTE", "Cut", "cut_in", "shorten"]

CUT_NOTE = "[… {rest:,} more characters not shown here; the trace keeps the whole text]"
_CUT_NOTE_RE = re.compile(
    r"\n*\[… (?P<rest>[\d,]+) more characters not shown here; the trace keeps the whole text\]"
    r"\s*\Z"
)
SLACK = 10
"""A text at most a tenth over the limit is kept whole."""
_HEADING = re.compile(r"\n(?=#{1,6} )")


def shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters (plus the note when cut; at most a tenth more
    when whole), never cut
    mid-word when a space is in reach, never with a note longer than what it replaces."""
    if len(text) <= limit + limit // SLACK:
        return text  # cutting the last tenth saves the reader little and costs the whole
    cut = _boundary(text, limit)
    rest = len(text) - cut
    note = CUT_NOTE.format(rest=rest)
    if len(note) + 2 >= rest:  # saying so would take more room than the text it leaves out
        return text
    return f"{text[:cut].rstrip()}\n\n{note}"


def _boundary(text: str, limit: int) -> int:
    """Where to cut ``text`` at most ``limit`` characters in: before a heading, after a
    paragraph, a line or a word, when one is in the second half; else at ``limit``."""
    floor = limit // 2
    headings = [m.start() for m in _HEADING.finditer(text, floor, limit + 1)]
    if headings:
        return headings[-1]
    for mark in ("\n\n", "\n", " "):
        at = text.rfind(mark, floor, limit + 1)
        if at > floor:
            return at
    return limit


@dataclass(frozen=True, slots=True)
class Cut:
    """What ``cut_in`` found: the text shown, and how many characters were left out."""

    shown: str
    rest: int


def cut_in(text: str) -> Cut | None:
    """The shown part and the count when ``text`` ends with ``CUT_NOTE``; None otherwise."""
    found = _CUT_NOTE_RE.search(text)
    if found is None:
        return None
    return Cut(text[: found.start()].rstrip(), int(found.group("rest").replace(",", "")))
