"""Block Kit pieces and outside text made safe for mrkdwn: limits, escaping and cutting, sections,
buttons and the approval controls. Pure functions, no I/O; ``adapters.slack.render`` builds
messages from them.

Text from outside is data. It is mrkdwn-escaped (``&``, ``<``, ``>``), so it cannot form
``<!channel>``, ``<@U…>``, ``<#C…>`` or a masked ``<url|label>`` link: the only ``<…>`` in a
payload are the mentions this module writes for the asker and whoever pressed Stop, source
links labelled with their URL's host, and an answer's own links shown as their URL. Code
fences in model text are broken (a zero-width space between backticks) except in answers,
whose Markdown is converted to mrkdwn by ``adapters.slack.markdown`` (the same rules:
escaped, a link's URL always shown, code blocks kept), and an open code block is closed
wherever the text is cut. Outside text is cut before it is escaped, by the length it will
have once escaped, so no cut falls inside ``&amp;``; rendered text is cut only outside
entities and ``<…>`` links. Every width and room computed here is clamped to at
least ``MIN_ROOM``, so no loop can stall on a zero-sized piece.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from adapters.slack.approval import (
    ALWAYS_ACTION_ID,
    APPROVE_ACTION_ID,
    DENY_ACTION_ID,
    EDIT_ACTION_ID,
    ApprovalRef,
    editable,
)
from adapters.slack.markdown import escape, plain, plain_len, to_mrkdwn
from adapters.words import BUTTONS, Label
from core.events import ApprovalDecided, ApprovalRequested
from core.trace import ApprovalRecord, source_domain

Block = dict[str, Any]

STOP_ACTION_ID = "reactbot_stop"

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
MESSAGE_BUDGET = 4000
"""Characters of block text per message: readable, and a third of Slack's ~12,000-character
ceiling, whose per-block overhead is undocumented."""
FALLBACK_LIMIT = 300
MIN_ROOM = 80
QUESTION_LIMIT = 600
COMPACT_QUESTION = 200
STATUS_LIMIT = 200
NAME_LIMIT = 40
THOUGHT_LIMIT = 1200
ACTION_LIMIT = 300
STEP_LINE_LIMIT = 160
FOLD_LINES = 3
FOLD_CHARS = 400
ANSWER_LIMIT = 2000
"""The answer's room in the root message (live and final); a longer one goes on in the thread."""
REASON_LIMIT = 600
SOURCES_ROOM = 600
LINK_URL_LIMIT = 500
"""Longer source URLs are named by their host without a link: a link costs its whole URL."""
CHUNK = SECTION_LIMIT - 100
"""Room for one piece of a long text in the thread, beside its label and fences."""
ANSWER_PARTS = 30
"""The thread carries answers up to ~85,000 characters; longer ones are cut."""
CURSOR = "▍"
DECISION_LIMIT = 300
"""A decision line in the live or final message (the reason and edits cut); the thread's
may take ``DECISION_TRACE_LIMIT``."""
DECISION_TRACE_LIMIT = 800
PENDING_INPUT_LIMIT = 1200
"""The pending action's input in the live message (the Edit modal shows all of it)."""

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_SAFE_URL = re.compile(r"^https?://[^\s<>|]+$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
FENCE = "```"
_CLOSE = "\n```"


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """A ``chat.postMessage``/``chat.update`` body: ``text`` is the notification fallback."""

    text: str
    blocks: tuple[Block, ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": list(self.blocks)}

    @property
    def size(self) -> int:
        return sum(block_size(b) for b in self.blocks)


# ---- outside text into mrkdwn -------------------------------------------------------------


def _end_within(text: str, start: int, room: int) -> int:
    """The largest ``end`` such that ``text[start:end]`` rendered takes at most ``room``
    characters (at least one character, so callers always move on)."""
    low, high = start, min(len(text), start + max(room, 0))  # a character renders to >= 1
    while low < high:  # binary search: the rendered length grows with the end
        mid = (low + high + 1) // 2
        if plain_len(text[start:mid]) <= room:
            low = mid
        else:
            high = mid - 1
    return max(low, min(start + 1, len(text)))


def _start_within(text: str, room: int) -> int:
    """The smallest ``start`` such that ``text[start:]`` rendered (fences broken) takes at
    most ``room`` characters."""
    low, high = max(0, len(text) - max(room, 0)), len(text)
    while low < high:
        mid = (low + high) // 2
        if plain_len(text[mid:]) <= room:
            high = mid
        else:
            low = mid + 1
    return low


def prose(text: str, limit: int) -> str:
    """Outside text for a mrkdwn field: escaped, fences broken, at most ``limit`` characters
    (cut at the end with "…")."""
    limit = max(limit, MIN_ROOM)
    end = _end_within(text, 0, limit - 1)
    if end >= len(text):
        return plain(text)
    return plain(text[:end]).rstrip() + "…"


def prose_tail(text: str, limit: int) -> str:
    """Like ``prose`` but keeps the end: the text that just arrived."""
    limit = max(limit, MIN_ROOM)
    start = _start_within(text, limit - 1)
    if start == 0:
        return plain(text)
    return "…" + plain(text[start:]).lstrip()


def answer_text(text: str, limit: int) -> str:
    """An answer for a mrkdwn field: its Markdown as mrkdwn (``adapters.slack.markdown``:
    escaped, no masked links, code blocks kept), at most ``limit`` characters, cut where
    nothing breaks and an open code block closed."""
    return fit(to_mrkdwn(text), limit)


def _close_fence(mrkdwn: str) -> str:
    return mrkdwn + _CLOSE if mrkdwn.count(FENCE) % 2 else mrkdwn


def fit(mrkdwn: str, limit: int) -> str:
    """Rendered mrkdwn in at most ``limit`` characters, cut where nothing breaks (not inside
    an entity, a ``<…>`` link or mention, or a run of backticks) and with an open code block
    closed. The last line of defence: rendering normally leaves nothing for it to cut."""
    limit = max(limit, MIN_ROOM)
    if len(mrkdwn) <= limit and mrkdwn.count(FENCE) % 2 == 0:
        return mrkdwn
    if len(mrkdwn) + len(_CLOSE) <= limit:
        return _close_fence(mrkdwn)
    cut = _safe_cut(mrkdwn, limit - 1 - len(_CLOSE))
    return _close_fence(mrkdwn[:cut].rstrip() + "…")


def _safe_cut(text: str, at: int) -> int:
    at = max(0, min(at, len(text)))
    amp = text.rfind("&", max(0, at - 4), at)
    if amp >= 0 and ";" not in text[amp:at]:
        at = amp
    opened = text.rfind("<", 0, at)
    if opened > text.rfind(">", 0, at):
        at = opened
    while 0 < at < len(text) and text[at - 1] == "`" and text[at] == "`":
        at -= 1
    return at


def fold(text: str, *, lines: int = FOLD_LINES, limit: int = FOLD_CHARS) -> str:
    """The first few lines of an observation and how much was left out, rendered."""
    body = text.strip()
    kept = "\n".join(body[: limit * 2].splitlines()[:lines])
    shown = min(len(kept), _end_within(kept, 0, max(limit, MIN_ROOM) - 1))
    hidden = len(body) - shown
    return prose(kept, limit) + (f"\n(+{hidden:,} chars)" if hidden > 0 else "")


def quote(mrkdwn: str) -> str:
    return "\n".join(f"&gt; {line}" for line in mrkdwn.splitlines() or [""])


def code_span(text: str, limit: int) -> str:
    # A backtick inside would end the span, a newline would break it; Slack escapes neither.
    flat = text.replace("`", "'").replace("\n", " ")
    return "`" + (prose(flat, limit) if flat.strip() else " ") + "`"


def code_block(mrkdwn: str) -> str:
    """``mrkdwn`` (already rendered, fences broken) inside a code block."""
    return f"{FENCE}\n{mrkdwn}\n{FENCE}"


def mention(user: str | None) -> str:
    """A real mention for a Slack user id we put there ourselves; anything else is escaped."""
    if not user:
        return "someone"
    return f"<@{user}>" if _USER_ID.match(user) else prose(user, NAME_LIMIT)


def link(url: str) -> str:
    """A source: ``<url|host>`` for a plain http(s) URL, else its host (or the text) escaped."""
    if len(url) <= LINK_URL_LIMIT and _SAFE_URL.match(url):
        try:
            netloc = urllib.parse.urlsplit(url).netloc
        except ValueError:  # an unbalanced [ in the host part: not a plain URL
            netloc = ""
        if netloc and "@" not in netloc and _HOST.match(netloc):
            return f"<{escape(url)}|{escape(source_domain(url))}>"
    return prose(source_domain(url) or url or "?", NAME_LIMIT)


def links(urls: Sequence[str], room: int) -> str:
    """As many whole source links as fit in ``room`` characters, in order."""
    room = max(room, MIN_ROOM)
    kept: list[str] = []
    used = 0
    for url in urls:
        item = link(url)
        if used + len(item) + 2 <= room:
            kept.append(item)
            used += len(item) + 2
    return ", ".join(kept)


def block_size(block: Block) -> int:
    """Characters of visible text in a block (what counts against the message budget)."""
    size = 0
    text = block.get("text")
    if isinstance(text, dict):
        size += len(text.get("text", ""))
    for element in block.get("elements", ()):
        if isinstance(element, dict) and isinstance(element.get("text"), str):
            size += len(element["text"])
    return size


# ---- blocks -------------------------------------------------------------------------------


def section(text: str, *, accessory: Block | None = None) -> Block:
    block: Block = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": fit(text, SECTION_LIMIT) if text.strip() else "…"},
    }
    if accessory is not None:
        block["accessory"] = accessory
    return block


def context(text: str) -> Block:
    body = fit(text, SECTION_LIMIT) if text.strip() else "…"
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": body}]}


RETRY_ACTION_ID = "reactbot_retry"


def retry_block(run_id: str) -> Block:
    """Under an answer a restart interrupted: asks its question again."""
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": RETRY_ACTION_ID,
                "text": {"type": "plain_text", "text": str(BUTTONS["retry"]), "emoji": True},
                "value": run_id,
            }
        ],
    }


def stop_button(run_id: str, asker: str) -> Block:
    return {
        "type": "button",
        "action_id": STOP_ACTION_ID,
        "text": {"type": "plain_text", "text": str(BUTTONS["stop"]), "emoji": True},
        "style": "danger",
        "value": stop_value(run_id, asker),
    }


def stop_value(run_id: str, asker: str) -> str:
    """The button carries the asker too: a replica that does not run this run (and so does
    not know who asked) must still decide who may press it. Slack takes 2000 characters;
    an asker that long is no Slack user id, and the run's own replica knows who asked."""
    value = f"{run_id}:{asker}"
    return value if len(value) <= 2000 else run_id


def parse_stop_value(value: str) -> tuple[str, str | None]:
    """``(run_id, asker)``; the asker is None for a value holding only the run id."""
    run_id, _, asker = value.partition(":")
    return run_id, asker or None


# ---- approvals -----------------------------------------------------------------------------

_BY = "\x00by\x00"
"""Stands in for the person in ``describe()``'s words until they are escaped; then the first
one (``describe()`` names the person before any outside text) becomes the mention."""


def record_of(event: ApprovalDecided) -> ApprovalRecord:
    return ApprovalRecord(event.outcome, event.by, reason=event.reason, remembered=event.remembered)


def decision_line(
    record: ApprovalRecord, *, timeout: float | None = None, limit: int = DECISION_LIMIT
) -> str:
    """``✅ approved by <@U1ADA>``, ``🚫 denied by <@U1ADA>: "not that one"``: the record's
    ``describe()`` as mrkdwn, escaped and cut to ``limit`` characters (plus the mention);
    a timeout says how long was waited when ``timeout`` is known."""
    if record.outcome == "timeout" and timeout:
        return f"⌛ no decision in {duration(timeout)}: denied"
    marked = replace(record, by=_BY if record.by else None)
    line = prose(marked.describe(), limit)
    return line.replace(_BY, mention(record.by), 1) if record.by else line


def decision_mark(record: ApprovalRecord) -> str:
    """The short form for a step line: who decided how, without the reason or the edit."""
    if record.outcome == "timeout":
        return "⌛ no decision: denied"
    bare = replace(record, input=None, reason="", remembered=False)
    return decision_line(bare, limit=NAME_LIMIT + 40)


def duration(seconds: float) -> str:
    """``0.5 s``, ``45 s``, ``5 min``, ``24 h``."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{round(seconds, 1):g} s"
    if seconds < 7200:
        return f"{round(seconds / 60):g} min"
    return f"{round(seconds / 3600, 1):g} h"


def countdown(remaining: float) -> str:
    """When an undecided action is denied, coarse enough that the message changes at most
    once a minute until the last two minutes (then every 15 s): each change is an edit."""
    if remaining >= 7200:
        return f"in {math.ceil(remaining / 3600)} h"
    if remaining >= 120:
        return f"in {math.ceil(remaining / 60)} min"
    if remaining >= 15:
        return f"in {math.ceil(remaining / 15) * 15} s"
    return "in a few seconds"


def approval_button(label: Label, action_id: str, value: str, *, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": str(label), "emoji": True},
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def approval_buttons(ref: ApprovalRef, pending: ApprovalRequested) -> Block:
    """Approve, Edit… (when the input fits the modal's field), Deny, and Allow in this
    conversation (when the policy remembers), in one ``actions`` block."""
    value = ref.encode()
    buttons = [approval_button(BUTTONS["approve"], APPROVE_ACTION_ID, value, style="primary")]
    if editable(pending.input):
        buttons.append(approval_button(BUTTONS["edit"], EDIT_ACTION_ID, value))
    buttons.append(approval_button(BUTTONS["deny"], DENY_ACTION_ID, value, style="danger"))
    if pending.remember:
        buttons.append(approval_button(BUTTONS["always"], ALWAYS_ACTION_ID, value))
    return {"type": "actions", "elements": buttons}


def answer_is_cut(answer: str) -> bool:
    """The root message could not show all of ``answer``: the thread carries it whole."""
    return len(to_mrkdwn(answer.strip())) > max(ANSWER_LIMIT, MIN_ROOM)
